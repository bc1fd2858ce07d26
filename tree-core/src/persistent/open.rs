//! Opening a tree: creating the header in one batch, or checking it (format, depth, hasher,
//! digest length) and loading the counters, history and root.

use super::chunks::BandCache;
use hasher::DigestCodec;
use parking_lot::Mutex;

use super::layout::ChunkShape;
use super::layout::{
    self, decode_checkpoint, decode_history, decode_u32, decode_u64, CHECKPOINT_PREFIX,
    COMMITS_KEY, DEPTH_KEY, DIGEST_LEN_KEY, FORMAT_VERSION, FORMAT_VERSION_KEY, HASHER_KEY,
    HISTORY_KEY, METADATA_KEY, NEXT_INDEX_KEY,
};
use super::{
    Corrupt, KvStore, KvTreeStore, NodeCache, OpenStore, PersistentTree, PersistentTreeError,
    StoreBatch, StoreTreeError,
};
use crate::engine::TreeState;
use crate::history::CheckpointList;
use crate::{Depth, EmptyRoots, HistoryConfig, NodeAddr, RehashConfig};

/// The stored commit counter (absent = 0).
pub(super) fn stored_commits<S: KvStore>(store: &S) -> Result<u64, StoreTreeError<S>> {
    match store.get(COMMITS_KEY).map_err(PersistentTreeError::Store)? {
        Some(bytes) => Ok(decode_u64(COMMITS_KEY, &bytes)?),
        None => Ok(0),
    }
}

impl<H: DigestCodec, S: OpenStore> PersistentTree<H, S> {
    /// Opens the tree `config` describes, creating it if the path holds no database.
    ///
    /// # Errors
    /// [`PersistentTreeError::Locked`], [`PersistentTreeError::DepthMismatch`],
    /// [`PersistentTreeError::HasherMismatch`], [`PersistentTreeError::FormatVersion`],
    /// [`PersistentTreeError::Corrupted`], [`PersistentTreeError::NotATree`], I/O and engine
    /// errors. A load error never falls back to a fresh tree.
    pub fn open(config: &S::Config, depth: Depth) -> Result<Self, StoreTreeError<S>> {
        let store = S::open(config)?;
        Self::open_store(store, depth, RehashConfig::default(), S::node_cache(config))
    }

    /// Opens an existing tree with the depth stored in its header (tools that operate on a
    /// database they did not create).
    ///
    /// # Errors
    /// [`PersistentTreeError::NotATree`] when the path holds no tree, and as
    /// [`open`](Self::open).
    pub fn open_existing(config: &S::Config) -> Result<Self, StoreTreeError<S>> {
        // Never create a database here: a missing directory is "not a tree".
        if S::path(config).is_some_and(|p| !p.exists()) {
            return Err(PersistentTreeError::NotATree);
        }
        let store = S::open(config)?;
        Self::open_store_existing(store, RehashConfig::default(), S::node_cache(config))
    }

    /// Bytes the database takes on disk.
    ///
    /// # Errors
    /// The engine's error.
    pub fn size_on_disk(&self) -> Result<u64, StoreTreeError<S>> {
        self.store
            .store
            .size_on_disk()
            .map_err(PersistentTreeError::Store)
    }
}

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
    /// Opens the tree a store already holds, with the depth stored in its header (a copy of
    /// another tree's entries, a database a tool did not create).
    ///
    /// # Errors
    /// [`PersistentTreeError::NotATree`] when the store holds no tree, and as
    /// [`open_store`](Self::open_store).
    pub fn open_store_existing(
        store: S,
        rehash: RehashConfig,
        cache: NodeCache,
    ) -> Result<Self, StoreTreeError<S>> {
        let depth = match store.get(DEPTH_KEY).map_err(PersistentTreeError::Store)? {
            Some(bytes) => layout::decode_depth(&bytes)?,
            None => return Err(PersistentTreeError::NotATree),
        };
        Self::open_store(store, depth, rehash, cache)
    }

    /// Opens a tree over any store: initialises an empty store in one batch, or checks the
    /// stored header (format version, depth, hasher, digest length) and loads the root and
    /// counters. `cache` says which nodes stay in memory once read.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_store(
        store: S,
        depth: Depth,
        config: RehashConfig,
        cache: NodeCache,
    ) -> Result<Self, StoreTreeError<S>> {
        let mut kv = KvTreeStore {
            store,
            depth,
            empty: EmptyRoots::<H>::new(depth),
            shape: ChunkShape::current(),
            node_cache: cache,
            cache: Mutex::new(BandCache::default()),
            // Nothing is read before the size is known (below).
            cache_from: u8::MAX,
            indeterminate: false,
            commits: 0,
        };
        match kv.get(FORMAT_VERSION_KEY)? {
            None => kv.create_header()?,
            Some(version) => kv.shape = kv.check_header(&version)?,
        }
        // Empty values up to the top of the root's band: slots above the root hold their own
        // level's, not the root's.
        let top = kv.shape.top_level(depth);
        if top > depth.get() {
            kv.empty = EmptyRoots::<H>::new(
                Depth::new(top).map_err(|_| Corrupt::new(DEPTH_KEY, "depth outside 1..=63"))?,
            );
        }
        kv.commits = stored_commits(&kv.store)?;
        let next_index = decode_u64(NEXT_INDEX_KEY, &kv.header_field(NEXT_INDEX_KEY)?)?;
        if next_index > depth.capacity() {
            return Err(Corrupt::new(NEXT_INDEX_KEY, "next_index exceeds capacity").into());
        }
        kv.follow_size(next_index);
        let history = match kv.get(HISTORY_KEY)? {
            None => HistoryConfig::default(),
            Some(bytes) => decode_history(&bytes)?,
        };
        let mut checkpoints = Vec::new();
        kv.scan(&[CHECKPOINT_PREFIX], decode_checkpoint::<H>, |info| {
            checkpoints.push(info);
        })?;
        let state = TreeState {
            root: kv.read_node(NodeAddr::root(depth))?,
            next_index,
            metadata: kv.get(METADATA_KEY)?.unwrap_or_default(),
            history,
            // Keys sort by big-endian id, so a scan is already in increasing order.
            checkpoints: CheckpointList::from_sorted(checkpoints)?,
        };
        Ok(Self::from_store(kv, depth, config, state))
    }
}

impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// Writes the header of a new tree into an empty store, durably.
    fn create_header(&self) -> Result<(), StoreTreeError<S>> {
        if !self.store.is_empty().map_err(PersistentTreeError::Store)? {
            return Err(PersistentTreeError::NotATree);
        }
        let mut batch = StoreBatch::default();
        batch.insert(FORMAT_VERSION_KEY, layout::encode_u32(FORMAT_VERSION));
        batch.insert(DEPTH_KEY, layout::encode_depth(self.depth));
        batch.insert(HASHER_KEY, H::ID.as_bytes().to_vec());
        batch.insert(
            DIGEST_LEN_KEY,
            layout::encode_u32(layout::digest_len::<H>()?),
        );
        batch.insert(NEXT_INDEX_KEY, layout::encode_u64(0));
        self.store
            .commit(batch)
            .map_err(PersistentTreeError::Store)?;
        self.store.flush().map_err(PersistentTreeError::Store)
    }

    /// Checks a stored header (format `version`, depth, hasher, digest length) against this
    /// build and the tree asked for; returns the chunk shape of the stored format.
    fn check_header(&self, version: &[u8]) -> Result<ChunkShape, StoreTreeError<S>> {
        let found = decode_u32(FORMAT_VERSION_KEY, version)?;
        let shape = ChunkShape::for_format(found).ok_or(PersistentTreeError::FormatVersion {
            found,
            supported: FORMAT_VERSION,
        })?;
        let stored = layout::decode_depth(&self.header_field(DEPTH_KEY)?)?;
        if stored != self.depth {
            return Err(PersistentTreeError::DepthMismatch {
                stored: stored.get(),
                requested: self.depth.get(),
            });
        }
        let hasher = self.header_field(HASHER_KEY)?;
        if hasher != H::ID.as_bytes() {
            return Err(PersistentTreeError::HasherMismatch {
                stored: String::from_utf8_lossy(&hasher).into_owned(),
                requested: H::ID,
            });
        }
        let digest_len = decode_u32(DIGEST_LEN_KEY, &self.header_field(DIGEST_LEN_KEY)?)?;
        if digest_len != layout::digest_len::<H>()? {
            return Err(
                Corrupt::new(DIGEST_LEN_KEY, "digest length differs from the hasher's").into(),
            );
        }
        Ok(shape)
    }

    /// A header field every tree has.
    fn header_field(&self, key: &'static [u8]) -> Result<Vec<u8>, StoreTreeError<S>> {
        self.get(key)?
            .ok_or_else(|| Corrupt::new(key, "header field missing").into())
    }
}
