//! The in-memory tree: one `MerkleTree` implementation over a pluggable node store.
//!
//! [`FullMerkleTree`](crate::FullMerkleTree) and [`OptimalMerkleTree`](crate::OptimalMerkleTree)
//! are this type with a dense or a sparse store, so apply, validation and bookkeeping are written
//! once.

use std::convert::Infallible;

use derive_where::derive_where;
use hasher::{Digest, Hasher};
use rustc_hash::FxHashMap;

use crate::history::{CheckpointInfo, CheckpointList, FrameRef, HistoryConfig, UndoFrames};
use crate::rehash::{apply_writes, NodeLevels};
use crate::state::Bookkeeping;
use crate::{Depth, MerkleProof, MerkleTree, NodeAddr, RehashConfig, TreeError, UpdateBatch};

/// What an in-memory node store adds to [`NodeLevels`]: infallible reads.
pub trait MemNodes<H: Hasher>: NodeLevels<H, Error = Infallible> {
    /// The node at a valid `addr`.
    fn get(&self, addr: NodeAddr) -> Digest<H>;
    /// Heap bytes held for nodes (capacity, not just length), for memory reports.
    fn heap_bytes(&self) -> usize;
    /// Number of node values held.
    fn stored_nodes(&self) -> usize;
}

/// One checkpoint's undo frame: the value at the checkpoint of every node, and the deleted flag
/// of every leaf, first changed after it. Also what a rewind gathers from the frames it
/// consumes.
#[derive_where(Clone, Debug, Default)]
pub struct Frame<H: Hasher> {
    nodes: FxHashMap<NodeAddr, Digest<H>>,
    deleted: FxHashMap<u64, bool>,
}

impl<H: Hasher> Frame<H> {
    fn heap_bytes(&self) -> usize {
        // hashbrown: one control byte per bucket next to each entry.
        self.nodes.capacity() * (size_of::<(NodeAddr, Digest<H>)>() + 1)
            + self.deleted.capacity() * (size_of::<(u64, bool)>() + 1)
    }
}

/// The in-memory trees' history: checkpoints and their frames, index for index.
#[derive_where(Clone, Debug, Default)]
struct MemHistory<H: Hasher> {
    config: HistoryConfig,
    list: CheckpointList<Digest<H>>,
    frames: Vec<Frame<H>>,
}

/// The node store as the rehash sees it while a checkpoint is open: records each node's value
/// before its first overwrite into the newest frame, then writes through.
struct Recorder<'a, H: Hasher, S> {
    nodes: &'a mut S,
    frame: &'a mut Frame<H>,
}

impl<H: Hasher, S: MemNodes<H>> NodeLevels<H> for Recorder<'_, H, S> {
    type Error = Infallible;

    fn read_children(
        &self,
        child_level: u8,
        parents: &[u64],
        out: &mut Vec<Digest<H>>,
    ) -> Result<(), Infallible> {
        self.nodes.read_children(child_level, parents, out)
    }

    fn write_level(
        &mut self,
        level: u8,
        indices: &[u64],
        values: &[Digest<H>],
    ) -> Result<(), Infallible> {
        for &index in indices {
            let addr = NodeAddr { level, index };
            let nodes = &*self.nodes;
            self.frame
                .nodes
                .entry(addr)
                .or_insert_with(|| nodes.get(addr));
        }
        self.nodes.write_level(level, indices, values)
    }
}

/// An in-memory Merkle tree over node store `S`.
#[derive_where(Clone, Debug; S)]
pub struct InMemoryTree<H: Hasher, S> {
    nodes: S,
    book: Bookkeeping,
    history: MemHistory<H>,
    _hasher: core::marker::PhantomData<H>,
}

impl<H: Hasher, S: MemNodes<H>> InMemoryTree<H, S> {
    pub(crate) fn from_parts(nodes: S, depth: Depth, config: RehashConfig) -> Self {
        Self {
            nodes,
            book: Bookkeeping::new(depth, config),
            history: MemHistory::default(),
            _hasher: core::marker::PhantomData,
        }
    }

    #[cfg(test)]
    pub(crate) fn nodes_for_test(&self) -> &S {
        &self.nodes
    }

    /// Heap bytes held for nodes.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.nodes.heap_bytes()
    }

    /// Number of node values held.
    #[must_use]
    pub fn stored_nodes(&self) -> usize {
        self.nodes.stored_nodes()
    }

    /// Heap bytes held by the undo frames of the retained checkpoints.
    #[must_use]
    pub fn history_bytes(&self) -> usize {
        self.history.frames.iter().map(Frame::heap_bytes).sum()
    }
}

impl<H: Hasher, S: MemNodes<H>> MerkleTree for InMemoryTree<H, S> {
    type Hasher = H;
    type Error = TreeError;

    fn depth(&self) -> Depth {
        self.book.depth
    }

    fn next_index(&self) -> u64 {
        self.book.next_index
    }

    fn root(&self) -> Digest<H> {
        self.nodes.get(NodeAddr::root(self.book.depth))
    }

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, TreeError> {
        self.book.depth.check_addr(addr)?;
        Ok(self.nodes.get(addr))
    }

    fn empty_leaves_indices(&self) -> Result<Vec<u64>, TreeError> {
        Ok(self.book.deleted.iter().copied().collect())
    }

    fn metadata(&self) -> Result<Vec<u8>, TreeError> {
        Ok(self.book.metadata.clone())
    }

    fn apply(&mut self, batch: UpdateBatch<H>) -> Result<(), TreeError> {
        let prepared = batch.validate(self.book.depth, self.book.next_index)?;
        let (depth, config) = (self.book.depth, &self.book.config);
        let Ok(()) = match self.history.frames.last_mut() {
            Some(frame) => {
                for &(index, _) in prepared.writes() {
                    let was_deleted = self.book.deleted.contains(&index);
                    frame.deleted.entry(index).or_insert(was_deleted);
                }
                let mut recorder = Recorder {
                    nodes: &mut self.nodes,
                    frame,
                };
                apply_writes::<H, _>(&mut recorder, depth, prepared.writes(), config)
            }
            None => apply_writes::<H, S>(&mut self.nodes, depth, prepared.writes(), config),
        };
        self.book.record(&prepared);
        Ok(())
    }

    /// Direct reads from the node store (no per-level bounds check or `Result`).
    fn proof(&self, index: u64) -> Result<MerkleProof<H>, TreeError> {
        self.book.depth.check_index(index)?;
        let siblings = NodeAddr::proof_path(self.book.depth, index)
            .map(|addr| self.nodes.get(addr))
            .collect();
        Ok(MerkleProof::new(index, siblings))
    }

    fn rehash_config(&self) -> &RehashConfig {
        &self.book.config
    }

    fn set_rehash_config(&mut self, config: RehashConfig) {
        self.book.config = config;
    }
}

impl<H: Hasher, S: MemNodes<H>> UndoFrames for InMemoryTree<H, S> {
    type Restore = Frame<H>;

    fn history_state(&self) -> (HistoryConfig, &CheckpointList<Digest<H>>) {
        (self.history.config, &self.history.list)
    }

    fn recorded_node(
        &self,
        frame: FrameRef,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, TreeError> {
        Ok(self.history.frames[frame.position]
            .nodes
            .get(&addr)
            .copied())
    }

    fn frame_records(&self, frame: FrameRef, out: &mut Frame<H>) -> Result<(), TreeError> {
        let frame = &self.history.frames[frame.position];
        for (addr, value) in &frame.nodes {
            out.nodes.entry(*addr).or_insert(*value);
        }
        for (index, deleted) in &frame.deleted {
            out.deleted.entry(*index).or_insert(*deleted);
        }
        Ok(())
    }

    fn commit_history(
        &mut self,
        config: HistoryConfig,
        list: CheckpointList<Digest<H>>,
        added: Option<&CheckpointInfo<Digest<H>>>,
        removed: &[u64],
    ) -> Result<(), TreeError> {
        if added.is_some() {
            self.history.frames.push(Frame::default());
        }
        // Pruning removes the oldest checkpoints, whose frames are the first ones.
        self.history.frames.drain(..removed.len());
        self.history.config = config;
        self.history.list = list;
        Ok(())
    }

    fn commit_rewind(
        &mut self,
        restore: Frame<H>,
        to: &CheckpointInfo<Digest<H>>,
        consumed: &[u64],
        list: CheckpointList<Digest<H>>,
    ) -> Result<(), TreeError> {
        let mut nodes: Vec<(NodeAddr, Digest<H>)> = restore.nodes.into_iter().collect();
        nodes.sort_unstable_by_key(|(addr, _)| *addr);
        for level in nodes.chunk_by(|a, b| a.0.level == b.0.level) {
            let indices: Vec<u64> = level.iter().map(|(a, _)| a.index).collect();
            let values: Vec<Digest<H>> = level.iter().map(|(_, v)| *v).collect();
            let Ok(()) = self.nodes.write_level(level[0].0.level, &indices, &values);
        }
        for (index, was_deleted) in restore.deleted {
            if was_deleted {
                self.book.deleted.insert(index);
            } else {
                self.book.deleted.remove(&index);
            }
        }
        self.book.next_index = to.next_index;
        self.book.metadata.clone_from(&to.metadata);
        debug_assert!(
            self.root() == to.root,
            "rewind restores the checkpoint's root"
        );
        // `to` keeps its (now empty) frame; the later ones go with their checkpoints.
        let keep = self.history.frames.len() - consumed.len() + 1;
        self.history.frames.truncate(keep);
        if let Some(frame) = self.history.frames.last_mut() {
            *frame = Frame::default();
        }
        self.history.list = list;
        Ok(())
    }
}
