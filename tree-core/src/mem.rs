//! The in-memory store: nodes in a dense or sparse layout, deleted slots, and undo frames of
//! node values, under the one [engine](crate::engine).
//!
//! [`FullMerkleTree`](crate::FullMerkleTree) and [`OptimalMerkleTree`](crate::OptimalMerkleTree)
//! are the engine over this store with a dense or a sparse layout.

use std::collections::{BTreeMap, BTreeSet};

use derive_where::derive_where;
use hasher::{Digest, Hasher};
use rustc_hash::FxHashMap;

use crate::engine::{Change, InPlace, NodeRead, Tree, TreeState, TreeStore};
use crate::history::FrameRef;
use crate::rehash::NodeLevels;
use crate::{CheckpointInfo, Depth, HistoryConfig, NodeAddr, RehashConfig, TreeError};

/// A node layout in memory: infallible reads and writes.
pub trait MemNodes<H: Hasher> {
    /// The node at a valid `addr`.
    fn get(&self, addr: NodeAddr) -> Digest<H>;
    /// Stores `values[i]` at `(level, indices[i])`; `indices` strictly increasing.
    fn write_level(&mut self, level: u8, indices: &[u64], values: &[Digest<H>]);
    /// Heap bytes held for nodes (capacity, not just length), for memory reports.
    fn heap_bytes(&self) -> usize;
    /// Number of node values held.
    fn stored_nodes(&self) -> usize;
}

/// One checkpoint's undo frame: the value at the checkpoint of every node, deleted flag and
/// record first changed after it. Also what a rewind gathers from the frames it
/// consumes.
#[derive_where(Clone, Debug, Default)]
pub struct Frame<H: Hasher> {
    nodes: FxHashMap<NodeAddr, Digest<H>>,
    deleted: FxHashMap<u64, bool>,
    records: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<H: Hasher> Frame<H> {
    fn heap_bytes(&self) -> usize {
        // hashbrown: one control byte per bucket next to each entry.
        self.nodes.capacity() * (size_of::<(NodeAddr, Digest<H>)>() + 1)
            + self.deleted.capacity() * (size_of::<(u64, bool)>() + 1)
            + self
                .records
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }
}

/// Nodes in layout `N`, the deleted slots (a sparse set: memory grows with deletions, never with
/// capacity), the records and one undo frame per retained checkpoint, oldest first.
#[derive_where(Clone, Debug; N)]
pub struct InMemoryStore<H: Hasher, N> {
    nodes: N,
    deleted: BTreeSet<u64>,
    records: BTreeMap<Vec<u8>, Vec<u8>>,
    frames: Vec<Frame<H>>,
}

/// An in-memory Merkle tree over node layout `N`.
pub type InMemoryTree<H, N> = Tree<H, InMemoryStore<H, N>>;

impl<H: Hasher, N: MemNodes<H>> Tree<H, InMemoryStore<H, N>> {
    /// An empty tree over `nodes` (every node the empty subtree of its level).
    pub(crate) fn from_nodes(nodes: N, depth: Depth, config: RehashConfig) -> Self {
        let root = nodes.get(NodeAddr::root(depth));
        let store = InMemoryStore {
            nodes,
            deleted: BTreeSet::new(),
            records: BTreeMap::new(),
            frames: Vec::new(),
        };
        let state = TreeState {
            root,
            next_index: 0,
            metadata: Vec::new(),
            history: HistoryConfig::default(),
            checkpoints: crate::history::CheckpointList::default(),
        };
        Self::from_store(store, depth, config, state)
    }

    #[cfg(test)]
    pub(crate) fn nodes_for_test(&self) -> &N {
        &self.store.nodes
    }

    /// Heap bytes held for nodes.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.store.nodes.heap_bytes()
    }

    /// Number of node values held.
    #[must_use]
    pub fn stored_nodes(&self) -> usize {
        self.store.nodes.stored_nodes()
    }

    /// Heap bytes held by the undo frames of the retained checkpoints.
    #[must_use]
    pub fn history_bytes(&self) -> usize {
        self.store.frames.iter().map(Frame::heap_bytes).sum()
    }
}

/// One apply reads the nodes directly.
pub struct MemReader<'a, N>(&'a N);

impl<H: Hasher, N: MemNodes<H>> NodeRead<H> for MemReader<'_, N> {
    type Error = TreeError;

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, TreeError> {
        Ok(self.0.get(addr))
    }
}

/// `apply`'s in-place writes: each node's value before its first overwrite goes into the open
/// frame, then the node is written.
struct Recorder<'a, H: Hasher, N> {
    nodes: &'a mut N,
    frame: Option<&'a mut Frame<H>>,
}

impl<H: Hasher, N: MemNodes<H>> NodeLevels<H> for Recorder<'_, H, N> {
    type Error = TreeError;

    fn read_children(
        &self,
        child_level: u8,
        parents: &[u64],
        out: &mut Vec<Digest<H>>,
    ) -> Result<(), TreeError> {
        out.clear();
        for &parent in parents {
            for index in [parent * 2, parent * 2 + 1] {
                out.push(self.nodes.get(NodeAddr {
                    level: child_level,
                    index,
                }));
            }
        }
        Ok(())
    }

    fn write_level(
        &mut self,
        level: u8,
        indices: &[u64],
        values: &[Digest<H>],
    ) -> Result<(), TreeError> {
        write_recorded(
            self.frame.as_deref_mut(),
            self.nodes,
            level,
            indices,
            values,
        );
        Ok(())
    }
}

/// Writes `values` at `(level, indices)`, first recording into `frame` the current value of
/// each node it does not hold yet: the one rule both write paths (in place and committed) keep.
fn write_recorded<H: Hasher, N: MemNodes<H>>(
    frame: Option<&mut Frame<H>>,
    nodes: &mut N,
    level: u8,
    indices: &[u64],
    values: &[Digest<H>],
) {
    if let Some(frame) = frame {
        for &index in indices {
            let addr = NodeAddr { level, index };
            frame.nodes.entry(addr).or_insert_with(|| nodes.get(addr));
        }
    }
    nodes.write_level(level, indices, values);
}

/// Sets (`Some`) or removes record `key`.
fn set_record(records: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: Vec<u8>, value: Option<Vec<u8>>) {
    match value {
        Some(value) => records.insert(key, value),
        None => records.remove(&key),
    };
}

/// Sets or clears leaf `index`'s deleted flag.
fn set_deleted(deleted: &mut BTreeSet<u64>, index: u64, set: bool) {
    if set {
        deleted.insert(index);
    } else {
        deleted.remove(&index);
    }
}

impl<H: Hasher, N: MemNodes<H>> TreeStore<H> for InMemoryStore<H, N> {
    type Error = TreeError;
    type Reader<'a>
        = MemReader<'a, N>
    where
        Self: 'a;
    type Staged = Change<H>;
    type Restore = Frame<H>;

    fn reader(&self) -> MemReader<'_, N> {
        MemReader(&self.nodes)
    }

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, TreeError> {
        Ok(self.nodes.get(addr))
    }

    fn deleted_leaves(&self) -> Result<Vec<u64>, TreeError> {
        Ok(self.deleted.iter().copied().collect())
    }

    fn record(&self, key: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        Ok(self.records.get(key).cloned())
    }

    fn write_in_place(&mut self, record_into: Option<u64>) -> Option<InPlace<'_, H, TreeError>> {
        Some(Box::new(Recorder {
            nodes: &mut self.nodes,
            frame: record_into.and(self.frames.last_mut()),
        }))
    }

    /// Nothing to encode: the change is written as it is.
    fn stage(&self, _reader: MemReader<'_, N>, change: Change<H>) -> Result<Change<H>, TreeError> {
        Ok(change)
    }

    /// Records each node's, flag's and record's value before its first overwrite into the open
    /// frame, then writes; opens the added checkpoint's frame and drops the pruned ones.
    fn commit(&mut self, change: Change<H>) -> Result<(), TreeError> {
        let Self {
            nodes,
            deleted,
            records,
            frames,
        } = self;
        let mut frame = change.record_into.and(frames.last_mut());
        for (level, (indices, values)) in (0u8..).zip(&change.nodes) {
            write_recorded(frame.as_deref_mut(), nodes, level, indices, values);
        }
        for &(index, set) in &change.deleted {
            if let Some(frame) = frame.as_deref_mut() {
                frame
                    .deleted
                    .entry(index)
                    .or_insert_with(|| deleted.contains(&index));
            }
            set_deleted(deleted, index, set);
        }
        for (key, value) in change.records {
            if let Some(frame) = frame.as_deref_mut() {
                if !frame.records.contains_key(&key) {
                    frame
                        .records
                        .insert(key.clone(), records.get(&key).cloned());
                }
            }
            set_record(records, key, value);
        }
        if change.added.is_some() {
            frames.push(Frame::default());
        }
        // Pruning removes the oldest checkpoints, whose frames are the first ones.
        frames.drain(..change.removed.len().min(frames.len()));
        Ok(())
    }

    fn recorded_node(
        &self,
        frame: FrameRef,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, TreeError> {
        Ok(self
            .frames
            .get(frame.position)
            .and_then(|f| f.nodes.get(&addr))
            .copied())
    }

    fn frame_records(&self, frame: FrameRef, out: &mut Frame<H>) -> Result<(), TreeError> {
        let Some(frame) = self.frames.get(frame.position) else {
            return Ok(());
        };
        for (addr, value) in &frame.nodes {
            out.nodes.entry(*addr).or_insert(*value);
        }
        for (index, deleted) in &frame.deleted {
            out.deleted.entry(*index).or_insert(*deleted);
        }
        for (key, value) in &frame.records {
            if !out.records.contains_key(key) {
                out.records.insert(key.clone(), value.clone());
            }
        }
        Ok(())
    }

    fn commit_rewind(
        &mut self,
        restore: Frame<H>,
        _to: &CheckpointInfo<Digest<H>>,
        consumed: &[u64],
    ) -> Result<(), TreeError> {
        let mut nodes: Vec<(NodeAddr, Digest<H>)> = restore.nodes.into_iter().collect();
        nodes.sort_unstable_by_key(|(addr, _)| *addr);
        for level in nodes.chunk_by(|a, b| a.0.level == b.0.level) {
            let indices: Vec<u64> = level.iter().map(|(a, _)| a.index).collect();
            let values: Vec<Digest<H>> = level.iter().map(|(_, v)| *v).collect();
            self.nodes.write_level(level[0].0.level, &indices, &values);
        }
        for (index, was_deleted) in restore.deleted {
            set_deleted(&mut self.deleted, index, was_deleted);
        }
        for (key, value) in restore.records {
            set_record(&mut self.records, key, value);
        }
        // `to` keeps its (now empty) frame; the later ones go with their checkpoints.
        let keep = self.frames.len().saturating_sub(consumed.len()) + 1;
        self.frames.truncate(keep);
        if let Some(frame) = self.frames.last_mut() {
            *frame = Frame::default();
        }
        Ok(())
    }
}
