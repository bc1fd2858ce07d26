//! Checkpoints, rewind and the window of acceptable roots: what an RLN node following a chain
//! needs to survive reorganisations.
//!
//! A tree that implements [`History`] keeps, per retained checkpoint, the *previous values* of
//! everything the batches after it overwrote (an undo frame), never a copy of the tree: a
//! checkpoint costs memory or disk in proportion to what changed. Frame `k` holds, for each
//! node (or stored key) first changed after checkpoint `k`, its value at checkpoint `k`. So:
//!
//! - the value of `x` at checkpoint `k` is its entry in the first of frames `k, k+1, …` that has
//!   one, or its current value if none does ([`proof_at`](History::proof_at));
//! - rewinding to `k` writes back, for every `x` in frames `k ..`, that same value, restores the
//!   counters and metadata recorded with `k`, and drops the later checkpoints.
//!
//! The rules every tree shares — increasing ids, retention, the root window, resolving a root to
//! its checkpoint — live in [`CheckpointList`], once; and [`History`] itself (checkpoint,
//! rewind, pruning, `proof_at`) is implemented once, by the [engine](crate::engine) for every
//! store, which keeps the frames and commits each history change as one unit.

use hasher::Digest;

use crate::{MerkleProof, MerkleTree, TreeError};

/// How much history a tree keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct HistoryConfig {
    /// Checkpoints retained; the oldest is pruned (with its undo frame) when a new one would
    /// exceed this. `0` records nothing.
    pub max_checkpoints: usize,
    /// Roots a verifier accepts: the current root and those of the most recent checkpoints,
    /// this many distinct roots in all.
    pub root_window: usize,
}

impl Default for HistoryConfig {
    /// 128 checkpoints (a reorg depth no chain we follow exceeds) and a window of 5 roots (what
    /// nwaku accepts).
    fn default() -> Self {
        Self {
            max_checkpoints: 128,
            root_window: 5,
        }
    }
}

/// A retained checkpoint: the caller's id and the tree state it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointInfo<D> {
    /// The caller's id (e.g. a block number).
    pub id: u64,
    /// The root at the checkpoint.
    pub root: D,
    /// `next_index` at the checkpoint.
    pub next_index: u64,
    /// The metadata at the checkpoint.
    pub metadata: Vec<u8>,
}

/// The retained checkpoints, oldest first, and the rules on them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointList<D> {
    list: Vec<CheckpointInfo<D>>,
}

impl<D> Default for CheckpointList<D> {
    fn default() -> Self {
        Self { list: Vec::new() }
    }
}

impl<D: Copy + Eq> CheckpointList<D> {
    /// A list from checkpoints already sorted by increasing id (as a store scans them).
    ///
    /// # Errors
    /// [`TreeError::CheckpointNotIncreasing`] if they are not.
    pub fn from_sorted(list: Vec<CheckpointInfo<D>>) -> Result<Self, TreeError> {
        for pair in list.windows(2) {
            if pair[1].id <= pair[0].id {
                return Err(TreeError::CheckpointNotIncreasing {
                    id: pair[1].id,
                    last: pair[0].id,
                });
            }
        }
        Ok(Self { list })
    }

    /// The checkpoints, oldest first.
    #[must_use]
    pub fn as_slice(&self) -> &[CheckpointInfo<D>] {
        &self.list
    }

    /// The newest checkpoint: the one whose undo frame the next batch adds to.
    #[must_use]
    pub fn latest(&self) -> Option<&CheckpointInfo<D>> {
        self.list.last()
    }

    /// Checks that `id` may be recorded next (strictly above the newest id).
    ///
    /// # Errors
    /// [`TreeError::CheckpointNotIncreasing`].
    pub fn check_new(&self, id: u64) -> Result<(), TreeError> {
        match self.list.last() {
            Some(last) if id <= last.id => {
                Err(TreeError::CheckpointNotIncreasing { id, last: last.id })
            }
            _ => Ok(()),
        }
    }

    /// Appends a checkpoint (after [`check_new`](Self::check_new)) and returns the ids pruned
    /// to respect `max_checkpoints`, oldest first.
    pub fn push(&mut self, info: CheckpointInfo<D>, max_checkpoints: usize) -> Vec<u64> {
        self.list.push(info);
        self.prune(max_checkpoints)
    }

    /// Drops the oldest checkpoints beyond `max_checkpoints`; returns their ids.
    pub fn prune(&mut self, max_checkpoints: usize) -> Vec<u64> {
        let excess = self.list.len().saturating_sub(max_checkpoints);
        self.list.drain(..excess).map(|c| c.id).collect()
    }

    /// Position of checkpoint `id`.
    ///
    /// # Errors
    /// [`TreeError::UnknownCheckpoint`] when `id` is not retained (never recorded, pruned, or
    /// discarded by a rewind).
    pub fn position(&self, id: u64) -> Result<usize, TreeError> {
        self.list
            .binary_search_by_key(&id, |c| c.id)
            .map_err(|_| TreeError::UnknownCheckpoint {
                id,
                oldest: self.list.first().map(|c| c.id),
            })
    }

    /// Keeps checkpoints up to and including position `pos` (a rewind to it); returns the ids
    /// discarded.
    pub fn truncate_after(&mut self, pos: usize) -> Vec<u64> {
        self.list.drain(pos + 1..).map(|c| c.id).collect()
    }

    /// The acceptable roots, newest first: `current`, then the roots of the newest checkpoints,
    /// `window` distinct roots at most.
    #[must_use]
    pub fn window(&self, current: D, window: usize) -> Vec<D> {
        let mut roots = Vec::with_capacity(window);
        for root in std::iter::once(current).chain(self.list.iter().rev().map(|c| c.root)) {
            if roots.len() >= window {
                break;
            }
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
        roots
    }

    /// Where the state with `root` is: `None` for the current state, `Some(pos)` for the newest
    /// checkpoint with that root.
    ///
    /// # Errors
    /// [`TreeError::RootNotInWindow`] when `root` is not an acceptable root.
    pub fn resolve_root(
        &self,
        root: &D,
        current: D,
        window: usize,
    ) -> Result<Option<usize>, TreeError> {
        if !self.window(current, window).contains(root) {
            return Err(TreeError::RootNotInWindow);
        }
        if *root == current {
            return Ok(None);
        }
        Ok(self.list.iter().rposition(|c| c.root == *root))
    }
}

/// The retained checkpoints of a tree hashed with `H`, oldest first.
pub type Checkpoints<H> = Vec<CheckpointInfo<Digest<H>>>;

/// A tree with checkpoints, rewind and a window of acceptable roots.
pub trait History: MerkleTree {
    /// The retention settings.
    fn history_config(&self) -> HistoryConfig;

    /// Changes the retention settings; a lower `max_checkpoints` prunes at once.
    ///
    /// # Errors
    /// A storage error while pruning.
    fn set_history_config(&mut self, config: HistoryConfig) -> Result<(), Self::Error>;

    /// Records the current state under `id` (strictly above every retained id).
    ///
    /// # Errors
    /// [`TreeError::CheckpointNotIncreasing`], or a storage error.
    fn checkpoint(&mut self, id: u64) -> Result<(), Self::Error>;

    /// Restores leaves, nodes, `next_index`, deleted slots and metadata exactly as they were at
    /// checkpoint `id`, and discards the checkpoints after it (their roots leave the window).
    ///
    /// # Errors
    /// [`TreeError::UnknownCheckpoint`], or a storage error (the tree is then unchanged).
    fn rewind_to(&mut self, id: u64) -> Result<(), Self::Error>;

    /// The retained checkpoints, oldest first.
    ///
    /// # Errors
    /// A storage error.
    fn checkpoints(&self) -> Result<Checkpoints<Self::Hasher>, Self::Error>;

    /// A membership proof for `index` against `root`, which must be in the window.
    ///
    /// # Errors
    /// [`TreeError::RootNotInWindow`], [`TreeError::IndexOutOfBounds`], or a storage error.
    fn proof_at(
        &self,
        root: &Digest<Self::Hasher>,
        index: u64,
    ) -> Result<MerkleProof<Self::Hasher>, Self::Error>;

    /// The acceptable roots, newest first (the current root first).
    ///
    /// # Errors
    /// A storage error.
    fn roots(&self) -> Result<Vec<Digest<Self::Hasher>>, Self::Error> {
        let list = CheckpointList::from_sorted(self.checkpoints()?)?;
        Ok(list.window(self.root(), self.history_config().root_window))
    }

    /// Whether a proof against `root` is acceptable now.
    ///
    /// # Errors
    /// A storage error.
    fn is_acceptable_root(&self, root: &Digest<Self::Hasher>) -> Result<bool, Self::Error> {
        Ok(self.roots()?.contains(root))
    }
}

/// A retained checkpoint's frame: its position in the checkpoint list (oldest first) and its id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef {
    /// Position among the retained checkpoints, oldest first.
    pub position: usize,
    /// The checkpoint's id.
    pub id: u64,
}

/// The value of one node or key at a checkpoint: the first of the undo frames from that
/// checkpoint on (oldest first) that recorded it, else its current value. Both tree families
/// resolve historical reads through this one rule; frames are read lazily, stopping at the first
/// hit.
///
/// # Errors
/// The first error a frame read or the current read returns.
pub fn value_at<V, E>(
    frames: impl IntoIterator<Item = Result<Option<V>, E>>,
    current: impl FnOnce() -> Result<V, E>,
) -> Result<V, E> {
    for frame in frames {
        if let Some(value) = frame? {
            return Ok(value);
        }
    }
    current()
}
