//! A persistent Merkle tree on sled, for RLN membership sets and embedded services.
//!
//! ```text
//!  MerkleTree::apply(UpdateBatch)            (tree-core: validate once, rehash once)
//!        │
//!  SledMerkleTree ── overlay of changed nodes ──► one StoreBatch ──► one sled::Batch
//!        │                                        (nodes + next_index + deleted + metadata)
//!  NodeStore (SledStore | MemStore | test fakes)
//! ```
//!
//! - Every `apply` is atomic, crash or not; durability follows [`Durability`].
//! - Opening reads the header, counters and root only: O(1) in the number of leaves.
//! - Another depth, another hasher, an unknown format, corrupt bytes or a locked path are typed
//!   [`SledTreeError`]s at once; a load error never silently creates a fresh tree.
//! - The on-disk layout is documented in [`keys`].
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::{Depth, MerkleTree, MerkleTreeExt, UpdateBatch};
//! use tree_sled::{Durability, SledConfig, SledMerkleTree};
//!
//! let config = SledConfig::temporary().durability(Durability::EveryCommit);
//! let mut tree = SledMerkleTree::<PoseidonHasher>::open(&config, Depth::new(20)?)?;
//! let mut block = UpdateBatch::new();
//! block.set_range(0, (1..=4u64).map(Fr::from)).delete(2);
//! tree.apply_with_metadata(block, 17u64.to_be_bytes().to_vec())?; // members + block number, atomically
//! assert_eq!(tree.empty_leaves_indices()?, vec![2]);
//! assert!(tree.verify_integrity()?.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod error;
pub mod keys;
mod shared;
mod store;
mod tree;

pub use config::{Durability, Mode, SledConfig};
pub use error::SledTreeError;
pub use shared::SharedTree;
pub use store::{MemStore, NodeStore, SledStore, StoreBatch, LOCK_FILE};
pub use tree::{IntegrityIssue, PreparedApply, SledMerkleTree, StoreTreeError};
