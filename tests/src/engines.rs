//! The persistent engines under test, so a suite is written once and run on each.

use std::path::Path;

use tree_core::persistent::{Durability, OpenStore, PersistentTree};
use tree_core::Depth;
use tree_redb::{RedbConfig, RedbStore};
use tree_sled::{SledConfig, SledStore};

/// An engine a suite runs on: its name (for reports and child processes) and its durable
/// configuration (fsync per commit).
pub trait TestEngine: OpenStore<Error: std::fmt::Debug> + 'static {
    /// `sled` or `redb`.
    const NAME: &'static str;

    /// The configuration of a database in `dir` that is durable at every commit.
    fn durable(dir: &Path) -> Self::Config;

    /// The reliability-report suite for `name` on this engine: sled keeps the suites' original
    /// names, another engine gets its own (`redb_kill9`), counted on its own.
    #[must_use]
    fn report_suite(name: &str) -> String {
        if Self::NAME == "sled" {
            name.to_owned()
        } else {
            format!("{}_{name}", Self::NAME)
        }
    }

    /// Opens the tree in `dir` at `depth`, durable at every commit.
    ///
    /// # Errors
    /// The engine's open error.
    fn open_tree<H: hasher::DigestCodec>(
        dir: &Path,
        depth: Depth,
    ) -> Result<PersistentTree<H, Self>, tree_core::persistent::StoreTreeError<Self>> {
        PersistentTree::open(&Self::durable(dir), depth)
    }
}

impl TestEngine for SledStore {
    const NAME: &'static str = "sled";

    fn durable(dir: &Path) -> SledConfig {
        SledConfig::new(dir).durability(Durability::EveryCommit)
    }
}

impl TestEngine for RedbStore {
    const NAME: &'static str = "redb";

    fn durable(dir: &Path) -> RedbConfig {
        RedbConfig::new(dir).durability(Durability::EveryCommit)
    }
}
