//! sled as a store of Canopy's persistent tree: for RLN membership sets and embedded services
//! that run what zerokit runs.
//!
//! This crate is the sled store only — [`SledStore`] (one `sled::Batch` per commit, the
//! directory lock, the release wait on drop) and its typed [`SledConfig`]. The tree itself
//! (rules, rehash, history, the commit protocol) is tree-core's [engine](tree_core::engine) over
//! its key-value [`PersistentTree`](tree_core::persistent::PersistentTree) store, the same one
//! `tree-redb` puts on redb; the bytes are tree-core's [`layout`](tree_core::persistent::layout).
//!
//! - Every `apply` is atomic, crash or not; durability follows [`Durability`].
//! - Opening reads the header, counters and root only: O(1) in the number of leaves.
//! - Another depth, another hasher, an unknown format, corrupt bytes or a locked path are typed
//!   [`SledTreeError`]s at once; a load error never silently creates a fresh tree.
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
mod store;

pub use config::{Mode, SledConfig};
pub use store::SledStore;
pub use tree_core::engine::PreparedApply;
pub use tree_core::persistent::{
    Durability, IntegrityIssue, KvStore, MemStore, StoreBatch, StoreTreeError, LOCK_FILE,
};

/// The persistent tree on sled (any [`KvStore`] as `S`, sled by default).
pub type SledMerkleTree<H, S = SledStore> = tree_core::persistent::PersistentTree<H, S>;

/// The persistent tree's error, with sled's error as the default store error.
pub type SledTreeError<E = sled::Error> = tree_core::persistent::PersistentTreeError<E>;

/// A [`SledMerkleTree`] shared by one writer and many readers.
pub type SharedTree<H, S = SledStore> = tree_core::persistent::SharedTree<H, S>;
