//! The error type of every in-memory tree, and the one rule set every backend reports.

/// Why a tree refused an operation. Every variant carries the values that made it fail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// The depth is 0 or larger than the tree supports.
    #[error("depth {depth} is outside 1..={max}")]
    InvalidDepth {
        /// The requested depth.
        depth: u64,
        /// The largest depth this tree supports.
        max: u8,
    },
    /// Proof bytes or parts that do not describe a proof (see [`MerkleProof::from_bytes`]).
    ///
    /// [`MerkleProof::from_bytes`]: crate::MerkleProof::from_bytes
    #[error("malformed proof: {reason}")]
    MalformedProof {
        /// What is wrong.
        reason: &'static str,
    },
    /// A leaf index at or past capacity.
    #[error("leaf {index} out of bounds (capacity {capacity})")]
    IndexOutOfBounds {
        /// The index.
        index: u64,
        /// `2^depth`.
        capacity: u64,
    },
    /// A contiguous write that ends past capacity.
    #[error("range {start}..{end} exceeds capacity {capacity}")]
    RangeOutOfBounds {
        /// First index written.
        start: u64,
        /// One past the last index written.
        end: u64,
        /// `2^depth`.
        capacity: u64,
    },
    /// `start + len` does not fit in a `u64`.
    #[error("range starting at {start} with {len} leaves overflows u64")]
    RangeOverflow {
        /// First index written.
        start: u64,
        /// Number of leaves.
        len: u64,
    },
    /// A delete (or override removal) of an index that was never set.
    #[error("cannot delete unset leaf {index} (next_index {next_index})")]
    DeleteUnset {
        /// The index.
        index: u64,
        /// The tree's `next_index` when the batch was applied.
        next_index: u64,
    },
    /// `override_range` with no leaves to write and no indices to remove.
    #[error("override_range called with no leaves and no removals")]
    EmptyOverride,
    /// A record key that is empty or longer than [`MAX_RECORD_KEY`](crate::MAX_RECORD_KEY).
    #[error("record key of {len} bytes (1 to {} allowed)", crate::MAX_RECORD_KEY)]
    RecordKey {
        /// The key's length.
        len: usize,
    },
    /// `update_next` on a tree whose `next_index` reached capacity.
    #[error("tree is full (capacity {capacity})")]
    TreeFull {
        /// `2^depth`.
        capacity: u64,
    },
    /// A level above the root.
    #[error("level {level} is above the root (depth {depth})")]
    LevelOutOfBounds {
        /// The level.
        level: u8,
        /// The tree's depth.
        depth: u8,
    },
    /// A node index past its level's width.
    #[error("node {index} out of bounds at level {level} (width {width})")]
    NodeOutOfBounds {
        /// The level.
        level: u8,
        /// The index.
        index: u64,
        /// Number of nodes at that level.
        width: u64,
    },
    /// The dense tree could not reserve its node storage (a typed error, never an abort).
    #[error("cannot allocate {bytes} bytes for a dense tree of depth {depth}")]
    AllocationFailed {
        /// The requested depth.
        depth: u8,
        /// Bytes the node storage would need (saturated at `u64::MAX`).
        bytes: u64,
    },
    /// A checkpoint id at or below the newest retained one (ids must increase).
    #[error("checkpoint {id} is not above the newest checkpoint {last}")]
    CheckpointNotIncreasing {
        /// The id given.
        id: u64,
        /// The newest retained id.
        last: u64,
    },
    /// A rewind or lookup of a checkpoint that is not retained.
    #[error("checkpoint {id} is not retained (oldest retained: {oldest:?})")]
    UnknownCheckpoint {
        /// The id given.
        id: u64,
        /// The oldest retained id, if any.
        oldest: Option<u64>,
    },
    /// A proof requested against a root outside the window of acceptable roots.
    #[error("root is not in the window of acceptable roots")]
    RootNotInWindow,
    /// A prepared batch was published after the tree had moved on (another apply, a checkpoint
    /// or a rewind in between): the batch is stale and was not applied; the tree is unharmed.
    #[error("the tree changed between prepare and publish: prepare again")]
    Conflict,
    /// A LeanIMT update or removal of a leaf that was never inserted (zk-kit's index check).
    #[error("leaf {index} is not in the LeanIMT (size {size})")]
    LeafNotInserted {
        /// The index.
        index: u64,
        /// The LeanIMT's size.
        size: u64,
    },
    /// A LeanIMT batch insert of no leaves (zk-kit refuses it too).
    #[error("a LeanIMT batch insert needs at least one leaf")]
    EmptyInsert,
    /// A LeanIMT `update_many` with as many indices as leaves it was not given.
    #[error("LeanIMT update_many: {indices} indices for {leaves} leaves")]
    UpdateShape {
        /// Indices given.
        indices: usize,
        /// Leaves given.
        leaves: usize,
    },
    /// A LeanIMT `update_many` naming one index twice (zk-kit refuses it too).
    #[error("LeanIMT update_many names leaf {index} twice")]
    RepeatedIndex {
        /// The index.
        index: u64,
    },
}

/// Lets generic code (tests, adapters) see the [`TreeError`] inside a backend's error type.
pub trait AsTreeError {
    /// The rule violation this error reports, if it is one (not a storage failure).
    fn as_tree_error(&self) -> Option<&TreeError>;
}

impl AsTreeError for TreeError {
    fn as_tree_error(&self) -> Option<&TreeError> {
        Some(self)
    }
}
