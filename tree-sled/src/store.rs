//! The byte-level store between the tree and sled: small, so fakes and fault injectors are easy.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fs::{File, TryLockError};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::{Durability, Mode, SledConfig, SledTreeError};

/// Writes that must land together or not at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreBatch {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl StoreBatch {
    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: &[u8], value: Vec<u8>) {
        self.ops.push((key.to_vec(), Some(value)));
    }

    /// Keeps only the operations whose key satisfies `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        self.ops.retain(|(key, _)| keep(key));
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &[u8]) {
        self.ops.push((key.to_vec(), None));
    }

    /// The operations in order (`None` = remove).
    #[must_use]
    pub fn ops(&self) -> &[(Vec<u8>, Option<Vec<u8>>)] {
        &self.ops
    }

    /// Number of operations.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when there is nothing to write.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A key-value store with atomic batches.
pub trait NodeStore {
    /// The store's failure type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The value at `key`.
    ///
    /// # Errors
    /// A read failure.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;

    /// Applies every operation of `batch` or none of them, durable per the store's policy.
    ///
    /// # Errors
    /// A write failure (after which none of the batch is visible).
    fn commit(&self, batch: StoreBatch) -> Result<(), Self::Error>;

    /// Makes everything committed so far durable.
    ///
    /// # Errors
    /// A flush failure.
    fn flush(&self) -> Result<(), Self::Error>;

    /// Calls `visit(key, value)` for every key starting with `prefix`, in key order.
    ///
    /// # Errors
    /// A read failure.
    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), Self::Error>;

    /// True when the store holds no key at all.
    ///
    /// # Errors
    /// A read failure.
    fn is_empty(&self) -> Result<bool, Self::Error>;
}

/// An in-memory store; clones share the same data, so "reopen" can be tested without disk.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    data: Arc<RwLock<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl MemStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys held (see also [`NodeStore::is_empty`]).
    #[must_use]
    #[allow(clippy::len_without_is_empty)] // `is_empty` is the NodeStore method
    pub fn len(&self) -> usize {
        self.data.read().len()
    }

    /// Total bytes of keys and values held.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.data
            .read()
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum()
    }
}

impl NodeStore for MemStore {
    type Error = Infallible;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
        Ok(self.data.read().get(key).cloned())
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), Infallible> {
        let mut data = self.data.write();
        for (key, value) in batch.ops {
            match value {
                Some(value) => data.insert(key, value),
                None => data.remove(&key),
            };
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), Infallible> {
        Ok(())
    }

    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), Infallible> {
        let data = self.data.read();
        for (key, value) in data.range(prefix.to_vec()..) {
            if !key.starts_with(prefix) {
                break;
            }
            visit(key, value);
        }
        Ok(())
    }

    fn is_empty(&self) -> Result<bool, Infallible> {
        Ok(self.data.read().is_empty())
    }
}

/// sled 0.34 behind [`NodeStore`]: one `sled::Tree`, one `sled::Batch` per commit.
#[derive(Debug)]
pub struct SledStore {
    db: Option<sled::Db>,
    durability: Durability,
    path: Option<PathBuf>,
    // Held for the store's lifetime: a second handle on the same path gets `Locked` at once.
    _lock: Option<File>,
}

/// Name of Canopy's lock file inside the database directory.
pub const LOCK_FILE: &str = "canopy.lock";

/// Files sled 0.34 keeps in its directory; a non-empty directory without any of them (and
/// without our lock file) holds something else and must not be written to.
const DATABASE_FILES: &[&str] = &["conf", "db", "blobs", "snap", LOCK_FILE];

/// True when `path` is a directory with entries, none of which is a database file.
fn is_foreign_directory(path: &std::path::Path) -> std::io::Result<bool> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        // Missing: it will be created. Not a directory: create_dir_all reports it.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    let mut any = false;
    for entry in entries {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if DATABASE_FILES
            .iter()
            .any(|f| name == *f || name.starts_with("snap."))
        {
            return Ok(false);
        }
        any = true;
    }
    Ok(any)
}

impl SledStore {
    /// Opens (or creates) the database described by `config`.
    ///
    /// # Errors
    /// [`SledTreeError::Locked`] when another handle holds the path (checked with an OS file
    /// lock, no waiting); [`SledTreeError::Io`] when the directory or lock file cannot be made;
    /// [`SledTreeError::Store`] for sled's own failures.
    pub fn open(config: &SledConfig) -> Result<Self, SledTreeError> {
        let mut sled_config = sled::Config::new()
            .cache_capacity(config.cache_capacity)
            .mode(match config.mode {
                Mode::LowSpace => sled::Mode::LowSpace,
                Mode::HighThroughput => sled::Mode::HighThroughput,
            })
            .flush_every_ms(match config.durability {
                Durability::EveryCommit => None,
                Durability::Periodic { every_ms } => Some(every_ms),
            })
            .temporary(config.temporary);
        let mut lock = None;
        if let Some(path) = &config.path {
            let io = |source| SledTreeError::Io {
                path: path.clone(),
                source,
            };
            if is_foreign_directory(path).map_err(io)? {
                return Err(SledTreeError::ForeignDirectory { path: path.clone() });
            }
            std::fs::create_dir_all(path).map_err(io)?;
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path.join(LOCK_FILE))
                .map_err(io)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    return Err(SledTreeError::Locked { path: path.clone() })
                }
                Err(TryLockError::Error(source)) => return Err(io(source)),
            }
            lock = Some(file);
            sled_config = sled_config.path(path);
        }
        let db = sled_config.open().map_err(SledTreeError::Store)?;
        Ok(Self {
            db: Some(db),
            durability: config.durability,
            path: config.path.clone(),
            _lock: lock,
        })
    }

    /// The database directory, when not temporary.
    #[must_use]
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// Bytes sled's files take on disk.
    ///
    /// # Errors
    /// sled's error.
    pub fn size_on_disk(&self) -> Result<u64, sled::Error> {
        self.db()?.size_on_disk()
    }

    fn db(&self) -> Result<&sled::Db, sled::Error> {
        // `None` only inside `drop`.
        self.db
            .as_ref()
            .ok_or(sled::Error::Unsupported("store is closing".to_owned()))
    }
}

/// Bound on waiting for sled's background threads to release a dropped database.
const RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Drop for SledStore {
    /// Dropping a sled `Db` returns before its background IO threads let go of the database
    /// file, so an immediate reopen would find sled's own lock still held. Wait (bounded) until
    /// that lock is free, so that once a handle is dropped its path can be opened again.
    fn drop(&mut self) {
        drop(self.db.take());
        let Some(path) = &self.path else { return };
        let Ok(file) = File::open(path.join("db")) else {
            return;
        };
        let started = std::time::Instant::now();
        while started.elapsed() < RELEASE_WAIT {
            match file.try_lock() {
                Ok(()) => {
                    let _ = file.unlock();
                    return;
                }
                Err(TryLockError::WouldBlock) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(TryLockError::Error(_)) => return,
            }
        }
    }
}

impl NodeStore for SledStore {
    type Error = sled::Error;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, sled::Error> {
        Ok(self.db()?.get(key)?.map(|v| v.to_vec()))
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), sled::Error> {
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch.ops {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        let db = self.db()?;
        db.apply_batch(sled_batch)?;
        if self.durability == Durability::EveryCommit {
            db.flush()?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), sled::Error> {
        self.db()?.flush().map(|_| ())
    }

    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), sled::Error> {
        for entry in self.db()?.scan_prefix(prefix) {
            let (key, value) = entry?;
            visit(&key, &value);
        }
        Ok(())
    }

    fn is_empty(&self) -> Result<bool, sled::Error> {
        Ok(self.db()?.first()?.is_none())
    }
}
