//! The byte-level store beneath the engine: a key-value map with atomic batches. Small on
//! purpose, so each engine (sled, redb) is a few dozen lines and fakes and fault injectors are
//! easy; what the bytes mean lives in [`layout`](super::layout), once for every engine.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use parking_lot::RwLock;

use super::PersistentTreeError;

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

    /// Applies the operations, in order, to an in-memory image of a store.
    pub fn apply_to(self, map: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>) {
        for (key, value) in self.ops {
            match value {
                Some(value) => map.insert(key, value),
                None => map.remove(&key),
            };
        }
    }

    /// The operations, consumed (what an engine turns into its own batch).
    #[must_use]
    pub fn into_ops(self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        self.ops
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
pub trait KvStore {
    /// The store's failure type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The value at `key`.
    ///
    /// # Errors
    /// A read failure.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Self::Error>;

    /// The values at `keys`, in order: what staging one commit reads. Engines whose every read
    /// is a round trip (PostgreSQL) answer it in one; the default reads key by key.
    ///
    /// # Errors
    /// A read failure.
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, Self::Error> {
        keys.iter().map(|key| self.get(key)).collect()
    }

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

    /// Number of keys held (see also [`KvStore::is_empty`]).
    #[must_use]
    #[allow(clippy::len_without_is_empty)] // `is_empty` is the KvStore method
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

impl KvStore for MemStore {
    type Error = Infallible;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
        Ok(self.data.read().get(key).cloned())
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), Infallible> {
        batch.apply_to(&mut self.data.write());
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

/// A [`KvStore`] that lives at a path and can be opened from a typed configuration: what
/// [`PersistentTree::open`](super::PersistentTree::open) needs from an engine.
pub trait OpenStore: KvStore + Sized {
    /// The engine's typed configuration (path, durability, caches).
    type Config;

    /// Opens (or creates) the store `config` describes.
    ///
    /// # Errors
    /// [`PersistentTreeError::Locked`], [`PersistentTreeError::ForeignDirectory`],
    /// [`PersistentTreeError::Io`] and the engine's own errors.
    fn open(config: &Self::Config) -> Result<Self, PersistentTreeError<Self::Error>>;

    /// The database directory `config` names; `None` for a temporary store.
    fn path(config: &Self::Config) -> Option<&std::path::Path>;

    /// Which nodes the tree keeps in memory once read.
    fn node_cache(config: &Self::Config) -> super::NodeCache;

    /// Bytes the store takes on disk.
    ///
    /// # Errors
    /// The engine's error.
    fn size_on_disk(&self) -> Result<u64, Self::Error>;
}
