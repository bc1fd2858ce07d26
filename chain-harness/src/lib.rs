//! A real local Ethereum node for Canopy's chain tests and benchmarks: hardhat's node from npm
//! (installed by `install.sh`), on a loopback port the harness picks, stopped on drop, with the
//! test membership contract (`contracts/TestMembership.sol`: zk-kit's LazyIMT and
//! poseidon-solidity's PoseidonT3, as WakuRlnV2 uses them) compiled by solc-js and deployed.
//!
//! ```no_run
//! # async fn example() -> Result<(), chain_harness::HarnessError> {
//! let chain = chain_harness::LocalChain::start().await?;
//! let contract = chain.deploy_membership(false).await?;
//! chain.set_automine(false).await?;
//! let id = alloy::primitives::U256::from(7u64);
//! chain.send(contract, chain_harness::calls::register(id, 1)).await?;
//! let block = chain.mine().await?;
//! # Ok(()) }
//! ```

pub mod calls;
mod node;
pub mod workload;

pub use node::{HarnessError, LocalChain, NodeKind};
