//! `SledMerkleTree`: tree-core's semantics and rehash engine over a [`NodeStore`].

use hasher::{Digest, DigestCodec};
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use tree_core::history::{value_at, CheckpointList, Checkpoints};
use tree_core::rehash::{apply_writes, hash_level, NodeLevels};
use tree_core::{
    CheckpointInfo, Depth, EmptyRoots, History, HistoryConfig, MerkleProof, MerkleTree, NodeAddr,
    RehashConfig, UpdateBatch,
};

use std::cell::RefCell;

use crate::keys::{
    checkpoint_key, chunk_key, decode_undo, deleted_key, encode_undo, parse_checkpoint_key,
    parse_chunk_key, parse_deleted_key, parse_undo_key, undo_key, undo_prefix, ChunkAddr,
    CHECKPOINT_PREFIX, CHUNK_BITS, CHUNK_NODES, COMMITS_KEY, DELETED_PREFIX, DEPTH_KEY,
    DIGEST_LEN_KEY, FORMAT_VERSION, FORMAT_VERSION_KEY, HASHER_KEY, HISTORY_KEY, METADATA_KEY,
    NEXT_INDEX_KEY, NODE_PREFIX, UNDO_PREFIX,
};
use crate::store::{NodeStore, SledStore, StoreBatch};
use crate::{SledConfig, SledTreeError};

/// The error type of a tree over store `S`.
pub type StoreTreeError<S> = SledTreeError<<S as NodeStore>::Error>;

/// A stored node whose value disagrees with its children, found by
/// [`SledMerkleTree::verify_integrity`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityIssue<D> {
    /// The node.
    pub addr: NodeAddr,
    /// What the store holds there.
    pub stored: D,
    /// What its children hash to.
    pub computed: D,
}

/// A persistent Merkle tree. Same semantics, roots and proofs as tree-core's trees.
///
/// `apply` is atomic: the nodes it changes, `next_index`, deleted slots and metadata are one
/// store batch, all or nothing, crash or not. It is durable at once with
/// [`Durability::EveryCommit`](crate::Durability::EveryCommit), otherwise after
/// [`flush`](Self::flush) or the next periodic flush. Opening reads the header, counters and root
/// only, whatever the number of leaves.
///
/// ```
/// use hasher::{Fr, PoseidonHasher};
/// use tree_core::{Depth, MerkleTree, MerkleTreeExt};
/// use tree_sled::{SledConfig, SledMerkleTree};
///
/// let dir = tempfile::tempdir()?;
/// let depth = Depth::new(20)?;
/// let root = {
///     let mut tree = SledMerkleTree::<PoseidonHasher>::open(&SledConfig::new(dir.path()), depth)?;
///     tree.override_range(0, [Fr::from(1u64), Fr::from(2u64)], [])?;
///     tree.close()?;
///     tree.root()
/// };
/// let tree = SledMerkleTree::<PoseidonHasher>::open(&SledConfig::new(dir.path()), depth)?;
/// assert_eq!((tree.root(), tree.next_index()), (root, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SledMerkleTree<H: DigestCodec, S: NodeStore = SledStore> {
    store: S,
    depth: Depth,
    empty: EmptyRoots<H>,
    root: Digest<H>,
    next_index: u64,
    metadata: Vec<u8>,
    config: RehashConfig,
    /// Chunks at levels `>= cache_from` (the top of the tree), filled on read and on commit.
    cache: Mutex<FxHashMap<ChunkAddr, Vec<Digest<H>>>>,
    cache_from: u8,
    /// Retention settings (persisted under `Mhistory`).
    history: HistoryConfig,
    /// The retained checkpoints (their records are in the store; this mirrors them).
    checkpoints: CheckpointList<Digest<H>>,
    /// Bumped by every commit and reload: what `publish` checks a prepared batch against.
    generation: u64,
    /// Set when a failed commit may have reached the store: the store's view and the tree's
    /// disagree and only a reopen tells which is durable, so every store access is refused.
    indeterminate: bool,
    /// The stored commit counter (`M commits`).
    commits: u64,
}

impl<H: DigestCodec> SledMerkleTree<H, SledStore> {
    /// Opens the tree at `config`'s path, creating it if the path holds no database.
    ///
    /// # Errors
    /// [`SledTreeError::Locked`], [`SledTreeError::DepthMismatch`],
    /// [`SledTreeError::HasherMismatch`], [`SledTreeError::FormatVersion`],
    /// [`SledTreeError::Corrupted`], [`SledTreeError::NotATree`], I/O and sled errors. A load
    /// error never falls back to a fresh tree.
    pub fn open(config: &SledConfig, depth: Depth) -> Result<Self, SledTreeError> {
        let store = SledStore::open(config)?;
        Self::open_store(store, depth, RehashConfig::default(), config.cached_levels)
    }

    /// Opens an existing tree at `config`'s path with the depth stored in its header (tools that
    /// operate on a database they did not create).
    ///
    /// # Errors
    /// [`SledTreeError::NotATree`] when the path holds no tree, and as [`SledMerkleTree::open`].
    pub fn open_existing(config: &SledConfig) -> Result<Self, SledTreeError> {
        // Never create a database here: a missing directory is "not a tree".
        if config.path.as_deref().is_some_and(|p| !p.exists()) {
            return Err(SledTreeError::NotATree);
        }
        let store = SledStore::open(config)?;
        let depth = match store
            .get(DEPTH_KEY)
            .map_err(SledTreeError::Store)?
            .as_deref()
        {
            Some([depth]) => Depth::new(*depth).map_err(|_| SledTreeError::Corrupted {
                key: DEPTH_KEY.to_vec(),
                reason: "depth outside 1..=63",
            })?,
            Some(_) => {
                return Err(SledTreeError::Corrupted {
                    key: DEPTH_KEY.to_vec(),
                    reason: "expected 1 byte",
                })
            }
            None => return Err(SledTreeError::NotATree),
        };
        Self::open_store(store, depth, RehashConfig::default(), config.cached_levels)
    }

    /// Bytes the database takes on disk.
    ///
    /// # Errors
    /// sled's error.
    pub fn size_on_disk(&self) -> Result<u64, SledTreeError> {
        self.store.size_on_disk().map_err(SledTreeError::Store)
    }
}

fn decode_u64<E: std::error::Error>(key: &[u8], bytes: &[u8]) -> Result<u64, SledTreeError<E>> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| SledTreeError::Corrupted {
            key: key.to_vec(),
            reason: "expected 8 bytes",
        })
}

fn decode_u32<E: std::error::Error>(key: &[u8], bytes: &[u8]) -> Result<u32, SledTreeError<E>> {
    <[u8; 4]>::try_from(bytes)
        .map(u32::from_be_bytes)
        .map_err(|_| SledTreeError::Corrupted {
            key: key.to_vec(),
            reason: "expected 4 bytes",
        })
}

/// The stored commit counter (absent = 0).
fn stored_commits<S: NodeStore>(store: &S) -> Result<u64, SledTreeError<S::Error>> {
    match store.get(COMMITS_KEY).map_err(SledTreeError::Store)? {
        Some(bytes) => decode_u64(COMMITS_KEY, &bytes),
        None => Ok(0),
    }
}

impl<H: DigestCodec, S: NodeStore> SledMerkleTree<H, S> {
    /// Opens a tree over any store: initialises an empty store in one batch, or checks the
    /// stored header (format version, depth, hasher, digest length) and loads the root and
    /// counters. `cached_levels` levels below the root are cached in memory.
    ///
    /// # Errors
    /// As [`SledMerkleTree::open`].
    pub fn open_store(
        store: S,
        depth: Depth,
        config: RehashConfig,
        cached_levels: u8,
    ) -> Result<Self, StoreTreeError<S>> {
        let digest_len = u32::try_from(H::LEN).unwrap_or(u32::MAX);
        let version = store
            .get(FORMAT_VERSION_KEY)
            .map_err(SledTreeError::Store)?;
        let (next_index, metadata, commits) = match version {
            None => {
                if !store.is_empty().map_err(SledTreeError::Store)? {
                    return Err(SledTreeError::NotATree);
                }
                let mut batch = StoreBatch::default();
                batch.insert(FORMAT_VERSION_KEY, FORMAT_VERSION.to_be_bytes().to_vec());
                batch.insert(DEPTH_KEY, vec![depth.get()]);
                batch.insert(HASHER_KEY, H::ID.as_bytes().to_vec());
                batch.insert(DIGEST_LEN_KEY, digest_len.to_be_bytes().to_vec());
                batch.insert(NEXT_INDEX_KEY, 0u64.to_be_bytes().to_vec());
                store.commit(batch).map_err(SledTreeError::Store)?;
                store.flush().map_err(SledTreeError::Store)?;
                (0, Vec::new(), 0)
            }
            Some(bytes) => {
                let found = decode_u32(FORMAT_VERSION_KEY, &bytes)?;
                if found != FORMAT_VERSION {
                    return Err(SledTreeError::FormatVersion {
                        found,
                        supported: FORMAT_VERSION,
                    });
                }
                let get = |key: &'static [u8]| -> Result<Vec<u8>, StoreTreeError<S>> {
                    store
                        .get(key)
                        .map_err(SledTreeError::Store)?
                        .ok_or(SledTreeError::Corrupted {
                            key: key.to_vec(),
                            reason: "header field missing",
                        })
                };
                match get(DEPTH_KEY)?.as_slice() {
                    [stored] if *stored == depth.get() => {}
                    [stored] => {
                        return Err(SledTreeError::DepthMismatch {
                            stored: *stored,
                            requested: depth.get(),
                        })
                    }
                    _ => {
                        return Err(SledTreeError::Corrupted {
                            key: DEPTH_KEY.to_vec(),
                            reason: "expected 1 byte",
                        })
                    }
                }
                let hasher = get(HASHER_KEY)?;
                if hasher != H::ID.as_bytes() {
                    return Err(SledTreeError::HasherMismatch {
                        stored: String::from_utf8_lossy(&hasher).into_owned(),
                        requested: H::ID,
                    });
                }
                if decode_u32(DIGEST_LEN_KEY, &get(DIGEST_LEN_KEY)?)? != digest_len {
                    return Err(SledTreeError::Corrupted {
                        key: DIGEST_LEN_KEY.to_vec(),
                        reason: "digest length differs from the hasher's",
                    });
                }
                let next_index = decode_u64(NEXT_INDEX_KEY, &get(NEXT_INDEX_KEY)?)?;
                if next_index > depth.capacity() {
                    return Err(SledTreeError::Corrupted {
                        key: NEXT_INDEX_KEY.to_vec(),
                        reason: "next_index exceeds capacity",
                    });
                }
                let metadata = store
                    .get(METADATA_KEY)
                    .map_err(SledTreeError::Store)?
                    .unwrap_or_default();
                (next_index, metadata, stored_commits(&store)?)
            }
        };
        let empty = EmptyRoots::<H>::new(depth);
        let mut tree = Self {
            store,
            depth,
            root: empty.at(depth.get()),
            empty,
            next_index,
            metadata,
            config,
            cache: Mutex::new(FxHashMap::default()),
            cache_from: depth.get().saturating_sub(cached_levels.saturating_sub(1)),
            history: HistoryConfig::default(),
            checkpoints: CheckpointList::default(),
            generation: 0,
            indeterminate: false,
            commits,
        };
        tree.load_history()?;
        if cached_levels == 0 {
            tree.cache_from = u8::MAX;
        }
        tree.root = tree.read_node(NodeAddr::root(depth))?;
        Ok(tree)
    }

    /// Decodes a stored chunk; a wrong length or a non-canonical node is `Corrupted`.
    fn decode_chunk(key: &[u8], bytes: &[u8]) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        if bytes.len() != CHUNK_NODES * H::LEN {
            return Err(SledTreeError::Corrupted {
                key: key.to_vec(),
                reason: "node chunk has the wrong length",
            });
        }
        bytes
            .chunks_exact(H::LEN)
            .map(|node| {
                H::decode(node).map_err(|_| SledTreeError::Corrupted {
                    key: key.to_vec(),
                    reason: "node bytes are not a canonical digest",
                })
            })
            .collect()
    }

    /// The chunk's nodes as stored (the level's empty value where nothing is), through the
    /// top-level cache.
    fn chunk_values(&self, chunk: ChunkAddr) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        let cached = chunk.level >= self.cache_from;
        if cached {
            if let Some(values) = self.cache.lock().get(&chunk) {
                return Ok(values.clone());
            }
        }
        let key = chunk_key(chunk);
        let values = match self.live()?.get(&key).map_err(SledTreeError::Store)? {
            None => vec![self.empty.at(chunk.level); CHUNK_NODES],
            Some(bytes) => Self::decode_chunk(&key, &bytes)?,
        };
        if cached {
            self.cache.lock().insert(chunk, values.clone());
        }
        Ok(values)
    }

    /// Reads a node (empty-subtree value where none is stored). Below the cached levels only
    /// the node's own slot is decoded.
    fn read_node(&self, addr: NodeAddr) -> Result<Digest<H>, StoreTreeError<S>> {
        let (chunk, slot) = ChunkAddr::of(addr);
        if chunk.level >= self.cache_from {
            if let Some(values) = self.cache.lock().get(&chunk) {
                return Ok(values[slot]);
            }
            return Ok(self.chunk_values(chunk)?[slot]);
        }
        let key = chunk_key(chunk);
        match self.live()?.get(&key).map_err(SledTreeError::Store)? {
            None => Ok(self.empty.at(addr.level)),
            Some(bytes) if bytes.len() == CHUNK_NODES * H::LEN => {
                let node = &bytes[slot * H::LEN..(slot + 1) * H::LEN];
                H::decode(node).map_err(|_| SledTreeError::Corrupted {
                    key: key.to_vec(),
                    reason: "node bytes are not a canonical digest",
                })
            }
            Some(_) => Err(SledTreeError::Corrupted {
                key: key.to_vec(),
                reason: "node chunk has the wrong length",
            }),
        }
    }

    /// Re-reads `next_index`, metadata and root from the store and empties the cache.
    fn reload(&mut self) -> Result<(), StoreTreeError<S>> {
        self.generation += 1;
        self.cache.lock().clear();
        let next_index = match self
            .store
            .get(NEXT_INDEX_KEY)
            .map_err(SledTreeError::Store)?
        {
            Some(bytes) => decode_u64(NEXT_INDEX_KEY, &bytes)?,
            None => 0,
        };
        let metadata = self
            .store
            .get(METADATA_KEY)
            .map_err(SledTreeError::Store)?
            .unwrap_or_default();
        let root = self.read_node(NodeAddr::root(self.depth))?;
        self.next_index = next_index;
        self.metadata = metadata;
        self.root = root;
        self.load_history()
    }

    /// Reads the history configuration and the checkpoint records.
    fn load_history(&mut self) -> Result<(), StoreTreeError<S>> {
        self.history = match self.store.get(HISTORY_KEY).map_err(SledTreeError::Store)? {
            None => HistoryConfig::default(),
            Some(bytes) if bytes.len() == 16 => {
                let max = decode_u64(HISTORY_KEY, &bytes[..8])?;
                let window = decode_u64(HISTORY_KEY, &bytes[8..])?;
                let fits = |n: u64| {
                    usize::try_from(n).map_err(|_| SledTreeError::Corrupted {
                        key: HISTORY_KEY.to_vec(),
                        reason: "history limit beyond this platform's usize",
                    })
                };
                HistoryConfig {
                    max_checkpoints: fits(max)?,
                    root_window: fits(window)?,
                }
            }
            Some(_) => {
                return Err(SledTreeError::Corrupted {
                    key: HISTORY_KEY.to_vec(),
                    reason: "expected 16 bytes",
                })
            }
        };
        let mut raw: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.store
            .scan_prefix(&[CHECKPOINT_PREFIX], &mut |key, value| {
                raw.push((key.to_vec(), value.to_vec()))
            })
            .map_err(SledTreeError::Store)?;
        let mut list = Vec::with_capacity(raw.len());
        for (key, value) in raw {
            let corrupted = |reason| SledTreeError::Corrupted {
                key: key.clone(),
                reason,
            };
            let id =
                parse_checkpoint_key(&key).ok_or_else(|| corrupted("malformed checkpoint key"))?;
            if value.len() < H::LEN + 8 {
                return Err(corrupted("checkpoint record too short"));
            }
            let (root, rest) = value.split_at(H::LEN);
            let (next_index, metadata) = rest.split_at(8);
            list.push(CheckpointInfo {
                id,
                root: H::decode(root).map_err(|_| corrupted("checkpoint root is not a digest"))?,
                next_index: decode_u64(&key, next_index)?,
                metadata: metadata.to_vec(),
            });
        }
        // Keys sort by big-endian id, so a scan is already in increasing order.
        self.checkpoints = CheckpointList::from_sorted(list)?;
        Ok(())
    }

    /// Adds checkpoint `info`'s record and the pruning it causes to `batch`; returns the list
    /// to install once the batch is committed.
    fn add_checkpoint(
        &self,
        info: CheckpointInfo<Digest<H>>,
        batch: &mut StoreBatch,
    ) -> Result<CheckpointList<Digest<H>>, StoreTreeError<S>> {
        let mut record = vec![0u8; H::LEN];
        H::encode(&info.root, &mut record);
        record.extend_from_slice(&info.next_index.to_be_bytes());
        record.extend_from_slice(&info.metadata);
        batch.insert(&checkpoint_key(info.id), record);
        let mut list = self.checkpoints.clone();
        let pruned = list.push(info, self.history.max_checkpoints);
        self.remove_checkpoints(&pruned, batch)?;
        Ok(list)
    }

    /// Adds the removal of `ids`' checkpoint records and undo frames to `batch`.
    /// Undo records `batch` itself would add to those frames are dropped too (an apply that
    /// prunes the frame it just recorded into, as with `max_checkpoints = 1`).
    fn remove_checkpoints(
        &self,
        ids: &[u64],
        batch: &mut StoreBatch,
    ) -> Result<(), StoreTreeError<S>> {
        batch.retain(|key| !ids.iter().any(|&id| key.starts_with(&undo_prefix(id))));
        for &id in ids {
            batch.remove(&checkpoint_key(id));
            self.live()?
                .scan_prefix(&undo_prefix(id), &mut |key, _| batch.remove(key))
                .map_err(SledTreeError::Store)?;
        }
        Ok(())
    }

    /// The store, unless a failed commit left its state indeterminate.
    fn live(&self) -> Result<&S, StoreTreeError<S>> {
        if self.indeterminate {
            return Err(SledTreeError::Indeterminate);
        }
        Ok(&self.store)
    }

    /// Commits `batch` with the commit counter bumped. A failed commit leaves the in-memory view
    /// as it was before the call. The counter then tells what the store holds: the old count
    /// means nothing landed and the tree goes on; anything else (sled applied the batch but its
    /// flush failed, so it may or may not be durable; or the store cannot be read) leaves the
    /// tree refusing the store until it is reopened.
    fn commit_counted(&mut self, mut batch: StoreBatch) -> Result<(), StoreTreeError<S>> {
        self.live()?;
        self.generation += 1;
        let count = self.commits.wrapping_add(1);
        batch.insert(COMMITS_KEY, count.to_be_bytes().to_vec());
        let Err(error) = self.store.commit(batch) else {
            self.commits = count;
            return Ok(());
        };
        self.indeterminate = stored_commits(&self.store).ok() != Some(self.commits);
        Err(SledTreeError::Store(error))
    }

    /// Undo records stored and their total key + value bytes: what the retained checkpoints
    /// cost on disk (before sled's own overhead).
    ///
    /// # Errors
    /// The store's error.
    pub fn history_size(&self) -> Result<(usize, usize), StoreTreeError<S>> {
        let (mut records, mut bytes) = (0, 0);
        self.live()?
            .scan_prefix(&[UNDO_PREFIX], &mut |key, value| {
                records += 1;
                bytes += key.len() + value.len();
            })
            .map_err(SledTreeError::Store)?;
        Ok((records, bytes))
    }

    /// Node `addr` as recorded in checkpoint `id`'s undo frame, if that frame has its chunk.
    fn undo_node(&self, id: u64, addr: NodeAddr) -> Result<Option<Digest<H>>, StoreTreeError<S>> {
        let (chunk, slot) = ChunkAddr::of(addr);
        let key = undo_key(id, &chunk_key(chunk));
        let Some(bytes) = self.live()?.get(&key).map_err(SledTreeError::Store)? else {
            return Ok(None);
        };
        match decode_undo(&bytes) {
            Some(None) => Ok(Some(self.empty.at(addr.level))),
            Some(Some(chunk_bytes)) => Ok(Some(Self::decode_chunk(&key, chunk_bytes)?[slot])),
            None => Err(SledTreeError::Corrupted {
                key,
                reason: "malformed undo record",
            }),
        }
    }

    /// Makes every applied batch durable.
    ///
    /// # Errors
    /// The store's flush error.
    pub fn flush(&self) -> Result<(), StoreTreeError<S>> {
        self.live()?.flush().map_err(SledTreeError::Store)
    }

    /// Flushes; the tree stays usable (dropping it also flushes, best-effort).
    ///
    /// # Errors
    /// The store's flush error.
    pub fn close(&mut self) -> Result<(), StoreTreeError<S>> {
        self.flush()
    }

    /// The underlying store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Applies `batch` and sets the metadata in the same atomic write (e.g. the block number
    /// whose members the batch registers).
    ///
    /// # Errors
    /// As [`MerkleTree::apply`].
    pub fn apply_with_metadata(
        &mut self,
        mut batch: UpdateBatch<H>,
        metadata: Vec<u8>,
    ) -> Result<(), StoreTreeError<S>> {
        batch.metadata(metadata);
        self.apply(batch)
    }

    /// Recomputes every stored parent from its children (hashing in parallel, per the rehash
    /// configuration) and returns every mismatch; fails on undecodable or misplaced chunks. An
    /// operator's check after an incident: one pass over the stored chunks.
    ///
    /// # Errors
    /// Store errors and [`SledTreeError::Corrupted`].
    pub fn verify_integrity(&self) -> Result<Vec<IntegrityIssue<Digest<H>>>, StoreTreeError<S>> {
        let mut raw: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.live()?
            .scan_prefix(&[NODE_PREFIX], &mut |key, value| {
                raw.push((key.to_vec(), value.to_vec()))
            })
            .map_err(SledTreeError::Store)?;
        let mut chunks: FxHashMap<ChunkAddr, Vec<Digest<H>>> = FxHashMap::default();
        for (key, value) in raw {
            let chunk = parse_chunk_key(&key).ok_or_else(|| SledTreeError::Corrupted {
                key: key.clone(),
                reason: "malformed node chunk key",
            })?;
            let values = Self::decode_chunk(&key, &value)?;
            for (slot, value) in values.iter().enumerate() {
                let addr = chunk.node(slot);
                if self.depth.check_addr(addr).is_err() && *value != self.empty.at(chunk.level) {
                    return Err(SledTreeError::Corrupted {
                        key,
                        reason: "node stored outside the tree",
                    });
                }
            }
            chunks.insert(chunk, values);
        }
        let node = |addr: NodeAddr| {
            let (chunk, slot) = ChunkAddr::of(addr);
            chunks
                .get(&chunk)
                .map_or_else(|| self.empty.at(addr.level), |values| values[slot])
        };
        // Every stored parent, and the parent of every stored non-empty node, whether or not
        // that parent is stored: an absent parent above non-empty children (a dropped chunk, a
        // changed depth) is as wrong as a stored one with a bad value.
        let mut check: FxHashSet<NodeAddr> = FxHashSet::default();
        for (chunk, values) in &chunks {
            for (slot, &stored) in values.iter().enumerate() {
                let addr = chunk.node(slot);
                if self.depth.check_addr(addr).is_err() {
                    continue;
                }
                if addr.children().is_some() {
                    check.insert(addr);
                }
                if addr.level < self.depth.get() && stored != self.empty.at(addr.level) {
                    check.insert(addr.parent());
                }
            }
        }
        let mut parents: Vec<(NodeAddr, Digest<H>)> = Vec::with_capacity(check.len());
        let mut children: Vec<Digest<H>> = Vec::with_capacity(2 * check.len());
        for addr in check {
            if let Some((left, right)) = addr.children() {
                parents.push((addr, node(addr)));
                children.push(node(left));
                children.push(node(right));
            }
        }
        let mut computed = vec![Digest::<H>::default(); parents.len()];
        hash_level::<H>(&children, &mut computed, &self.config);
        let mut issues: Vec<_> = parents
            .into_iter()
            .zip(computed)
            .filter(|((_, stored), computed)| stored != computed)
            .map(|((addr, stored), computed)| IntegrityIssue {
                addr,
                stored,
                computed,
            })
            .collect();
        issues.sort_by_key(|issue| issue.addr);
        let top = NodeAddr::root(self.depth);
        if node(top) != self.root {
            issues.push(IntegrityIssue {
                addr: top,
                stored: node(top),
                computed: self.root,
            });
        }
        Ok(issues)
    }
}

/// The rehash engine's view during one apply: writes go to per-level sorted buffers, reads see
/// those buffers first and the stored chunks below (each loaded once per apply). Nothing reaches
/// the store until the commit.
struct Overlay<'a, H: DigestCodec, S: NodeStore> {
    tree: &'a SledMerkleTree<H, S>,
    levels: Vec<(Vec<u64>, Vec<Digest<H>>)>,
    loaded: RefCell<FxHashMap<ChunkAddr, Vec<Digest<H>>>>,
}

impl<H: DigestCodec, S: NodeStore> Overlay<'_, H, S> {
    /// The chunk as it was before this apply.
    fn stored_chunk(&self, chunk: ChunkAddr) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        if let Some(values) = self.loaded.borrow().get(&chunk) {
            return Ok(values.clone());
        }
        let values = self.tree.chunk_values(chunk)?;
        self.loaded.borrow_mut().insert(chunk, values.clone());
        Ok(values)
    }

    fn lookup(&self, addr: NodeAddr) -> Result<Digest<H>, StoreTreeError<S>> {
        if let Some((indices, values)) = self.levels.get(usize::from(addr.level)) {
            if let Ok(i) = indices.binary_search(&addr.index) {
                return Ok(values[i]);
            }
        }
        let (chunk, slot) = ChunkAddr::of(addr);
        if let Some(value) = self.loaded.borrow().get(&chunk).map(|values| values[slot]) {
            return Ok(value);
        }
        Ok(self.stored_chunk(chunk)?[slot])
    }
}

impl<H: DigestCodec, S: NodeStore> NodeLevels<H> for Overlay<'_, H, S> {
    type Error = StoreTreeError<S>;

    fn read_children(
        &self,
        child_level: u8,
        parents: &[u64],
        out: &mut Vec<Digest<H>>,
    ) -> Result<(), Self::Error> {
        out.clear();
        for &parent in parents {
            for index in [parent * 2, parent * 2 + 1] {
                out.push(self.lookup(NodeAddr {
                    level: child_level,
                    index,
                })?);
            }
        }
        Ok(())
    }

    fn write_level(
        &mut self,
        level: u8,
        indices: &[u64],
        values: &[Digest<H>],
    ) -> Result<(), Self::Error> {
        if let Some((stored_indices, stored_values)) = self.levels.get_mut(usize::from(level)) {
            stored_indices.extend_from_slice(indices);
            stored_values.extend_from_slice(values);
        }
        Ok(())
    }
}

impl<H: DigestCodec, S: NodeStore> MerkleTree for SledMerkleTree<H, S> {
    type Hasher = H;
    type Error = StoreTreeError<S>;

    fn depth(&self) -> Depth {
        self.depth
    }

    fn next_index(&self) -> u64 {
        self.next_index
    }

    fn root(&self) -> Digest<H> {
        self.root
    }

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, Self::Error> {
        self.depth.check_addr(addr)?;
        self.read_node(addr)
    }

    fn empty_leaves_indices(&self) -> Result<Vec<u64>, Self::Error> {
        let mut indices = Vec::new();
        let mut bad_key = None;
        self.live()?
            .scan_prefix(
                &[DELETED_PREFIX],
                &mut |key, _| match parse_deleted_key(key) {
                    Some(index) => indices.push(index),
                    None => {
                        bad_key.get_or_insert_with(|| key.to_vec());
                    }
                },
            )
            .map_err(SledTreeError::Store)?;
        match bad_key {
            Some(key) => Err(SledTreeError::Corrupted {
                key,
                reason: "malformed deleted-slot key",
            }),
            None => Ok(indices),
        }
    }

    fn metadata(&self) -> Result<Vec<u8>, Self::Error> {
        Ok(self.metadata.clone())
    }

    fn apply(&mut self, batch: UpdateBatch<H>) -> Result<(), Self::Error> {
        let prepared = self.prepare(batch)?;
        self.publish(prepared)
    }

    fn rehash_config(&self) -> &RehashConfig {
        &self.config
    }

    fn set_rehash_config(&mut self, config: RehashConfig) {
        self.config = config;
    }
}

/// A batch computed by [`SledMerkleTree::prepare`], ready to [`publish`](SledMerkleTree::publish).
pub struct PreparedApply<H: DigestCodec> {
    store_batch: StoreBatch,
    changed: Vec<(ChunkAddr, Vec<Digest<H>>)>,
    root: Digest<H>,
    next_index: u64,
    metadata: Option<Vec<u8>>,
    generation: u64,
    checkpoints: Option<CheckpointList<Digest<H>>>,
}

impl<H: DigestCodec> PreparedApply<H> {
    /// The root the tree will have once this batch is published.
    pub fn root(&self) -> &Digest<H> {
        &self.root
    }
}

impl<H: DigestCodec, S: NodeStore> SledMerkleTree<H, S> {
    /// How many commits the store holds (the `M commits` counter, written in the same batch as
    /// each commit): one per apply, checkpoint or rewind, so a caller that commits one batch per
    /// unit of work (a chain block) can prove no unit was committed twice, crash or not.
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Validates `batch` and computes everything its commit writes — every hash, the store
    /// batch with its undo records, the new root — reading the tree but changing nothing.
    /// [`publish`](Self::publish) then commits it. `apply` is the two in a row; a service calls
    /// `prepare` under a shared lock, so readers keep going while a large batch hashes.
    ///
    /// # Errors
    /// As [`MerkleTree::apply`].
    pub fn prepare(&self, batch: UpdateBatch<H>) -> Result<PreparedApply<H>, StoreTreeError<S>> {
        self.prepare_inner(batch, None)
    }

    /// [`prepare`](Self::prepare), with checkpoint `id` recorded after the batch in the *same*
    /// store batch: the block and its checkpoint land together or not at all.
    ///
    /// # Errors
    /// As `prepare`, and [`tree_core::TreeError::CheckpointNotIncreasing`].
    pub fn prepare_checkpointed(
        &self,
        batch: UpdateBatch<H>,
        id: u64,
    ) -> Result<PreparedApply<H>, StoreTreeError<S>> {
        self.checkpoints.check_new(id)?;
        self.prepare_inner(batch, Some(id))
    }

    /// Applies `batch` and records checkpoint `id` after it, in one atomic store batch.
    ///
    /// # Errors
    /// As [`prepare_checkpointed`](Self::prepare_checkpointed) and [`publish`](Self::publish).
    pub fn apply_checkpointed(
        &mut self,
        batch: UpdateBatch<H>,
        id: u64,
    ) -> Result<(), StoreTreeError<S>> {
        let prepared = self.prepare_checkpointed(batch, id)?;
        self.publish(prepared)
    }

    fn prepare_inner(
        &self,
        batch: UpdateBatch<H>,
        checkpoint: Option<u64>,
    ) -> Result<PreparedApply<H>, StoreTreeError<S>> {
        let prepared = batch.validate(self.depth, self.next_index)?;
        let levels = usize::from(self.depth.get()) + 1;
        let mut overlay = Overlay {
            tree: self,
            levels: vec![(Vec::new(), Vec::new()); levels],
            loaded: RefCell::new(FxHashMap::default()),
        };
        apply_writes::<H, _>(&mut overlay, self.depth, prepared.writes(), &self.config)?;

        // Only chunks in which some node changed are written; all-empty chunks are removed.
        let mut store_batch = StoreBatch::default();
        let mut changed: Vec<(ChunkAddr, Vec<Digest<H>>)> = Vec::new();
        for (level, (indices, values)) in (0u8..).zip(&overlay.levels) {
            let empty = self.empty.at(level);
            let mut i = 0;
            while i < indices.len() {
                let (chunk, _) = ChunkAddr::of(NodeAddr {
                    level,
                    index: indices[i],
                });
                let old = overlay.stored_chunk(chunk)?;
                let mut new = old.clone();
                while i < indices.len() && indices[i] >> CHUNK_BITS == chunk.chunk {
                    let (_, slot) = ChunkAddr::of(NodeAddr {
                        level,
                        index: indices[i],
                    });
                    new[slot] = values[i];
                    i += 1;
                }
                if new == old {
                    continue;
                }
                let key = chunk_key(chunk);
                if new.iter().all(|v| *v == empty) {
                    store_batch.remove(&key);
                } else {
                    let mut bytes = vec![0u8; CHUNK_NODES * H::LEN];
                    for (out, value) in bytes.chunks_exact_mut(H::LEN).zip(&new) {
                        H::encode(value, out);
                    }
                    store_batch.insert(&key, bytes);
                }
                if level >= self.cache_from {
                    changed.push((chunk, new));
                }
            }
        }
        // Deleted-slot bookkeeping. Indices at or past the old next_index were never deleted.
        for &(index, leaf) in prepared.writes() {
            match leaf {
                None => store_batch.insert(&deleted_key(index), Vec::new()),
                Some(_) if index < self.next_index => store_batch.remove(&deleted_key(index)),
                Some(_) => {}
            }
        }
        if prepared.next_index() != self.next_index {
            store_batch.insert(NEXT_INDEX_KEY, prepared.next_index().to_be_bytes().to_vec());
        }
        if let Some(metadata) = prepared.metadata() {
            store_batch.insert(METADATA_KEY, metadata.to_vec());
        }
        let new_root = overlay.lookup(NodeAddr::root(self.depth))?;
        drop(overlay);

        // With a checkpoint open, each key's value before its first overwrite since that
        // checkpoint joins the same batch (counters and metadata are in the checkpoint record).
        if let Some(latest) = self.checkpoints.latest() {
            let keys: Vec<Vec<u8>> = store_batch
                .ops()
                .iter()
                .map(|(key, _)| key.clone())
                .filter(|key| key != NEXT_INDEX_KEY && key != METADATA_KEY)
                .collect();
            for key in keys {
                let record = undo_key(latest.id, &key);
                if self
                    .live()?
                    .get(&record)
                    .map_err(SledTreeError::Store)?
                    .is_none()
                {
                    let old = self.live()?.get(&key).map_err(SledTreeError::Store)?;
                    store_batch.insert(&record, encode_undo(old.as_deref()));
                }
            }
        }

        let checkpoints = match checkpoint {
            Some(id) if self.history.max_checkpoints > 0 => {
                // A pruned frame must not be the one this batch just wrote undo records into
                // (only possible with max_checkpoints = 1): such a frame would outlive its
                // checkpoint, so drop the records instead by not recording them at all.
                let info = CheckpointInfo {
                    id,
                    root: new_root,
                    next_index: prepared.next_index(),
                    metadata: prepared
                        .metadata()
                        .map_or_else(|| self.metadata.clone(), <[u8]>::to_vec),
                };
                Some(self.add_checkpoint(info, &mut store_batch)?)
            }
            _ => None,
        };
        Ok(PreparedApply {
            store_batch,
            changed,
            root: new_root,
            next_index: prepared.next_index(),
            metadata: prepared.metadata().map(<[u8]>::to_vec),
            generation: self.generation,
            checkpoints,
        })
    }

    /// Commits a [`prepare`](Self::prepare)d batch: the one store commit, then the in-memory
    /// view. Nothing else may have changed the tree in between.
    ///
    /// # Errors
    /// [`SledTreeError::Conflict`] if the tree moved since `prepare` (the batch is not applied);
    /// the store's commit error (the tree is reloaded from the store).
    pub fn publish(&mut self, prepared: PreparedApply<H>) -> Result<(), StoreTreeError<S>> {
        if prepared.generation != self.generation {
            return Err(SledTreeError::Conflict);
        }
        let PreparedApply {
            store_batch,
            changed,
            root: new_root,
            next_index,
            metadata,
            checkpoints,
            ..
        } = prepared;
        if !store_batch.is_empty() {
            // A failed commit leaves the in-memory view as it was (see `commit_counted`).
            self.commit_counted(store_batch)?;
        }
        // Committed: publish to the in-memory view.
        {
            let mut cache = self.cache.lock();
            for (chunk, values) in changed {
                cache.insert(chunk, values);
            }
        }
        self.root = new_root;
        self.next_index = next_index;
        if let Some(metadata) = metadata {
            self.metadata = metadata;
        }
        if let Some(checkpoints) = checkpoints {
            self.checkpoints = checkpoints;
        }
        Ok(())
    }
}

impl<H: DigestCodec, S: NodeStore> History for SledMerkleTree<H, S> {
    fn history_config(&self) -> HistoryConfig {
        self.history
    }

    /// Persists the settings; pruning is part of the same batch.
    fn set_history_config(&mut self, config: HistoryConfig) -> Result<(), Self::Error> {
        let mut list = self.checkpoints.clone();
        let pruned = list.prune(config.max_checkpoints);
        let mut batch = StoreBatch::default();
        let mut value = Vec::with_capacity(16);
        value.extend_from_slice(&(config.max_checkpoints as u64).to_be_bytes());
        value.extend_from_slice(&(config.root_window as u64).to_be_bytes());
        batch.insert(HISTORY_KEY, value);
        self.remove_checkpoints(&pruned, &mut batch)?;
        self.commit_counted(batch)?;
        self.history = config;
        self.checkpoints = list;
        Ok(())
    }

    /// One batch: the checkpoint record, and the removal of pruned checkpoints and frames.
    fn checkpoint(&mut self, id: u64) -> Result<(), Self::Error> {
        self.checkpoints.check_new(id)?;
        if self.history.max_checkpoints == 0 {
            return Ok(());
        }
        let info = CheckpointInfo {
            id,
            root: self.root,
            next_index: self.next_index,
            metadata: self.metadata.clone(),
        };
        let mut batch = StoreBatch::default();
        let list = self.add_checkpoint(info, &mut batch)?;
        self.commit_counted(batch)?;
        self.checkpoints = list;
        Ok(())
    }

    /// One batch: the restored keys and counters, and the removal of the frames and later
    /// checkpoints it consumes. A crash leaves the tree before or after the rewind.
    fn rewind_to(&mut self, id: u64) -> Result<(), Self::Error> {
        let pos = self.checkpoints.position(id)?;
        let info = self.checkpoints.as_slice()[pos].clone();
        let mut batch = StoreBatch::default();
        let mut restore: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            std::collections::BTreeMap::new();
        let mut bad_key = None;
        // Oldest frame first: the first record of a key is its value at checkpoint `id`.
        for frame in &self.checkpoints.as_slice()[pos..] {
            self.live()?
                .scan_prefix(&undo_prefix(frame.id), &mut |key, value| {
                    match (parse_undo_key(key), decode_undo(value)) {
                        (Some((_, original)), Some(old)) => {
                            restore
                                .entry(original.to_vec())
                                .or_insert_with(|| old.map(<[u8]>::to_vec));
                        }
                        _ => {
                            bad_key.get_or_insert_with(|| key.to_vec());
                        }
                    }
                    batch.remove(key);
                })
                .map_err(SledTreeError::Store)?;
        }
        if let Some(key) = bad_key {
            return Err(SledTreeError::Corrupted {
                key,
                reason: "malformed undo record",
            });
        }
        for (key, value) in restore {
            match value {
                Some(value) => batch.insert(&key, value),
                None => batch.remove(&key),
            }
        }
        for later in &self.checkpoints.as_slice()[pos + 1..] {
            batch.remove(&checkpoint_key(later.id));
        }
        batch.insert(NEXT_INDEX_KEY, info.next_index.to_be_bytes().to_vec());
        if info.metadata.is_empty() {
            batch.remove(METADATA_KEY);
        } else {
            batch.insert(METADATA_KEY, info.metadata.clone());
        }
        self.commit_counted(batch)?;
        self.reload()?;
        if self.root != info.root {
            return Err(SledTreeError::Corrupted {
                key: checkpoint_key(id).to_vec(),
                reason: "rewound root differs from the checkpoint's",
            });
        }
        Ok(())
    }

    fn checkpoints(&self) -> Result<Checkpoints<H>, Self::Error> {
        Ok(self.checkpoints.as_slice().to_vec())
    }

    fn proof_at(&self, root: &Digest<H>, index: u64) -> Result<MerkleProof<H>, Self::Error> {
        let Some(pos) = self
            .checkpoints
            .resolve_root(root, self.root, self.history.root_window)?
        else {
            return self.proof(index);
        };
        self.depth.check_index(index)?;
        let frames: Vec<u64> = self.checkpoints.as_slice()[pos..]
            .iter()
            .map(|c| c.id)
            .collect();
        let siblings = NodeAddr::proof_path(self.depth, index)
            .map(|addr| {
                value_at(frames.iter().map(|&id| self.undo_node(id, addr)), || {
                    self.read_node(addr)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MerkleProof::new(index, siblings))
    }
}

impl<H: DigestCodec, S: NodeStore> Drop for SledMerkleTree<H, S> {
    fn drop(&mut self) {
        // Best effort by design: a drop cannot report failure. Callers who need to know use
        // `flush`/`close`.
        let _ = self.store.flush();
    }
}

impl<H: DigestCodec, S: NodeStore> core::fmt::Debug for SledMerkleTree<H, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SledMerkleTree")
            .field("depth", &self.depth)
            .field("next_index", &self.next_index)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}
