//! The store trait beneath the engine, in the tree's vocabulary: node reads, one staged commit
//! of node levels, deleted slots, counters, undo frames and checkpoint records, and a rewind.

use derive_where::derive_where;
use hasher::{Digest, Hasher};

use crate::history::FrameRef;
use crate::rehash::NodeLevels;
use crate::{AsTreeError, CheckpointInfo, Depth, HistoryConfig, NodeAddr, Records, TreeError};

/// Reads of stored nodes (the empty subtree's value where nothing is stored).
pub trait NodeRead<H: Hasher> {
    /// The store's error.
    type Error;

    /// The stored value of the valid node `addr`.
    ///
    /// # Errors
    /// A storage read failure.
    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, Self::Error>;
}

/// Writes nodes in place for one `apply`: see [`TreeStore::write_in_place`].
pub type InPlace<'a, H, E> = Box<dyn NodeLevels<H, Error = E> + 'a>;

/// Per level (index = level), the nodes one apply writes: strictly increasing indices and
/// their values.
pub type LevelWrites<H> = Vec<(Vec<u64>, Vec<Digest<H>>)>;

/// One commit, as the engine hands it to a store: everything in it lands as one unit.
///
/// Built by the engine for an apply (nodes, deleted flags, counters, maybe a checkpoint), a new
/// checkpoint or a history setting; the store decides only how the parts are encoded and how
/// what they overwrite is recorded into the open undo frame.
#[derive_where(Debug, Default)]
pub struct Change<H: Hasher> {
    /// The nodes written.
    pub nodes: LevelWrites<H>,
    /// Leaves whose deleted flag this change sets (`true`) or clears (`false`).
    pub deleted: Vec<(u64, bool)>,
    /// The new `next_index`, when it changes.
    pub next_index: Option<u64>,
    /// The new metadata, when set.
    pub metadata: Option<Vec<u8>>,
    /// Records written (`None` removes), recorded into the open frame like nodes.
    pub records: Records,
    /// The open undo frame (the newest checkpoint's id): the value of every node and deleted
    /// flag this change overwrites for the first time since that checkpoint is recorded into it.
    pub record_into: Option<u64>,
    /// New retention settings to store.
    pub history: Option<HistoryConfig>,
    /// A checkpoint recorded after the change, with an empty frame.
    pub added: Option<CheckpointInfo<Digest<H>>>,
    /// Checkpoints pruned, oldest first: their records and frames go.
    pub removed: Vec<u64>,
}

/// Where a [`Tree`](super::Tree) keeps its nodes, deleted slots, undo frames and checkpoints.
///
/// The engine owns every rule (validation, rehash, which checkpoint is open, pruning, what a
/// rewind restores, the root window, `proof_at`); a store only reads and writes in the tree's
/// terms, the way zcash's `ShardStore` sits under `ShardTree`. Memory stores (dense, sparse) and
/// the key-value stores (sled, redb) implement it.
pub trait TreeStore<H: Hasher>: Sized {
    /// The tree's error: rule violations plus what the store can fail with.
    type Error: std::error::Error + From<TreeError> + AsTreeError + Send + Sync + 'static;
    /// The view one apply reads through (a per-apply cache for a key-value store).
    type Reader<'a>: NodeRead<H, Error = Self::Error>
    where
        Self: 'a;
    /// A [`Change`] made ready to commit by [`stage`](Self::stage), reading only.
    type Staged;
    /// What a rewind writes back, gathered from the frames it consumes.
    type Restore: Default;

    /// A reader for one apply.
    fn reader(&self) -> Self::Reader<'_>;

    /// The stored value of the valid node `addr` (proofs and single reads).
    ///
    /// # Errors
    /// A storage read failure.
    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, Self::Error>;

    /// The siblings on leaf `index`'s path, bottom up, for a proof of a tree of `depth` (the
    /// index already checked). The default reads them one by one; a store that keeps several
    /// nodes per entry reads each entry once.
    ///
    /// # Errors
    /// A storage read failure.
    fn siblings(&self, depth: Depth, index: u64) -> Result<Vec<Digest<H>>, Self::Error> {
        // Sized up front: collecting through `Result` would grow the vector four times.
        let mut siblings = Vec::with_capacity(usize::from(depth.get()));
        for addr in NodeAddr::proof_path(depth, index) {
            siblings.push(self.node(addr)?);
        }
        Ok(siblings)
    }

    /// Record `key`'s value, if set ([`UpdateBatch::put_record`](crate::UpdateBatch::put_record)).
    ///
    /// # Errors
    /// A storage read failure.
    fn record(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;

    /// The deleted leaves, in increasing order.
    ///
    /// # Errors
    /// A storage read failure.
    fn deleted_leaves(&self) -> Result<Vec<u64>, Self::Error>;

    /// For `apply`, which holds the tree exclusively: a view that writes nodes in place,
    /// recording each node's value before its first overwrite into frame `record_into`; the
    /// rest of the apply is then a [`Change`] without nodes. Memory stores offer one, which
    /// saves the overlay's copy of every node a large batch writes; a key-value store keeps
    /// the default `None`, so that `apply` is `prepare` and `publish`: one atomic commit.
    fn write_in_place(&mut self, record_into: Option<u64>) -> Option<InPlace<'_, H, Self::Error>> {
        let _ = record_into;
        None
    }

    /// Prepares `change` for [`commit`](Self::commit) without writing: encodes it and reads what
    /// its undo records need. `reader` is the one the change's nodes were computed through.
    ///
    /// # Errors
    /// A storage read failure.
    fn stage(
        &self,
        reader: Self::Reader<'_>,
        change: Change<H>,
    ) -> Result<Self::Staged, Self::Error>;

    /// Writes a staged change as one unit.
    ///
    /// # Errors
    /// A storage write failure (nothing of the change is visible).
    fn commit(&mut self, staged: Self::Staged) -> Result<(), Self::Error>;

    /// Node `addr` as recorded in `frame`, if the frame holds it.
    ///
    /// # Errors
    /// A storage read failure, or a record that does not decode.
    fn recorded_node(
        &self,
        frame: FrameRef,
        addr: NodeAddr,
    ) -> Result<Option<Digest<H>>, Self::Error>;

    /// Adds every record of `frame` to `out`, keeping what is already there (frames are read
    /// oldest first, so each entry keeps its value at the checkpoint rewound to).
    ///
    /// # Errors
    /// A storage read failure, or a record that does not decode.
    fn frame_records(&self, frame: FrameRef, out: &mut Self::Restore) -> Result<(), Self::Error>;

    /// Commits a rewind to `to` as one unit: writes `restore` back, stores `to`'s `next_index`
    /// and metadata, empties the frames `consumed` (`to`'s and every later one) and drops the
    /// later checkpoints. Checks that the root is then `to`'s.
    ///
    /// # Errors
    /// A storage error (nothing changed), or a root that differs from the checkpoint's.
    fn commit_rewind(
        &mut self,
        restore: Self::Restore,
        to: &CheckpointInfo<Digest<H>>,
        consumed: &[u64],
    ) -> Result<(), Self::Error>;
}
