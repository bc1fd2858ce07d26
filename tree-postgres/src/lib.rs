//! PostgreSQL as a store of Canopy's persistent tree, for deployments of more than one machine:
//! several trees in one database, each its own namespace; one block = one transaction; one
//! writer per tree, fenced.
//!
//! This crate is the store only: [`PgStore`] and its typed [`PgConfig`]. The tree — rules,
//! rehash, history, the commit protocol and the bytes — is tree-core's
//! [`PersistentTree`](tree_core::persistent::PersistentTree), as on sled and redb; the
//! `canopy_entries` table holds the same keys and values those engines hold.
//!
//! **Tables** (`schema`, version [`SCHEMA_VERSION`], created by the first writer):
//! `canopy_trees` (one row per tree: name, term, commit count, leader, last commit time) and
//! `canopy_entries` (tree, key, value). A database whose schema has another version is
//! [`PgError::SchemaVersion`].
//!
//! **One writer, fenced.** A [`Role::Writer`] takes the tree's advisory lock (a standby with
//! [`LockWait::Wait`] waits for it) and advances the tree's term. Every commit checks, in its own
//! transaction, that the term is still its own and that the stored commit count is the one its
//! state is at, and advances the count; a writer whose term was superseded gets
//! [`PgError::Fenced`] and commits nothing more. A writer's session carries a lease
//! (`idle_session_timeout`), kept alive by a heartbeat thread: a writer that is stopped or cut
//! off loses its session, so its lock passes to a standby, and it cannot commit after its
//! successor.
//!
//! **Faults are transient.** A lost connection (a Postgres restart or failover) is retried for
//! [`PgConfig::reconnect_ms`]; a writer then re-takes its lock and checks its term. A commit
//! whose connection broke after COMMIT was sent is recognised by the commit count, so it is
//! neither lost nor applied twice.
//!
//! **Replicas.** A [`PgReplica`] copies the tree at one commit, then reads only the rows written
//! since. Every commit notifies [`NOTIFY_CHANNEL`] with the tree's name; a [`CommitListener`]
//! wakes the replica on it, and where LISTEN is refused (a hot standby) the replica polls.
//!
//! ```no_run
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::{Depth, History, MerkleTree, UpdateBatch};
//! use tree_postgres::{PgConfig, PgMerkleTree};
//!
//! let config = PgConfig::new("postgres://canopy@127.0.0.1:5432/postgres", "waku-sepolia");
//! let mut tree = PgMerkleTree::<PoseidonHasher>::open(&config, Depth::new(20)?)?;
//! let mut block = UpdateBatch::new();
//! block.set_range(0, [Fr::from(1u64), Fr::from(2u64)]);
//! tree.apply_checkpointed(block, 17)?; // leaves, nodes and checkpoint: one transaction
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod error;
mod listen;
mod replica;
mod schema;
mod store;

pub use config::{LockWait, PgConfig, Role};
pub use error::PgError;
pub use listen::CommitListener;
pub use replica::{Catchup, Observed, PgReplica};
pub use schema::{NOTIFY_CHANNEL, SCHEMA_VERSION};
pub use store::{redact_url, PgStore};

/// The persistent tree on Postgres.
pub type PgMerkleTree<H, S = PgStore> = tree_core::persistent::PersistentTree<H, S>;

/// The persistent tree's error with the Postgres store's error.
pub type PgTreeError = tree_core::persistent::PersistentTreeError<PgError>;
