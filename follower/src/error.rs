//! The follower's error type.

use alloy::primitives::{Address, B256};

/// Why following failed. [`FollowError::is_transient`] tells a caller's loop which ones to retry;
/// every other one means the data cannot be right or the database is not this follower's, and
/// nothing from the offending block was applied.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FollowError {
    /// Every provider kept failing (down, timeouts, HTTP 5xx or 429, malformed responses)
    /// through every retry, or the providers did not reach a quorum.
    #[error("{method}: no usable answer from {providers} after {attempts} attempts, last: {message}; check that the node is up and reachable (a follower keeps retrying)")]
    Unavailable {
        /// The JSON-RPC method.
        method: &'static str,
        /// The providers asked.
        providers: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        message: String,
    },
    /// A provider answered with an error that retrying cannot fix: a parse error, an invalid
    /// request or params, a method it lacks, a revert of a view that cannot revert.
    #[error("{method}: {provider} refused: {message}; this node cannot serve the follower as asked (is the contract address right? does the node support this call?): use another node or provider")]
    Refused {
        /// The JSON-RPC method.
        method: &'static str,
        /// The provider that refused.
        provider: String,
        /// The node's message.
        message: String,
    },
    /// The chain moved while a block was being read (its logs and header disagree, or a view at
    /// its hash is no longer available): the next step checks for a reorg and reads again.
    #[error("block {block} changed while it was read (reorg in progress)")]
    ReorgInProgress {
        /// The block.
        block: u64,
    },
    /// With several providers: the logs or leaves one provider served give another root than
    /// the one the quorum agreed on; that provider is reported and the block is read again from
    /// another.
    #[error("block {block}: a provider's data disagrees with the agreed root; reading it again from another provider")]
    Disputed {
        /// The block.
        block: u64,
    },
    /// A log or a view answer that cannot be right: wrong topics or data length, an index past
    /// capacity or leaving a gap, a non-canonical field element, an erasure result that is
    /// neither 0 nor the previous leaf.
    #[error("block {block}: {reason}")]
    BadData {
        /// The block the data belongs to.
        block: u64,
        /// What is wrong.
        reason: String,
    },
    /// After applying a block, the tree's root is not the contract's `root()` at that block.
    #[error("block {block}: our root {ours} differs from the contract's root() {contract}; nothing from this block was applied")]
    RootMismatch {
        /// The block.
        block: u64,
        /// Our root, 0x hex.
        ours: String,
        /// The contract's, 0x hex.
        contract: String,
    },
    /// A block's parent hash is not the hash stored for the block before it, though the node
    /// still reports that stored hash: the node's answers do not form a chain.
    #[error("block {block} does not chain: its parent hash {parent} is not {stored}, the stored hash of block {}", block - 1)]
    BrokenChain {
        /// The block.
        block: u64,
        /// Its parent hash.
        parent: B256,
        /// The hash stored for the block before.
        stored: B256,
    },
    /// The chain reorganised below the oldest retained checkpoint.
    #[error("reorg deeper than the checkpoint window: block {stored_block} is no longer on the chain and no retained checkpoint (oldest: block {oldest_checkpoint:?}) is; resync into a new database or import a snapshot")]
    ReorgTooDeep {
        /// The last block applied.
        stored_block: u64,
        /// The oldest checkpoint still retained.
        oldest_checkpoint: Option<u64>,
    },
    /// The database follows another chain.
    #[error("the database follows chain {stored}, the node serves chain {node}")]
    WrongChain {
        /// Chain id stored.
        stored: u64,
        /// Chain id of the node.
        node: u64,
    },
    /// The database follows another contract.
    #[error("the database follows contract {stored}, asked to follow {requested}")]
    WrongContract {
        /// Contract stored.
        stored: Address,
        /// Contract asked for.
        requested: Address,
    },
    /// The database holds a tree of another depth than the contract's.
    #[error(
        "the database holds a tree of depth {stored}, the contract's tree has depth {contract}"
    )]
    WrongDepth {
        /// Depth stored.
        stored: u8,
        /// Depth of the contract profile.
        contract: u8,
    },
    /// The database holds members but was not written by a follower (e.g. `canopy apply`).
    #[error("the database holds {members} members but no chain position: it was not made by a follower; follow into a new database")]
    NotAFollowerDatabase {
        /// Members held.
        members: u64,
    },
    /// Settings that cannot work: no provider, a quorum larger than the providers, providers of
    /// different chains.
    #[error("{0}")]
    Config(String),
    /// Stored follower metadata cannot be decoded.
    #[error("stored block metadata is damaged: {0}")]
    BadMetadata(String),
    /// The tree or its store failed or refused.
    #[error(transparent)]
    Tree(#[from] tree_engines::DbTreeError),
    /// A background task died (a bug; reported rather than panicking the caller).
    #[error("internal: {0}")]
    Internal(String),
}

impl FollowError {
    /// Whether retrying later may succeed: the node was unavailable or the chain moved mid-read.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unavailable { .. } | Self::ReorgInProgress { .. } | Self::Disputed { .. }
        )
    }
}
