//! The commit protocol: `prepare` computes a whole apply (hashes, the store batch with its undo
//! records and checkpoint record, the new root) reading only; `publish` makes it one engine
//! commit with the commit counter bumped, then updates the in-memory view.

use hasher::{Digest, DigestCodec};

use super::layout::{
    self, chunk_key, deleted_key, encode_chunk, encode_undo, parse_deleted_key, undo_key,
    ChunkAddr, CHUNK_BITS, COMMITS_KEY, DELETED_PREFIX, METADATA_KEY, NEXT_INDEX_KEY,
};
use super::open::stored_commits;
use super::overlay::Overlay;
use super::{Corrupt, KvStore, PersistentTree, PersistentTreeError, StoreBatch, StoreTreeError};
use crate::history::CheckpointList;
use crate::rehash::apply_writes;
use crate::{CheckpointInfo, Depth, MerkleTree, NodeAddr, RehashConfig, UpdateBatch};

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
    /// Commits `batch` with the commit counter bumped. A failed commit leaves the in-memory view
    /// as it was before the call. The counter then tells what the store holds: the old count
    /// means nothing landed and the tree goes on; anything else (the engine applied the batch but its
    /// flush failed, so it may or may not be durable; or the store cannot be read) leaves the
    /// tree refusing the store until it is reopened.
    pub(super) fn commit_counted(
        &mut self,
        mut batch: StoreBatch,
    ) -> Result<(), StoreTreeError<S>> {
        self.live()?;
        self.generation += 1;
        let count = self.commits.wrapping_add(1);
        batch.insert(COMMITS_KEY, layout::encode_u64(count));
        let Err(error) = self.store.commit(batch) else {
            self.commits = count;
            return Ok(());
        };
        self.indeterminate = stored_commits(&self.store).ok() != Some(self.commits);
        Err(PersistentTreeError::Store(error))
    }
}

impl<H: DigestCodec, S: KvStore> MerkleTree for PersistentTree<H, S> {
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
            .map_err(PersistentTreeError::Store)?;
        match bad_key {
            Some(key) => Err(Corrupt::new(&key, "malformed deleted-slot key").into()),
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

/// A batch computed by [`PersistentTree::prepare`], ready to [`publish`](PersistentTree::publish).
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

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
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
        let mut overlay = Overlay::new(self);
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
                    store_batch.insert(&key, encode_chunk::<H>(&new));
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
            store_batch.insert(NEXT_INDEX_KEY, layout::encode_u64(prepared.next_index()));
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
                    .map_err(PersistentTreeError::Store)?
                    .is_none()
                {
                    let old = self.live()?.get(&key).map_err(PersistentTreeError::Store)?;
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
    /// [`PersistentTreeError::Conflict`] if the tree moved since `prepare` (the batch is not applied);
    /// the store's commit error (the tree is reloaded from the store).
    pub fn publish(&mut self, prepared: PreparedApply<H>) -> Result<(), StoreTreeError<S>> {
        if prepared.generation != self.generation {
            return Err(PersistentTreeError::Conflict);
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
