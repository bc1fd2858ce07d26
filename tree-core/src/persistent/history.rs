//! The key-value store's undo frames: undo records in the store, and one store batch per
//! rewind. The rules (`History`) are [`crate::history`]'s, applied by the engine to every store.

use std::collections::BTreeMap;

use hasher::{Digest, DigestCodec};

use super::layout::{
    checkpoint_key, chunk_key, decode_chunk, decode_undo, parse_undo_key, undo_key, undo_prefix,
    METADATA_KEY, NEXT_INDEX_KEY, UNDO_PREFIX,
};
use super::{Corrupt, KvStore, KvTreeStore, PersistentTree, StoreBatch, StoreTreeError};
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
            self.scan_raw(&undo_prefix(id), &mut |key, _| batch.remove(key))?;
        }
        Ok(())
    }

    /// Node `addr` as recorded in checkpoint `id`'s undo frame, if that frame has its chunk.
    pub(super) fn undo_node(
        &self,
        id: u64,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, StoreTreeError<S>> {
        let (chunk, slot) = self.shape.of(addr);
        let key = undo_key(id, &chunk_key(chunk));
        let Some(bytes) = self.get(&key)? else {
            return Ok(None);
        };
        match decode_undo(&bytes) {
            Some(None) => Ok(Some(self.empty.at(addr.level))),
            Some(Some(chunk_bytes)) => Ok(Some(
                decode_chunk::<H>(self.shape, &key, chunk_bytes)?[slot],
            )),
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
        let decode = |key: &[u8], value: &[u8]| match (parse_undo_key(key), decode_undo(value)) {
            (Some((_, original)), Some(old)) => Ok((original.to_vec(), old.map(<[u8]>::to_vec))),
            _ => Err(Corrupt::new(key, "malformed undo record")),
        };
        self.scan(&undo_prefix(id), decode, |(original, old)| {
            out.entry(original).or_insert(old);
        })
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
            self.scan_raw(&undo_prefix(frame), &mut |key, _| batch.remove(key))?;
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
        self.cache.get_mut().clear();
        self.follow_size(to.next_index);
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
        self.store.scan_raw(&[UNDO_PREFIX], &mut |key, value| {
            records += 1;
            bytes += key.len() + value.len();
        })?;
        Ok((records, bytes))
    }
}
