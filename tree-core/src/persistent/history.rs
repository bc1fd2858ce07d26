//! The key-value store's undo frames: undo records in the store, and one store batch per
//! rewind. The rules (`History`) are [`crate::history`]'s, applied by the engine to every store.

use std::collections::BTreeMap;

use hasher::{Digest, DigestCodec};

use super::layout::{
    checkpoint_key, chunk_key, decode_chunk, decode_undo, parse_undo_key, undo_key, undo_prefix,
    ChunkAddr, METADATA_KEY, NEXT_INDEX_KEY, UNDO_PREFIX,
};
use super::{
    Corrupt, KvStore, KvTreeStore, PersistentTree, PersistentTreeError, StoreBatch, StoreTreeError,
};
use crate::{CheckpointInfo, NodeAddr};

impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// Adds the removal of `ids`' checkpoint records and undo frames to `batch`.
    /// Undo records `batch` itself would add to those frames are dropped too (an apply that
    /// prunes the frame it just recorded into, as with `max_checkpoints = 1`).
    pub(super) fn remove_checkpoints(
        &self,
        ids: &[u64],
        batch: &mut StoreBatch,
    ) -> Result<(), StoreTreeError<S>> {
        batch.retain(|key| !ids.iter().any(|&id| key.starts_with(&undo_prefix(id))));
        for &id in ids {
            batch.remove(&checkpoint_key(id));
            self.live()?
                .scan_prefix(&undo_prefix(id), &mut |key, _| batch.remove(key))
                .map_err(PersistentTreeError::Store)?;
        }
        Ok(())
    }

    /// Node `addr` as recorded in checkpoint `id`'s undo frame, if that frame has its chunk.
    pub(super) fn undo_node(
        &self,
        id: u64,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, StoreTreeError<S>> {
        let (chunk, slot) = ChunkAddr::of(addr);
        let key = undo_key(id, &chunk_key(chunk));
        let Some(bytes) = self.live()?.get(&key).map_err(PersistentTreeError::Store)? else {
            return Ok(None);
        };
        match decode_undo(&bytes) {
            Some(None) => Ok(Some(self.empty.at(addr.level))),
            Some(Some(chunk_bytes)) => Ok(Some(decode_chunk::<H>(&key, chunk_bytes)?[slot])),
            None => Err(Corrupt::new(&key, "malformed undo record").into()),
        }
    }
}

/// Frames are undo records keyed by the stored key they restore (`U id key`), valued by the
/// key's bytes at the checkpoint (`None`: absent); a rewind is one store batch.
impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// Adds frame `id`'s records to `out`, keeping the entries already there.
    pub(super) fn undo_records(
        &self,
        id: u64,
        out: &mut BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    ) -> Result<(), StoreTreeError<S>> {
        let mut bad_key = None;
        self.live()?
            .scan_prefix(&undo_prefix(id), &mut |key, value| match (
                parse_undo_key(key),
                decode_undo(value),
            ) {
                (Some((_, original)), Some(old)) => {
                    out.entry(original.to_vec())
                        .or_insert_with(|| old.map(<[u8]>::to_vec));
                }
                _ => {
                    bad_key.get_or_insert_with(|| key.to_vec());
                }
            })
            .map_err(PersistentTreeError::Store)?;
        match bad_key {
            Some(key) => Err(Corrupt::new(&key, "malformed undo record").into()),
            None => Ok(()),
        }
    }

    /// One batch: the restored keys and counters, and the removal of the frames and later
    /// checkpoints it consumes. A crash leaves the tree before or after the rewind.
    pub(super) fn rewind(
        &mut self,
        restore: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
        to: &CheckpointInfo<Digest<H>>,
        consumed: &[u64],
    ) -> Result<(), StoreTreeError<S>> {
        let mut batch = StoreBatch::default();
        for &frame in consumed {
            self.live()?
                .scan_prefix(&undo_prefix(frame), &mut |key, _| batch.remove(key))
                .map_err(PersistentTreeError::Store)?;
        }
        for (key, value) in restore {
            match value {
                Some(value) => batch.insert(&key, value),
                None => batch.remove(&key),
            }
        }
        for &later in consumed.iter().skip(1) {
            batch.remove(&checkpoint_key(later));
        }
        batch.insert(NEXT_INDEX_KEY, super::layout::encode_u64(to.next_index));
        if to.metadata.is_empty() {
            batch.remove(METADATA_KEY);
        } else {
            batch.insert(METADATA_KEY, to.metadata.clone());
        }
        self.commit_counted(batch)?;
        // Restored chunks bypassed the cache.
        self.cache.lock().clear();
        if self.read_node(NodeAddr::root(self.depth))? != to.root {
            // The store now disagrees with the tree's view: refuse it until a reopen.
            self.indeterminate = true;
            return Err(Corrupt::new(
                &checkpoint_key(to.id),
                "rewound root differs from the checkpoint's",
            )
            .into());
        }
        Ok(())
    }
}

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
    /// Undo records stored and their total key + value bytes: what the retained checkpoints
    /// cost on disk (before the engine's own overhead).
    ///
    /// # Errors
    /// The store's error.
    pub fn history_size(&self) -> Result<(usize, usize), StoreTreeError<S>> {
        let (mut records, mut bytes) = (0, 0);
        self.store
            .live()?
            .scan_prefix(&[UNDO_PREFIX], &mut |key, value| {
                records += 1;
                bytes += key.len() + value.len();
            })
            .map_err(PersistentTreeError::Store)?;
        Ok((records, bytes))
    }
}
