//! The persistent engines under test, so a suite is written once and run on each.

use std::path::Path;

use tree_core::persistent::{Durability, OpenStore, PersistentTree};
use tree_core::Depth;
use tree_postgres::{LockWait, PgConfig, PgStore};
use tree_redb::{RedbConfig, RedbStore};
use tree_sled::{SledConfig, SledStore};

/// An engine a suite runs on: its name (for reports and child processes) and its durable
/// configuration (fsync per commit).
pub trait TestEngine: OpenStore<Error: std::fmt::Debug> + 'static {
    /// `sled`, `redb` or `postgres`.
    const NAME: &'static str;

    /// What must run while a suite uses the engine (a Postgres cluster; nothing for the
    /// embedded engines): the suite holds it, so it is stopped when the suite ends or fails.
    type Env;

    /// Starts what the engine needs.
    fn start_env() -> Self::Env;

    /// Makes directory `dir` name a fresh database of this engine under `env` (the child
    /// processes of the crash suites get only the directory).
    fn prepare_dir(_env: &Self::Env, _dir: &Path) {}

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
    type Env = ();

    fn start_env() {}

    fn durable(dir: &Path) -> SledConfig {
        SledConfig::new(dir).durability(Durability::EveryCommit)
    }
}

impl TestEngine for RedbStore {
    const NAME: &'static str = "redb";
    type Env = ();

    fn start_env() {}

    fn durable(dir: &Path) -> RedbConfig {
        RedbConfig::new(dir).durability(Durability::EveryCommit)
    }
}

/// The file in a test directory that names the Postgres database (the tree is named after the
/// directory, so every directory is its own tree in the suite's one cluster).
pub const PG_URL_FILE: &str = "pg-url";

impl TestEngine for PgStore {
    const NAME: &'static str = "postgres";
    type Env = pg_harness::PgCluster;

    fn start_env() -> pg_harness::PgCluster {
        pg_harness::PgCluster::start().expect("a throw-away Postgres cluster")
    }

    fn prepare_dir(env: &pg_harness::PgCluster, dir: &Path) {
        std::fs::write(dir.join(PG_URL_FILE), env.url()).expect("write the cluster's URL");
    }

    /// Tree `t<dir name>` in the database `dir/pg-url` names; a killed writer's session may
    /// take the server a moment to notice, so the lock is waited for.
    fn durable(dir: &Path) -> PgConfig {
        let url = std::fs::read_to_string(dir.join(PG_URL_FILE)).expect("the cluster's URL");
        let name: String = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        PgConfig::new(url.trim(), format!("t{name}")).lock_wait(LockWait::Wait)
    }
}
