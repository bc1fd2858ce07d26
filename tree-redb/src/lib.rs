//! redb as a store of Canopy's persistent tree, for services that want a maintained storage
//! engine (sled 0.34 has had no release since 2021).
//!
//! This crate is the redb store only: [`RedbStore`] (one redb write transaction per commit, in
//! one table, under the directory lock) and its typed [`RedbConfig`]. The tree — rules, rehash,
//! history, the commit protocol and the bytes — is tree-core's
//! [`PersistentTree`](tree_core::persistent::PersistentTree), the same engine `tree-sled` stores
//! with sled, so both engines hold the same keys and values.
//!
//! A database is a directory holding [`DATABASE_FILE`] and Canopy's lock file. Durability:
//! [`Durability::EveryCommit`] commits with redb's `Durability::Immediate` (fsync before
//! `apply` returns); [`Durability::Periodic`] commits with `Durability::None` and makes the first
//! commit after each interval (and every `flush`, `close` and drop) durable. redb recovers to the
//! last durable commit after a crash, so each lost batch is lost whole.
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::{Depth, History, MerkleTree, MerkleTreeExt, UpdateBatch};
//! use tree_redb::{RedbConfig, RedbMerkleTree};
//!
//! let dir = tempfile::tempdir()?;
//! let depth = Depth::new(20)?;
//! let root = {
//!     let mut tree = RedbMerkleTree::<PoseidonHasher>::open(&RedbConfig::new(dir.path()), depth)?;
//!     let mut block = UpdateBatch::new();
//!     block.set_range(0, (1..=4u64).map(Fr::from)).delete(2);
//!     tree.apply_checkpointed(block, 17)?; // members and checkpoint: one write transaction
//!     tree.close()?;
//!     tree.root()
//! };
//! let tree = RedbMerkleTree::<PoseidonHasher>::open_existing(&RedbConfig::new(dir.path()))?;
//! assert_eq!((tree.root(), tree.empty_leaves_indices()?), (root, vec![2]));
//! assert_eq!(tree.checkpoints()?.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod store;

pub use config::RedbConfig;
pub use store::{is_redb_database, RedbStore, DATABASE_FILE};
pub use tree_core::persistent::Durability;

/// The persistent tree on redb.
pub type RedbMerkleTree<H, S = RedbStore> = tree_core::persistent::PersistentTree<H, S>;

/// The persistent tree's error with redb's error as the store error.
pub type RedbTreeError = tree_core::persistent::PersistentTreeError<redb::Error>;

/// A [`RedbMerkleTree`] shared by one writer and many readers.
pub type SharedRedbTree<H> = tree_core::persistent::SharedTree<H, RedbStore>;
