//! How a follower is configured: the typed settings (`[follower]` in Canopy's config file), each
//! with the default an operator gets without one.

use serde::{Deserialize, Serialize};

use crate::profile::ContractProfile;
use crate::rpc::RetryConfig;

/// How an empty database is first filled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Read the contract's leaves at a recent block (paged views), build the tree in one batch,
    /// check the root, then follow events from the next block.
    #[default]
    State,
    /// Replay every event from the deployment block (or `from_block`); needs an archive node for
    /// the root checks at old blocks.
    Replay,
}

/// When the tree's root is compared with the contract's `root()`. The last block of every
/// `eth_getLogs` range is always checked, events or not: that check is what ties a range's
/// logs to the chain the block is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootCheck {
    /// After every block with events (one `eth_call` each) and the last block of each range,
    /// before it is committed.
    #[default]
    EveryBlock,
    /// After the last block of each `eth_getLogs` range only.
    EveryRange,
}

/// Adaptive `eth_getLogs` block ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogRangeConfig {
    /// Blocks in the first request.
    pub initial: u64,
    /// Never fewer (a node that refuses one block's logs is an error).
    pub min: u64,
    /// Never more.
    pub max: u64,
    /// Grow (double) the range while a response holds fewer logs than this.
    pub grow_below_logs: usize,
}

impl Default for LogRangeConfig {
    fn default() -> Self {
        Self {
            initial: 1_000,
            min: 1,
            max: 10_000,
            grow_below_logs: 2_000,
        }
    }
}

/// Everything a follower needs besides the node and the tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FollowerConfig {
    /// The contract's events and leaf rule.
    pub profile: ContractProfile,
    /// How an empty database is filled.
    pub sync: SyncMode,
    /// Replay from this block instead of `deployedBlockNumber()`; state sync pins this block
    /// instead of the head (less confirmations).
    pub from_block: Option<u64>,
    /// Stay this many blocks behind the head.
    pub confirmations: u64,
    /// `eth_getLogs` ranges.
    pub log_ranges: LogRangeConfig,
    /// Leaves per `getRateCommitmentsInRangeBoundsInclusive` call in state sync (halved on
    /// failure).
    pub state_page: u32,
    /// When roots are checked against the contract.
    pub root_check: RootCheck,
    /// Retries of each call.
    pub retry: RetryConfig,
    /// Wait between polls once caught up, in milliseconds.
    pub poll_interval_ms: u64,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        Self {
            profile: ContractProfile::default(),
            sync: SyncMode::State,
            from_block: None,
            confirmations: 0,
            log_ranges: LogRangeConfig::default(),
            state_page: 2_048,
            root_check: RootCheck::EveryBlock,
            retry: RetryConfig::default(),
            poll_interval_ms: 2_000,
        }
    }
}
