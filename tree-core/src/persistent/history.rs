//! The persistent tree's undo frames: undo records in the store, and one store batch per
//! history change. The rules (`History`) are [`crate::history`]'s, shared with the in-memory
//! trees through [`UndoFrames`].

use std::collections::BTreeMap;

use hasher::{Digest, DigestCodec};

use super::layout::{
    checkpoint_key, chunk_key, decode_chunk, decode_undo, encode_checkpoint, encode_history,
    parse_undo_key, undo_key, undo_prefix, ChunkAddr, HISTORY_KEY, METADATA_KEY, NEXT_INDEX_KEY,
    UNDO_PREFIX,
};
use super::{Corrupt, KvStore, PersistentTree, PersistentTreeError, StoreBatch, StoreTreeError};
use crate::history::{CheckpointList, FrameRef, UndoFrames};
use crate::{CheckpointInfo, HistoryConfig, NodeAddr};

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
    /// Adds checkpoint `info`'s record and the pruning it causes to `batch`; returns the list
    /// to install once the batch is committed.
    pub(super) fn add_checkpoint(
        &self,
        info: CheckpointInfo<Digest<H>>,
        batch: &mut StoreBatch,
    ) -> Result<CheckpointList<Digest<H>>, StoreTreeError<S>> {
        batch.insert(&checkpoint_key(info.id), encode_checkpoint::<H>(&info));
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
                .map_err(PersistentTreeError::Store)?;
        }
        Ok(())
    }

    /// Undo records stored and their total key + value bytes: what the retained checkpoints
    /// cost on disk (before the engine's own overhead).
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
            .map_err(PersistentTreeError::Store)?;
        Ok((records, bytes))
    }

    /// Node `addr` as recorded in checkpoint `id`'s undo frame, if that frame has its chunk.
    fn undo_node(&self, id: u64, addr: NodeAddr) -> Result<Option<Digest<H>>, StoreTreeError<S>> {
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
/// key's bytes at the checkpoint (`None`: absent); one history change is one store batch.
impl<H: DigestCodec, S: KvStore> UndoFrames for PersistentTree<H, S> {
    /// Each stored key and its bytes at the checkpoint (`None`: absent), in key order.
    type Restore = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

    fn history_state(&self) -> (HistoryConfig, &CheckpointList<Digest<H>>) {
        (self.history, &self.checkpoints)
    }

    fn recorded_node(
        &self,
        frame: FrameRef,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, Self::Error> {
        self.undo_node(frame.id, addr)
    }

    fn frame_records(&self, frame: FrameRef, out: &mut Self::Restore) -> Result<(), Self::Error> {
        let mut bad_key = None;
        self.live()?
            .scan_prefix(&undo_prefix(frame.id), &mut |key, value| match (
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

    /// One batch: the settings, the checkpoint record, and the removal of pruned checkpoints
    /// and their frames.
    fn commit_history(
        &mut self,
        config: HistoryConfig,
        list: CheckpointList<Digest<H>>,
        added: Option<&CheckpointInfo<Digest<H>>>,
        removed: &[u64],
    ) -> Result<(), Self::Error> {
        let mut batch = StoreBatch::default();
        batch.insert(HISTORY_KEY, encode_history(config)?);
        if let Some(info) = added {
            batch.insert(&checkpoint_key(info.id), encode_checkpoint::<H>(info));
        }
        self.remove_checkpoints(removed, &mut batch)?;
        self.commit_counted(batch)?;
        self.history = config;
        self.checkpoints = list;
        Ok(())
    }

    /// One batch: the restored keys and counters, and the removal of the frames and later
    /// checkpoints it consumes. A crash leaves the tree before or after the rewind.
    fn commit_rewind(
        &mut self,
        restore: Self::Restore,
        to: &CheckpointInfo<Digest<H>>,
        consumed: &[u64],
        list: CheckpointList<Digest<H>>,
    ) -> Result<(), Self::Error> {
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
        self.reload()?;
        debug_assert!(
            self.checkpoints == list,
            "the stored checkpoints are the kept ones"
        );
        if self.root != to.root {
            return Err(Corrupt::new(
                &checkpoint_key(to.id),
                "rewound root differs from the checkpoint's",
            )
            .into());
        }
        Ok(())
    }
}
