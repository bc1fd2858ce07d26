//! sled 0.34 as a [`KvStore`] beneath tree-core's persistent engine.

use std::fs::{File, TryLockError};
use std::path::PathBuf;

use tree_core::persistent::{DirLock, Durability, KvStore, OpenStore, StoreBatch};

use crate::{Mode, SledConfig, SledTreeError};

/// sled 0.34 behind [`KvStore`]: one `sled::Tree`, one `sled::Batch` per commit.
#[derive(Debug)]
pub struct SledStore {
    db: Option<sled::Db>,
    durability: Durability,
    path: Option<PathBuf>,
    // Held for the store's lifetime: a second handle on the same path gets `Locked` at once.
    _lock: Option<DirLock>,
}

/// Files sled 0.34 keeps in its directory; a non-empty directory without any of them (and
/// without our lock file) holds something else and must not be written to.
const DATABASE_FILES: &[&str] = &["conf", "db", "blobs", "snap"];

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
            lock = Some(DirLock::acquire(path, DATABASE_FILES)?);
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

impl KvStore for SledStore {
    type Error = sled::Error;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, sled::Error> {
        Ok(self.db()?.get(key)?.map(|v| v.to_vec()))
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), sled::Error> {
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch.into_ops() {
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

impl OpenStore for SledStore {
    type Config = SledConfig;

    fn open(config: &SledConfig) -> Result<Self, SledTreeError> {
        Self::open(config)
    }

    fn path(config: &SledConfig) -> Option<&std::path::Path> {
        config.path.as_deref()
    }

    fn node_cache(config: &SledConfig) -> tree_core::persistent::NodeCache {
        tree_core::persistent::NodeCache {
            top_levels: config.cached_levels,
            band_chunks: config.cached_band_chunks,
        }
    }

    fn size_on_disk(&self) -> Result<u64, sled::Error> {
        self.db()?.size_on_disk()
    }
}
