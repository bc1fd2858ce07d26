//! Which engine a Canopy database uses, so that tools and daemons open whatever a directory
//! holds: [`Engine`], [`detect`] (from the files in the directory), and [`AnyStore`], one
//! [`KvStore`] over sled, redb or PostgreSQL beneath tree-core's one persistent engine.
//!
//! A new database gets the engine its [`DbConfig`] names (sled by default: what zerokit's users
//! run); an existing one is opened with the engine that made it, and asking for another is a
//! typed [`EngineError::Mismatch`], never a second database beside the first. A database
//! "path" that is a `postgres://` (or `postgresql://`) URL is a PostgreSQL database, and
//! [`DbConfig::tree`] names the tree in it.
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::{Depth, MerkleTree, MerkleTreeExt};
//! use tree_engines::{DbConfig, DbTree, Engine};
//!
//! let dir = tempfile::tempdir()?;
//! let mut tree = DbTree::<PoseidonHasher>::open(&DbConfig::new(dir.path()).engine(Engine::Redb), Depth::new(20)?)?;
//! tree.set(0, Fr::from(7u64))?;
//! drop(tree);
//! let tree = DbTree::<PoseidonHasher>::open_existing(&DbConfig::new(dir.path()))?; // detected
//! assert_eq!((tree.store().engine(), tree.next_index()), (Engine::Redb, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A block of leaves and its checkpoint in one commit, a proof, and a rewind (the README's
//! "embed a tree in Rust"):
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::{Depth, History, MerkleTree, UpdateBatch};
//! use tree_engines::{DbConfig, DbTree};
//!
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("members-db");
//! let mut tree = DbTree::<PoseidonHasher>::open(&DbConfig::new(&path), Depth::new(20)?)?;
//! let mut block = UpdateBatch::new();
//! block.set_range(0, [Fr::from(1u64), Fr::from(2u64)]);
//! tree.apply_checkpointed(block, 1)?; // leaves, nodes and checkpoint 1: one commit
//! let proof = tree.proof(1)?; // the same proof zerokit's trees give
//! assert_eq!(proof.path_elements().len(), 20);
//! let mut next = UpdateBatch::new();
//! next.set(2, Fr::from(3u64));
//! tree.apply_checkpointed(next, 2)?;
//! tree.rewind_to(1)?; // a reorg: back to block 1's state
//! assert_eq!(tree.next_index(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use tree_core::persistent::{
    Durability, KvStore, MemStore, NodeCache, OpenStore, PersistentTree, PersistentTreeError,
    SharedTree, StoreBatch,
};
use tree_core::MerkleTree as _;
use tree_postgres::{
    Catchup, CommitListener, LockWait, PgConfig, PgError, PgReplica, PgStore, Role,
};
use tree_redb::{RedbConfig, RedbStore};
use tree_sled::{SledConfig, SledStore};

/// A storage engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Engine {
    /// sled 0.34.7, what zerokit's users run (the default).
    #[default]
    Sled,
    /// redb 5: maintained, stable file format, ACID transactions.
    Redb,
    /// PostgreSQL (a `postgres://` URL): several trees and machines on one database.
    Postgres,
    /// An in-memory copy of a tree: what a read replica of a PostgreSQL tree serves from.
    Memory,
}

impl Engine {
    /// The engine's name, as `--engine` takes it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Sled => "sled",
            Self::Redb => "redb",
            Self::Postgres => "postgres",
            Self::Memory => "memory",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An engine name that is neither `sled` nor `redb`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown engine {0:?}: expected sled, redb or postgres")]
pub struct UnknownEngine(pub String);

impl std::str::FromStr for Engine {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> Result<Self, UnknownEngine> {
        match s {
            "sled" => Ok(Self::Sled),
            "redb" => Ok(Self::Redb),
            "postgres" => Ok(Self::Postgres),
            other => Err(UnknownEngine(other.to_owned())),
        }
    }
}

/// The engine whose files `dir` holds, if any; a `postgres://` URL is PostgreSQL's.
#[must_use]
pub fn detect(dir: &Path) -> Option<Engine> {
    if postgres_url(dir).is_some() {
        Some(Engine::Postgres)
    } else if tree_redb::is_redb_database(dir) {
        Some(Engine::Redb)
    } else if ["conf", "db"].iter().any(|f| dir.join(f).is_file()) {
        Some(Engine::Sled)
    } else {
        None
    }
}

/// `path` as a PostgreSQL URL, when it is one.
#[must_use]
pub fn postgres_url(path: &Path) -> Option<&str> {
    path.to_str()
        .filter(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// How a PostgreSQL tree is held: which tree, writer or reader, and a writer's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct PostgresOptions {
    /// The tree's name in the database (each name is its own namespace).
    pub tree: String,
    /// Writer (fenced, one per tree) or reader.
    pub role: Role,
    /// Whether a writer waits for the tree's lock (a standby) or fails at once.
    pub lock_wait: LockWait,
    /// A writer's lease in milliseconds (see [`PgConfig::lease_ms`]).
    pub lease_ms: u64,
    /// How long a lost connection is retried, in milliseconds.
    pub reconnect_ms: u64,
    /// Whether a replica listens for the writer's commit notifications ([`CommitListener`]);
    /// without them it only polls.
    pub listen: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        let pg = PgConfig::default();
        Self {
            tree: pg.tree,
            role: pg.role,
            lock_wait: pg.lock_wait,
            lease_ms: pg.lease_ms,
            reconnect_ms: pg.reconnect_ms,
            listen: true,
        }
    }
}

/// Where a database is and how to open it, whichever engine holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct DbConfig {
    /// Database directory, or a `postgres://` URL; `None` for a temporary database.
    pub path: Option<PathBuf>,
    /// The engine for a new database, and the one an existing database must have; `None`
    /// detects it (sled for a new database).
    pub engine: Option<Engine>,
    /// When batches become durable.
    pub durability: Durability,
    /// How many levels below the root the tree caches in memory.
    pub cached_levels: u8,
    /// Also keep in memory every band of levels that uses at most this many node chunks
    /// (about 1 KiB each) at the tree's size: the top of the tree whatever its depth
    /// ([`NodeCache`]); 0 turns it off.
    pub cached_band_chunks: u32,
    /// Which tree of a PostgreSQL database, and how to hold it (ignored by sled and redb).
    pub postgres: PostgresOptions,
}

impl Default for DbConfig {
    fn default() -> Self {
        Self {
            path: None,
            engine: None,
            durability: Durability::Periodic { every_ms: 500 },
            cached_levels: NodeCache::default().top_levels,
            cached_band_chunks: NodeCache::default().band_chunks,
            postgres: PostgresOptions::default(),
        }
    }
}

impl DbConfig {
    /// The database in directory `path`, engine detected.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: Some(path.into()),
            ..Self::default()
        }
    }

    /// Requires (or, for a new database, chooses) `engine`.
    #[must_use]
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Sets the durability policy.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets the chunk budget of a cached band of levels (0: only the top levels).
    #[must_use]
    pub fn cached_band_chunks(mut self, chunks: u32) -> Self {
        self.cached_band_chunks = chunks;
        self
    }

    /// Names the tree of a PostgreSQL database.
    #[must_use]
    pub fn tree(mut self, tree: impl Into<String>) -> Self {
        self.postgres.tree = tree.into();
        self
    }

    /// Sets how a PostgreSQL tree is held.
    #[must_use]
    pub fn postgres(mut self, options: PostgresOptions) -> Self {
        self.postgres = options;
        self
    }

    /// The engine this configuration opens: the one found in the directory, else the one asked
    /// for, else sled.
    ///
    /// # Errors
    /// [`EngineError::Mismatch`] when the directory holds another engine's database.
    pub fn resolve(&self) -> Result<Engine, EngineError> {
        let found = self.path.as_deref().and_then(detect);
        match (found, self.engine) {
            (Some(found), Some(requested)) if found != requested => {
                Err(EngineError::Mismatch { found, requested })
            }
            (Some(found), _) => Ok(found),
            (None, requested) => Ok(requested.unwrap_or_default()),
        }
    }

    fn sled(&self) -> SledConfig {
        let mut config = match &self.path {
            Some(path) => SledConfig::new(path),
            None => SledConfig::temporary(),
        };
        config.durability = self.durability;
        config.cached_levels = self.cached_levels;
        config.cached_band_chunks = self.cached_band_chunks;
        config
    }

    /// The Postgres store's configuration: the path must be a `postgres://` URL.
    fn pg(&self) -> Result<PgConfig, EngineError> {
        let path = self.path.as_deref().unwrap_or(Path::new(""));
        let url = postgres_url(path).ok_or_else(|| EngineError::NotAUrl(path.to_path_buf()))?;
        let o = &self.postgres;
        Ok(PgConfig {
            url: url.to_owned(),
            tree: o.tree.clone(),
            role: o.role,
            lock_wait: o.lock_wait,
            lease_ms: o.lease_ms,
            reconnect_ms: o.reconnect_ms,
            cached_levels: self.cached_levels,
            cached_band_chunks: self.cached_band_chunks,
        })
    }

    fn redb(&self) -> RedbConfig {
        RedbConfig {
            path: self.path.clone(),
            durability: self.durability,
            cached_levels: self.cached_levels,
            cached_band_chunks: self.cached_band_chunks,
            ..RedbConfig::default()
        }
    }
}

/// A failure of whichever engine holds the database.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// sled failed.
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
    /// redb failed.
    #[error("redb: {0}")]
    Redb(#[from] redb::Error),
    /// PostgreSQL failed or refused (another writer, a newer term, another schema version).
    #[error(transparent)]
    Postgres(#[from] PgError),
    /// PostgreSQL was asked for with a database that is not a `postgres://` URL.
    #[error("a PostgreSQL database is a postgres:// URL, not {0:?}")]
    NotAUrl(PathBuf),
    /// The directory holds a database of another engine than the one asked for.
    #[error("the database is a {found} database, not {requested}")]
    Mismatch {
        /// The engine of the database found.
        found: Engine,
        /// The engine asked for.
        requested: Engine,
    },
}

/// sled, redb or PostgreSQL, chosen when the database is opened.
#[derive(Debug)]
pub enum AnyStore {
    /// A sled database.
    Sled(SledStore),
    /// A redb database.
    Redb(RedbStore),
    /// A tree in a PostgreSQL database.
    Postgres(PgStore),
    /// A replica's in-memory copy of a tree ([`DbReplica`]).
    Memory(MemStore),
}

impl AnyStore {
    /// The engine this store runs on.
    #[must_use]
    pub fn engine(&self) -> Engine {
        match self {
            Self::Sled(_) => Engine::Sled,
            Self::Redb(_) => Engine::Redb,
            Self::Postgres(_) => Engine::Postgres,
            Self::Memory(_) => Engine::Memory,
        }
    }
}

/// The persistent tree on whichever engine the database uses.
pub type DbTree<H> = PersistentTree<H, AnyStore>;

/// A [`DbTree`] shared by one writer and many readers.
pub type SharedDbTree<H> = SharedTree<H, AnyStore>;

/// The error of a [`DbTree`].
pub type DbTreeError = PersistentTreeError<EngineError>;

impl KvStore for AnyStore {
    type Error = EngineError;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        match self {
            Self::Sled(s) => Ok(s.get(key)?),
            Self::Redb(s) => Ok(s.get(key)?),
            Self::Postgres(s) => Ok(s.get(key)?),
            Self::Memory(s) => s.get(key).map_err(|never| match never {}),
        }
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        match self {
            Self::Sled(s) => Ok(s.get_many(keys)?),
            Self::Redb(s) => Ok(s.get_many(keys)?),
            Self::Postgres(s) => Ok(s.get_many(keys)?),
            Self::Memory(s) => s.get_many(keys).map_err(|never| match never {}),
        }
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), EngineError> {
        match self {
            Self::Sled(s) => Ok(s.commit(batch)?),
            Self::Redb(s) => Ok(s.commit(batch)?),
            Self::Postgres(s) => Ok(s.commit(batch)?),
            Self::Memory(s) => s.commit(batch).map_err(|never| match never {}),
        }
    }

    fn flush(&self) -> Result<(), EngineError> {
        match self {
            Self::Sled(s) => Ok(s.flush()?),
            Self::Redb(s) => Ok(s.flush()?),
            Self::Postgres(s) => Ok(s.flush()?),
            Self::Memory(s) => s.flush().map_err(|never| match never {}),
        }
    }

    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), EngineError> {
        match self {
            Self::Sled(s) => Ok(s.scan_prefix(prefix, visit)?),
            Self::Redb(s) => Ok(s.scan_prefix(prefix, visit)?),
            Self::Postgres(s) => Ok(s.scan_prefix(prefix, visit)?),
            Self::Memory(s) => s.scan_prefix(prefix, visit).map_err(|never| match never {}),
        }
    }

    fn is_empty(&self) -> Result<bool, EngineError> {
        match self {
            Self::Sled(s) => Ok(s.is_empty()?),
            Self::Redb(s) => Ok(s.is_empty()?),
            Self::Postgres(s) => Ok(s.is_empty()?),
            Self::Memory(s) => s.is_empty().map_err(|never| match never {}),
        }
    }
}

impl OpenStore for AnyStore {
    type Config = DbConfig;

    fn open(config: &DbConfig) -> Result<Self, PersistentTreeError<EngineError>> {
        match config.resolve().map_err(PersistentTreeError::Store)? {
            Engine::Sled => SledStore::open(&config.sled())
                .map(Self::Sled)
                .map_err(|e| e.map_store(EngineError::Sled)),
            Engine::Redb => RedbStore::open(&config.redb())
                .map(Self::Redb)
                .map_err(|e| e.map_store(EngineError::Redb)),
            Engine::Memory => Ok(Self::Memory(MemStore::new())),
            Engine::Postgres => {
                let pg = config.pg().map_err(PersistentTreeError::Store)?;
                PgStore::open(&pg)
                    .map(Self::Postgres)
                    .map_err(|e| PersistentTreeError::Store(EngineError::Postgres(e)))
            }
        }
    }

    /// The directory; `None` for a temporary database and for a PostgreSQL URL.
    fn path(config: &DbConfig) -> Option<&Path> {
        config.path.as_deref().filter(|p| postgres_url(p).is_none())
    }

    fn node_cache(config: &DbConfig) -> NodeCache {
        NodeCache {
            top_levels: config.cached_levels,
            band_chunks: config.cached_band_chunks,
        }
    }

    fn size_on_disk(&self) -> Result<u64, EngineError> {
        match self {
            Self::Sled(s) => Ok(s.size_on_disk()?),
            Self::Redb(s) => Ok(s.size_on_disk()?),
            Self::Postgres(s) => Ok(s.size_on_disk()?),
            Self::Memory(_) => Ok(0),
        }
    }
}

fn infallible<T>(result: Result<T, std::convert::Infallible>) -> T {
    match result {
        Ok(value) => value,
        Err(never) => match never {},
    }
}

/// A read replica of a PostgreSQL tree: the tree's every entry in memory, served as a
/// [`DbTree`] on [`AnyStore::Memory`], brought forward by [`catch_up`](Self::catch_up) from
/// the rows written since its commit. Every read sees one committed state: a catch-up applies
/// the changes and reopens the tree over them under the shared tree's write lock.
#[derive(Debug)]
pub struct DbReplica {
    pg: PgReplica,
    /// Wakes [`wait_for_commit`](Self::wait_for_commit) when the writer commits.
    listener: Option<CommitListener>,
    copy: MemStore,
    cache: NodeCache,
}

/// Where a replica stands after a catch-up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicaLag {
    /// The database's commit count, which the replica now serves.
    pub commits: i64,
    /// Commits the replica was behind before this catch-up.
    pub caught_up: i64,
    /// Seconds since the tree's last commit (the database's clock).
    pub last_commit_age: f64,
}

impl DbReplica {
    /// Connects to the PostgreSQL tree `config` names, as a reader, and loads it whole.
    ///
    /// # Errors
    /// [`EngineError::NotAUrl`], Postgres errors, [`PersistentTreeError::NotATree`] when the
    /// tree holds no tree yet, and the tree's own open errors.
    pub fn open<H: hasher::DigestCodec>(
        config: &DbConfig,
    ) -> Result<(Self, DbTree<H>), DbTreeError> {
        let pg_config = config
            .pg()
            .map_err(PersistentTreeError::Store)?
            .role(Role::Reader);
        let postgres = |e| PersistentTreeError::Store(EngineError::Postgres(e));
        let pg = PgReplica::connect(&pg_config).map_err(postgres)?;
        // The listener connects in the background; once LISTEN holds it wakes the replica
        // once, so no commit between the first look and the LISTEN is missed.
        let listener = if config.postgres.listen {
            Some(CommitListener::start(&pg_config).map_err(postgres)?)
        } else {
            None
        };
        let mut replica = Self {
            pg,
            listener,
            copy: MemStore::new(),
            cache: AnyStore::node_cache(config),
        };
        replica.observe()?;
        let tree = replica.reopen()?;
        Ok((replica, tree))
    }

    /// The database commit the replica serves.
    #[must_use]
    pub fn commits(&self) -> i64 {
        self.pg.commits()
    }

    /// True while the writer's commit notifications reach this replica: then
    /// [`wait_for_commit`](Self::wait_for_commit) returns as a commit lands, and a slow poll
    /// is only a safety net. False without a listener, before it connects, after a lost
    /// connection and on a server that refuses LISTEN (a hot standby): poll.
    #[must_use]
    pub fn is_listening(&self) -> bool {
        self.listener
            .as_ref()
            .is_some_and(CommitListener::is_listening)
    }

    /// Why the server refused to send commit notifications, if it did (a hot standby): the
    /// replica then polls.
    #[must_use]
    pub fn listen_refusal(&self) -> Option<String> {
        self.listener.as_ref().and_then(CommitListener::refusal)
    }

    /// Waits until the writer commits (as notified) or `timeout` passes; true when notified.
    /// Without a listener it sleeps `timeout`.
    pub fn wait_for_commit(&self, timeout: Duration) -> bool {
        match &self.listener {
            Some(listener) => listener.wait(timeout),
            None => {
                std::thread::sleep(timeout);
                false
            }
        }
    }

    /// Brings `shared` to the tree's last commit, if it moved: one read of the rows written
    /// since, applied with the reopen under `shared`'s write lock.
    ///
    /// # Errors
    /// Postgres errors (the copy is untouched), and a reopen error (the copy is then ahead of
    /// the served tree: stop serving).
    pub fn catch_up<H: hasher::DigestCodec>(
        &mut self,
        shared: &SharedDbTree<H>,
    ) -> Result<ReplicaLag, DbTreeError> {
        let (change, lag) = self.observe_pending()?;
        if let Some(change) = change {
            shared.write(|tree| -> Result<(), DbTreeError> {
                self.apply(change);
                *tree = self.reopen()?;
                Ok(())
            })?;
        }
        Ok(lag)
    }

    fn observe(&mut self) -> Result<(), DbTreeError> {
        if let (Some(change), _) = self.observe_pending()? {
            self.apply(change);
        }
        Ok(())
    }

    fn observe_pending(&mut self) -> Result<(Option<Catchup>, ReplicaLag), DbTreeError> {
        let observed = self
            .pg
            .observe()
            .map_err(|e| PersistentTreeError::Store(EngineError::Postgres(e)))?;
        let lag = ReplicaLag {
            commits: observed.commits,
            caught_up: observed.behind,
            last_commit_age: observed.last_commit_age,
        };
        let change = match observed.catchup {
            Catchup::Current => None,
            other => Some(other),
        };
        Ok((change, lag))
    }

    fn apply(&self, change: Catchup) {
        match change {
            Catchup::Current => {}
            Catchup::Changes(batch) => infallible(self.copy.commit(batch)),
            Catchup::Reload(entries) => {
                let mut batch = StoreBatch::default();
                // Everything the copy held goes first, so keys removed meanwhile go too.
                infallible(self.copy.scan_prefix(&[], &mut |key, _| batch.remove(key)));
                for (key, value) in entries {
                    batch.insert(&key, value);
                }
                infallible(self.copy.commit(batch));
            }
        }
    }

    fn reopen<H: hasher::DigestCodec>(&self) -> Result<DbTree<H>, DbTreeError> {
        // The copy holds encoded chunks; the tree's node cache keeps the top bands decoded,
        // as on every store. It is loaded here, by one proof, so the first reader after a
        // catch-up does not pay for it.
        let tree = PersistentTree::open_store_existing(
            AnyStore::Memory(self.copy.clone()),
            tree_core::RehashConfig::default(),
            self.cache,
        )?;
        if tree.next_index() > 0 {
            tree.proof(tree.next_index() - 1)?;
        }
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hasher::Keccak256Hasher as K;
    use tree_core::{Depth, MerkleTree, MerkleTreeExt};

    #[test]
    fn each_engine_is_detected_and_another_is_refused() {
        let depth = Depth::new(4).unwrap();
        for engine in [Engine::Sled, Engine::Redb] {
            let dir = tempfile::tempdir().unwrap();
            assert_eq!(detect(dir.path()), None);
            let mut tree =
                DbTree::<K>::open(&DbConfig::new(dir.path()).engine(engine), depth).unwrap();
            tree.set(1, [1; 32]).unwrap();
            let root = tree.root();
            drop(tree);
            assert_eq!(detect(dir.path()), Some(engine));
            let tree = DbTree::<K>::open_existing(&DbConfig::new(dir.path())).unwrap();
            assert_eq!((tree.store().engine(), tree.root()), (engine, root));
            drop(tree);
            let other = if engine == Engine::Sled {
                Engine::Redb
            } else {
                Engine::Sled
            };
            let refused = DbTree::<K>::open(&DbConfig::new(dir.path()).engine(other), depth);
            assert!(matches!(
                refused,
                Err(PersistentTreeError::Store(EngineError::Mismatch { found, requested }))
                    if found == engine && requested == other
            ));
        }
        assert_eq!("redb".parse::<Engine>(), Ok(Engine::Redb));
        assert!("rocks".parse::<Engine>().is_err());
    }

    /// A `postgres://` URL is PostgreSQL's, whatever else is asked; a tree there is found by
    /// name; asking for PostgreSQL with a directory is a typed error.
    #[test]
    fn a_postgres_url_opens_the_named_tree() {
        let cluster = pg_harness::PgCluster::start().unwrap();
        let url = cluster.url();
        assert_eq!(detect(Path::new(&url)), Some(Engine::Postgres));
        let depth = Depth::new(6).unwrap();
        let mut tree = DbTree::<K>::open(&DbConfig::new(&url).tree("x"), depth).unwrap();
        tree.set(3, [3; 32]).unwrap();
        let root = tree.root();
        drop(tree);
        let tree = DbTree::<K>::open_existing(&DbConfig::new(&url).tree("x")).unwrap();
        assert_eq!(
            (tree.store().engine(), tree.root()),
            (Engine::Postgres, root)
        );
        drop(tree);
        assert!(matches!(
            DbTree::<K>::open(&DbConfig::new(&url).tree("x").engine(Engine::Sled), depth),
            Err(PersistentTreeError::Store(EngineError::Mismatch { .. }))
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            DbTree::<K>::open(&DbConfig::new(dir.path()).engine(Engine::Postgres), depth),
            Err(PersistentTreeError::Store(EngineError::NotAUrl(_)))
        ));
    }
}
