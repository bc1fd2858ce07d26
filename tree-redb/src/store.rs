//! redb 5 as a [`KvStore`]: one table of byte keys and values, one write transaction per commit.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use redb::backends::InMemoryBackend;
use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, StorageBackend,
    TableDefinition, TableError,
};
use tree_core::persistent::{
    DirLock, Durability, KvStore, OpenStore, PersistentTreeError, StoreBatch,
};

use crate::RedbConfig;

/// The database file inside a redb database directory.
pub const DATABASE_FILE: &str = "canopy.redb";

/// Every key of the tree (tree-core's layout) lives in this one table.
const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("canopy");

/// The table as one read transaction sees it (`None` before the first commit creates it).
type Snapshot = Option<redb::ReadOnlyTable<&'static [u8], &'static [u8]>>;

/// The cached snapshot and the number of commits it may be cached at.
#[derive(Default)]
struct Cached {
    commits: u64,
    snapshot: Option<Arc<Snapshot>>,
}

impl std::fmt::Debug for Cached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cached")
            .field("commits", &self.commits)
            .field("snapshot", &self.snapshot.is_some())
            .finish()
    }
}

/// True when `dir` holds a redb database (engine detection for tools that open what exists).
#[must_use]
pub fn is_redb_database(dir: &Path) -> bool {
    dir.join(DATABASE_FILE).is_file()
}

/// redb behind [`KvStore`].
#[derive(Debug)]
pub struct RedbStore {
    db: Database,
    durability: Durability,
    /// When the last durable commit returned.
    last_durable: Mutex<Instant>,
    /// Commits made with `Durability::None` since then.
    pending: AtomicBool,
    /// The table as of the last commit, shared by every read until the next commit: one read
    /// transaction per commit instead of one per node read (`None`: open one on the next read).
    snapshot: RwLock<Cached>,
    file: Option<PathBuf>,
    // Dropped after `db`: the directory stays locked until redb has let go of the file.
    _lock: Option<DirLock>,
}

impl RedbStore {
    /// Opens (or creates) the database `config` describes.
    ///
    /// # Errors
    /// [`PersistentTreeError::Locked`], [`PersistentTreeError::ForeignDirectory`],
    /// [`PersistentTreeError::Io`], and redb's error (a damaged or foreign file among them) as
    /// [`PersistentTreeError::Store`].
    pub fn open(config: &RedbConfig) -> Result<Self, PersistentTreeError<redb::Error>> {
        let mut builder = Database::builder();
        builder
            .set_cache_size(config.cache_capacity)
            .set_check_integrity_on_open(config.check_integrity_on_open);
        let Some(dir) = &config.path else {
            let db = builder
                .create_with_backend(InMemoryBackend::new())
                .map_err(store_error)?;
            return Ok(Self::from_parts(db, config.durability, None, None));
        };
        let lock = DirLock::acquire(dir, &[DATABASE_FILE])?;
        let file = dir.join(DATABASE_FILE);
        let db = match builder.create(&file) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(PersistentTreeError::Locked { path: dir.clone() })
            }
            Err(error) => return Err(store_error(error)),
        };
        Ok(Self::from_parts(
            db,
            config.durability,
            Some(file),
            Some(lock),
        ))
    }

    /// A store on any redb [`StorageBackend`]: what fault-injection tests use to make writes and
    /// syncs fail, or to lose what was never synced.
    ///
    /// # Errors
    /// redb's error opening the backend.
    pub fn with_backend(
        backend: impl StorageBackend,
        durability: Durability,
    ) -> Result<Self, PersistentTreeError<redb::Error>> {
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(store_error)?;
        Ok(Self::from_parts(db, durability, None, None))
    }

    fn from_parts(
        db: Database,
        durability: Durability,
        file: Option<PathBuf>,
        lock: Option<DirLock>,
    ) -> Self {
        Self {
            db,
            durability,
            last_durable: Mutex::new(Instant::now()),
            pending: AtomicBool::new(false),
            snapshot: RwLock::new(Cached::default()),
            file,
            _lock: lock,
        }
    }

    /// Whether the next commit must be durable under the policy.
    fn next_is_durable(&self) -> bool {
        match self.durability {
            Durability::EveryCommit => true,
            Durability::Periodic { every_ms } => {
                self.last_durable.lock().elapsed() >= Duration::from_millis(every_ms)
            }
        }
    }

    /// One write transaction: `ops` (possibly none), committed durably or not.
    fn write(
        &self,
        ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        durable: bool,
    ) -> Result<(), redb::Error> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(if durable {
            redb::Durability::Immediate
        } else {
            redb::Durability::None
        })?;
        {
            let mut table = txn.open_table(TABLE)?;
            for (key, value) in ops {
                match value {
                    Some(value) => {
                        table.insert(key.as_slice(), value.as_slice())?;
                    }
                    None => {
                        table.remove(key.as_slice())?;
                    }
                }
            }
        }
        let committed = txn.commit();
        // Whether it landed or not, readers must not go on seeing the snapshot from before it.
        {
            let mut cached = self.snapshot.write();
            cached.commits += 1;
            cached.snapshot = None;
        }
        committed?;
        if durable {
            *self.last_durable.lock() = Instant::now();
            self.pending.store(false, Ordering::Release);
        } else {
            self.pending.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// The table as of the last commit, opening a read transaction if none is cached.
    fn snapshot(&self) -> Result<Arc<Snapshot>, redb::Error> {
        let commits = {
            let cached = self.snapshot.read();
            if let Some(snapshot) = &cached.snapshot {
                return Ok(snapshot.clone());
            }
            cached.commits
        };
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(TABLE) {
            Ok(table) => Some(table),
            Err(TableError::TableDoesNotExist(_)) => None,
            Err(error) => return Err(error.into()),
        };
        let snapshot = Arc::new(table);
        let mut cached = self.snapshot.write();
        // Cached only if no commit started since the count was read: a transaction begun
        // around a commit may predate it.
        if cached.commits == commits && cached.snapshot.is_none() {
            cached.snapshot = Some(snapshot.clone());
        }
        Ok(snapshot)
    }

    /// Runs `read` on the table, or returns `absent` when no commit has created it yet.
    fn with_table<R>(
        &self,
        absent: R,
        read: impl FnOnce(&redb::ReadOnlyTable<&'static [u8], &'static [u8]>) -> Result<R, redb::Error>,
    ) -> Result<R, redb::Error> {
        match &*self.snapshot()? {
            Some(table) => read(table),
            None => Ok(absent),
        }
    }
}

fn store_error(error: impl Into<redb::Error>) -> PersistentTreeError<redb::Error> {
    PersistentTreeError::Store(error.into())
}

impl KvStore for RedbStore {
    type Error = redb::Error;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, redb::Error> {
        self.with_table(None, |table| {
            Ok(table.get(key)?.map(|value| value.value().to_vec()))
        })
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), redb::Error> {
        self.write(batch.into_ops(), self.next_is_durable())
    }

    fn flush(&self) -> Result<(), redb::Error> {
        if self.pending.load(Ordering::Acquire) {
            // An empty durable commit makes every earlier non-durable one durable.
            self.write(Vec::new(), true)?;
        }
        Ok(())
    }

    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), redb::Error> {
        self.with_table((), |table| {
            for entry in table.range(prefix..)? {
                let (key, value) = entry?;
                if !key.value().starts_with(prefix) {
                    break;
                }
                visit(key.value(), value.value());
            }
            Ok(())
        })
    }

    fn is_empty(&self) -> Result<bool, redb::Error> {
        self.with_table(true, |table| Ok(table.is_empty()?))
    }
}

impl OpenStore for RedbStore {
    type Config = RedbConfig;

    fn open(config: &RedbConfig) -> Result<Self, PersistentTreeError<redb::Error>> {
        Self::open(config)
    }

    fn path(config: &RedbConfig) -> Option<&Path> {
        config.path.as_deref()
    }

    fn node_cache(config: &RedbConfig) -> tree_core::persistent::NodeCache {
        tree_core::persistent::NodeCache {
            top_levels: config.cached_levels,
            band_chunks: config.cached_band_chunks,
        }
    }

    /// The database file's length (0 for a database held in memory).
    fn size_on_disk(&self) -> Result<u64, redb::Error> {
        match &self.file {
            Some(file) => Ok(std::fs::metadata(file)
                .map_err(redb::StorageError::Io)?
                .len()),
            None => Ok(0),
        }
    }
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        // Best effort: a drop cannot report failure; `PersistentTree::close` can.
        let _ = self.flush();
    }
}
