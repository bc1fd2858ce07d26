//! Follows an RLN membership contract (WakuRlnV2's interface: a zk-kit LazyIMT of Poseidon rate
//! commitments) on an Ethereum node and mirrors its tree in a Canopy store, block by block.
//!
//! - Each block lands with its checkpoint and metadata (number, hash, chain id, contract) in one
//!   atomic commit ([`commit_block`]), after its root is compared with the contract's `root()`.
//! - An empty database is filled by *state sync* (the contract's leaves at a pinned block, one
//!   batch) or by *event replay* from the deployment block ([`SyncMode`]).
//! - The newest contract's root history ([`roots`]): where it stores a root per call
//!   (`RootStored`), each call's root is checked in the block's commit (no `eth_call`) and the
//!   last [`HISTORY_SIZE`] roots land in the block's metadata, as `getRecentRoots()` serves them.
//! - Members by id ([`members`]): `idCommitment → (rate limit, index)` from the registration and
//!   erasure events, kept as tree records in each block's commit (rewound with it); built from
//!   the logs since deployment after a state sync.
//! - Reorgs: the stored hash of the last block is compared with the node's; on a mismatch the
//!   tree rewinds to the newest checkpoint still on the chain.
//! - RPC failures are retried with capped exponential backoff and jitter; data that cannot be
//!   right is a typed [`FollowError`] and nothing from its block is applied.
//!
//! ```no_run
//! use std::sync::Arc;
//! use follower::{ChainClient, Follower, FollowerConfig};
//! use tree_core::Depth;
//! use tree_engines::{DbConfig, DbTree, SharedDbTree};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let tree = DbTree::open(&DbConfig::new("membership-db"), Depth::new(20)?)?; // sled or redb
//! let tree = Arc::new(SharedDbTree::new(tree));
//! let contract = "0x5FbDB2315678afecb367f032d93F642f64180aa3".parse()?;
//! let client = ChainClient::new("http://127.0.0.1:8545".parse()?, contract, Default::default())?;
//! let mut follower = Follower::new(client, FollowerConfig::default(), tree.clone())?;
//! let outcome = follower.sync_to_head().await?; // state sync, then events up to the head
//! println!("at block {}, root {:?}", outcome.block, tree.read(|t| tree_core::MerkleTree::root(t)));
//! # Ok(()) }
//! ```

mod backoff;
pub mod block;
mod calls;
mod changes;
mod commit;
mod config;
mod error;
mod follower;
pub mod members;
pub mod metrics;
pub mod profile;
pub mod roots;
pub mod rpc;

pub use backoff::Backoff;
pub use block::{last_block, read_block, BlockMeta, ChainBinding};
pub use changes::{BlockChanges, LeafChange};
pub use commit::{commit_block, CommitError};
pub use config::{FollowerConfig, LogRangeConfig, RootCheck, SyncMode};
pub use error::FollowError;
pub use follower::{
    contract_root, followed_contract, FollowStats, FollowedTree, Follower, StepOutcome,
};
pub use members::{member, member_key, membership_info, MemberInfo};
pub use profile::{ContractProfile, LeafRule, MembershipEvent};
pub use roots::{RootAtError, RootHistory, HISTORY_SIZE};
pub use rpc::{
    BlockRef, ChainClient, ErrorAnswer, ForwardPolicy, ProviderHealth, RetryConfig, RpcCounters,
};
