//! Staging a change as one store batch (chunks, deleted slots, counters, undo records,
//! checkpoint records) and committing it with the commit counter bumped.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use hasher::{Digest, DigestCodec};

use super::layout::{
    self, checkpoint_key, chunk_key, deleted_key, encode_checkpoint, encode_chunk, encode_history,
    encode_undo, parse_deleted_key, record_key, undo_key, ChunkAddr, COMMITS_KEY, DELETED_PREFIX,
    HISTORY_KEY, METADATA_KEY, NEXT_INDEX_KEY,
};
use super::open::stored_commits;
use super::reader::KvReader;
use super::{Corrupt, KvStore, KvTreeStore, PersistentTreeError, StoreBatch, StoreTreeError};
use crate::engine::{Change, LevelWrites, TreeStore};
use crate::history::FrameRef;
use crate::{CheckpointInfo, Depth, NodeAddr};

/// Chunks and their new nodes.
type Chunks<H> = Vec<(ChunkAddr, Vec<Digest<H>>)>;

/// The chunks one change touches: each one's nodes as stored, and as the change leaves them.
type Touched<H> = BTreeMap<ChunkAddr, (Vec<Digest<H>>, Vec<Digest<H>>)>;

/// A change encoded as one store batch, with the top-of-tree chunks to cache once it lands and
/// the cached bands for the tree's size after it.
pub struct KvStaged<H: DigestCodec> {
    batch: StoreBatch,
    changed: Chunks<H>,
    next_index: Option<u64>,
}

impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// Commits `batch` with the commit counter bumped. A failed commit leaves the store's view
    /// as it was. The counter then tells what the store holds: the old count means nothing
    /// landed and the tree goes on; anything else (the engine applied the batch but its flush
    /// failed, so it may or may not be durable; or the store cannot be read) leaves the store
    /// refused until it is reopened.
    pub(super) fn commit_counted(
        &mut self,
        mut batch: StoreBatch,
    ) -> Result<(), StoreTreeError<S>> {
        self.live()?;
        let count = self.commits.wrapping_add(1);
        batch.insert(COMMITS_KEY, layout::encode_u64(count));
        let Err(error) = self.store.commit(batch) else {
            self.commits = count;
            return Ok(());
        };
        self.indeterminate = stored_commits(&self.store).ok() != Some(self.commits);
        Err(PersistentTreeError::Store(error))
    }

    /// Adds the chunks `change` writes to `batch`: only chunks in which some node changed, and
    /// all-empty chunks removed. Returns the changed chunks of bands at `cache_from` and above,
    /// which the cache keeps.
    fn stage_nodes(
        &self,
        reader: &KvReader<'_, H, S>,
        nodes: &LevelWrites<H>,
        cache_from: u8,
        batch: &mut StoreBatch,
    ) -> Result<Chunks<H>, StoreTreeError<S>> {
        // Every stored chunk this change touches, read in one go before they are merged.
        let mut chunks = Vec::new();
        for (level, (indices, _)) in (0u8..).zip(nodes) {
            let at = |index| self.shape.of(NodeAddr { level, index }).0;
            chunks.extend(
                indices
                    .chunk_by(|&a, &b| at(a) == at(b))
                    .map(|run| at(run[0])),
            );
        }
        reader.prefetch(&chunks)?;
        // A chunk spans the levels of its band: gather every level's writes into it first.
        let mut touched: Touched<H> = BTreeMap::new();
        for (level, (indices, values)) in (0u8..).zip(nodes) {
            let at = |index| self.shape.of(NodeAddr { level, index });
            let mut offset = 0;
            // Indices increase, so each chunk's nodes of one level are one run.
            for run in indices.chunk_by(|&a, &b| at(a).0 == at(b).0) {
                let run_values = &values[offset..offset + run.len()];
                offset += run.len();
                let (chunk, _) = at(run[0]);
                let new = match touched.entry(chunk) {
                    Entry::Occupied(entry) => &mut entry.into_mut().1,
                    Entry::Vacant(entry) => {
                        let old = reader.stored_chunk(chunk)?;
                        &mut entry.insert((old.clone(), old)).1
                    }
                };
                for (&index, &value) in run.iter().zip(run_values) {
                    new[at(index).1] = value;
                }
            }
        }
        let mut changed = Vec::new();
        for (chunk, (old, new)) in touched {
            if new == old {
                continue;
            }
            let key = chunk_key(chunk);
            if new == self.empty_chunk(chunk) {
                batch.remove(&key);
            } else {
                batch.insert(&key, encode_chunk::<H>(&new));
            }
            if chunk.level >= cache_from {
                changed.push((chunk, new));
            }
        }
        Ok(changed)
    }

    /// Adds to `batch`, in frame `id`, each key's value before its first overwrite since that
    /// checkpoint (counters and metadata are in the checkpoint record).
    fn stage_undo(&self, id: u64, batch: &mut StoreBatch) -> Result<(), StoreTreeError<S>> {
        let keys: Vec<Vec<u8>> = batch
            .ops()
            .iter()
            .map(|(key, _)| key.clone())
            .filter(|key| key != NEXT_INDEX_KEY && key != METADATA_KEY)
            .collect();
        // Two reads for the whole batch, not two per key: which keys the frame already holds,
        // then the values of the others.
        let records: Vec<Vec<u8>> = keys.iter().map(|key| undo_key(id, key)).collect();
        let held = self.get_many(&records)?;
        let (records, keys): (Vec<_>, Vec<_>) = records
            .into_iter()
            .zip(keys)
            .zip(held)
            .filter_map(|(pair, held)| held.is_none().then_some(pair))
            .unzip();
        for (record, old) in records.iter().zip(self.get_many(&keys)?) {
            batch.insert(record, encode_undo(old.as_deref()));
        }
        Ok(())
    }
}

impl<H: DigestCodec, S: KvStore> TreeStore<H> for KvTreeStore<H, S> {
    type Error = StoreTreeError<S>;
    type Reader<'a>
        = KvReader<'a, H, S>
    where
        Self: 'a;
    type Staged = KvStaged<H>;
    /// Each stored key and its bytes at the checkpoint (`None`: absent), in key order.
    type Restore = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

    fn reader(&self) -> KvReader<'_, H, S> {
        KvReader::new(self)
    }

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, Self::Error> {
        self.read_node(addr)
    }

    fn siblings(&self, depth: Depth, index: u64) -> Result<Vec<Digest<H>>, Self::Error> {
        self.path_siblings(depth, index)
    }

    fn deleted_leaves(&self) -> Result<Vec<u64>, Self::Error> {
        let mut indices = Vec::new();
        let decode = |key: &[u8], _: &[u8]| {
            parse_deleted_key(key).ok_or_else(|| Corrupt::new(key, "malformed deleted-slot key"))
        };
        self.scan(&[DELETED_PREFIX], decode, |index| indices.push(index))?;
        Ok(indices)
    }

    fn record(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error> {
        self.get(&record_key(key))
    }

    fn stage(
        &self,
        reader: KvReader<'_, H, S>,
        change: Change<H>,
    ) -> Result<KvStaged<H>, Self::Error> {
        let mut batch = StoreBatch::default();
        let cache_from = change
            .next_index
            .map_or(self.cache_from, |n| self.cache_from_for(n));
        let changed = self.stage_nodes(&reader, &change.nodes, cache_from, &mut batch)?;
        for &(index, set) in &change.deleted {
            if set {
                batch.insert(&deleted_key(index), Vec::new());
            } else {
                batch.remove(&deleted_key(index));
            }
        }
        if let Some(next_index) = change.next_index {
            batch.insert(NEXT_INDEX_KEY, layout::encode_u64(next_index));
        }
        if let Some(metadata) = change.metadata {
            batch.insert(METADATA_KEY, metadata);
        }
        for (key, value) in change.records {
            match value {
                Some(value) => batch.insert(&record_key(&key), value),
                None => batch.remove(&record_key(&key)),
            }
        }
        if let Some(id) = change.record_into {
            self.stage_undo(id, &mut batch)?;
        }
        if let Some(config) = change.history {
            batch.insert(HISTORY_KEY, encode_history(config)?);
        }
        if let Some(info) = &change.added {
            batch.insert(&checkpoint_key(info.id), encode_checkpoint::<H>(info));
        }
        self.remove_checkpoints(&change.removed, &mut batch)?;
        Ok(KvStaged {
            batch,
            changed,
            next_index: change.next_index,
        })
    }

    /// The one store commit (none for an empty batch), then the top-of-tree cache.
    fn commit(&mut self, staged: KvStaged<H>) -> Result<(), Self::Error> {
        if !staged.batch.is_empty() {
            self.commit_counted(staged.batch)?;
        }
        if let Some(next_index) = staged.next_index {
            self.follow_size(next_index);
        }
        let cache = self.cache.get_mut();
        for (chunk, values) in staged.changed {
            cache.committed(chunk, values);
        }
        Ok(())
    }

    fn recorded_node(
        &self,
        frame: FrameRef,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, Self::Error> {
        self.undo_node(frame.id, addr)
    }

    fn frame_records(&self, frame: FrameRef, out: &mut Self::Restore) -> Result<(), Self::Error> {
        self.undo_records(frame.id, out)
    }

    fn commit_rewind(
        &mut self,
        restore: Self::Restore,
        to: &CheckpointInfo<Digest<H>>,
        consumed: &[u64],
    ) -> Result<(), Self::Error> {
        self.rewind(restore, to, consumed)
    }
}
