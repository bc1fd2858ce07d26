//! A read replica's side: the tree's every entry copied into memory at one commit, then brought
//! forward by reading only the rows written since (removals are tombstones until purged).

use futures::executor::block_on;
use tokio_postgres::IsolationLevel;
use tree_core::persistent::StoreBatch;

use crate::config::{PgConfig, Role};
use crate::schema;
use crate::{PgError, PgStore};

/// A tree's copy on a replica, at one commit of the database.
#[derive(Debug)]
pub struct PgReplica {
    store: PgStore,
    at: i64,
}

/// What one look at the database found.
#[derive(Debug)]
pub enum Catchup {
    /// The copy is at the stored commit.
    Current,
    /// The rows written since the copy's commit, as a batch for the copy (removals included).
    Changes(StoreBatch),
    /// Every entry of the tree: the copy was behind the tombstones' horizon (or empty).
    Reload(Vec<(Vec<u8>, Vec<u8>)>),
}

/// One look at the database: what changed, and where the tree is.
#[derive(Debug)]
pub struct Observed {
    /// What to do to the copy.
    pub catchup: Catchup,
    /// The commit count the copy is at once `catchup` is applied.
    pub commits: i64,
    /// Commits the copy was behind before this look.
    pub behind: i64,
    /// Seconds since the tree's last commit, by the database's clock.
    pub last_commit_age: f64,
}

impl PgReplica {
    /// Connects as a reader (the tree must exist); the copy starts empty, at commit 0, so the
    /// first [`observe`](Self::observe) reloads the whole tree.
    ///
    /// # Errors
    /// As [`PgStore::open`] for a reader.
    pub fn connect(config: &PgConfig) -> Result<Self, PgError> {
        let store = PgStore::open(&config.clone().role(Role::Reader))?;
        Ok(Self { store, at: -1 })
    }

    /// The commit count the copy is at (-1 before the first look).
    #[must_use]
    pub fn commits(&self) -> i64 {
        self.at
    }

    /// Reads, in one repeatable-read transaction, what the copy needs to reach the tree's last
    /// commit, and advances the copy's commit to it: the caller applies `catchup` to its copy
    /// before the next look.
    ///
    /// # Errors
    /// Postgres errors (a lost connection is retried as everywhere in the store).
    pub fn observe(&mut self) -> Result<Observed, PgError> {
        let (id, at) = (self.store.inner.tree_id, self.at);
        let observed = self.store.inner.call(|s| {
            block_on(async {
                let tx = s
                    .client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .await?;
                let row = tx.query_one(schema::REPLICA_STATE, &[&id]).await?;
                let (commits, purged_below, age): (i64, i64, f64) =
                    (row.get(0), row.get(1), row.get(2));
                let catchup = if commits == at {
                    Catchup::Current
                } else if at < 0 || at < purged_below || commits < at {
                    let rows = tx.query(schema::ALL_ENTRIES, &[&id]).await?;
                    Catchup::Reload(rows.into_iter().map(|r| (r.get(0), r.get(1))).collect())
                } else {
                    let rows = tx.query(schema::CHANGED_SINCE, &[&id, &at]).await?;
                    let mut batch = StoreBatch::default();
                    for row in rows {
                        let key: &[u8] = row.get(0);
                        match row.get::<_, Option<Vec<u8>>>(1) {
                            Some(value) => batch.insert(key, value),
                            None => batch.remove(key),
                        }
                    }
                    Catchup::Changes(batch)
                };
                tx.commit().await?;
                Ok(Observed {
                    catchup,
                    commits,
                    behind: commits - at.max(0),
                    last_commit_age: age,
                })
            })
        })?;
        self.at = observed.commits;
        Ok(observed)
    }
}
