//! Typed configuration of the Postgres store.

use std::time::Duration;

use tree_core::persistent::NodeCache;

/// What a handle may do with its tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Role {
    /// The tree's one writer: holds the tree's advisory lock and a term, and every commit is
    /// fenced by that term.
    #[default]
    Writer,
    /// Reads only (a replica): takes no lock, and a commit is refused.
    Reader,
}

/// What a writer does when another writer holds the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum LockWait {
    /// Fail at once with [`PgError::Locked`](crate::PgError::Locked).
    #[default]
    Fail,
    /// Wait until the holder's session ends (a standby), polling every 100 ms.
    Wait,
}

/// Which tree in which PostgreSQL database, and how to hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct PgConfig {
    /// A libpq-style connection string, `postgres://user@host:port/database`.
    pub url: String,
    /// The tree's name: each name is its own namespace in the database.
    pub tree: String,
    /// Writer or reader.
    pub role: Role,
    /// What a writer does when another holds the tree.
    pub lock_wait: LockWait,
    /// A writer's lease in milliseconds: its session is ended by the server (and its lock
    /// released to a standby) once it has sent nothing for this long, so a stalled writer
    /// cannot hold the tree; a live one sends a heartbeat every third of it.
    pub lease_ms: u64,
    /// How long a lost connection is retried (a Postgres restart or failover) before the
    /// operation fails, in milliseconds.
    pub reconnect_ms: u64,
    /// How many levels below the root the tree caches in memory.
    pub cached_levels: u8,
    /// Also keep in memory every band of levels that uses at most this many node chunks
    /// ([`NodeCache`]); 0 turns it off.
    pub cached_band_chunks: u32,
}

impl Default for PgConfig {
    fn default() -> Self {
        Self {
            url: "postgres://localhost/postgres".to_owned(),
            tree: "default".to_owned(),
            role: Role::Writer,
            lock_wait: LockWait::Fail,
            lease_ms: 5_000,
            reconnect_ms: 30_000,
            cached_levels: NodeCache::default().top_levels,
            cached_band_chunks: NodeCache::default().band_chunks,
        }
    }
}

impl PgConfig {
    /// Tree `tree` in the database at `url`, as its writer.
    #[must_use]
    pub fn new(url: impl Into<String>, tree: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            tree: tree.into(),
            ..Self::default()
        }
    }

    /// Sets the role.
    #[must_use]
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// Sets what a writer does when the tree is held.
    #[must_use]
    pub fn lock_wait(mut self, wait: LockWait) -> Self {
        self.lock_wait = wait;
        self
    }

    /// Sets the writer's lease.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Sets how long a lost connection is retried.
    #[must_use]
    pub fn reconnect_for(mut self, time: Duration) -> Self {
        self.reconnect_ms = u64::try_from(time.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Sets how many top levels the tree caches.
    #[must_use]
    pub fn cached_levels(mut self, levels: u8) -> Self {
        self.cached_levels = levels;
        self
    }

    /// Sets the chunk budget of a cached band of levels (0: only the top levels).
    #[must_use]
    pub fn cached_band_chunks(mut self, chunks: u32) -> Self {
        self.cached_band_chunks = chunks;
        self
    }

    pub(crate) fn lease_duration(&self) -> Duration {
        Duration::from_millis(self.lease_ms.max(300))
    }

    pub(crate) fn reconnect_duration(&self) -> Duration {
        Duration::from_millis(self.reconnect_ms)
    }
}
