//! A store that simulates power loss, in the spirit of redb's crash backend and SQLite's crash
//! VFS: what was flushed is durable; what was only written is lost on a crash, except for some
//! prefix of whole batches (what sled's log recovery replays: batches are atomic and the log is
//! read in order up to the first incomplete record).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use parking_lot::Mutex;
use tree_sled::{KvStore, MemStore, StoreBatch};

#[derive(Default)]
struct Images {
    /// What survives any crash.
    durable: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Committed since the last flush, oldest first.
    pending: Vec<StoreBatch>,
    /// What readers see: `durable` plus every pending batch.
    current: MemStore,
    flushes: u64,
}

/// A [`KvStore`] that keeps its durable image apart from what was only written.
/// Clones share the same images.
#[derive(Clone, Default)]
pub struct PowerLossStore {
    images: Arc<Mutex<Images>>,
    flush_on_commit: bool,
}

impl PowerLossStore {
    /// An empty store; with `flush_on_commit` every commit is durable when it returns (sled's
    /// `Durability::EveryCommit`), otherwise only what a `flush` covered.
    #[must_use]
    pub fn new(flush_on_commit: bool) -> Self {
        Self {
            images: Arc::default(),
            flush_on_commit,
        }
    }

    /// Flushes so far.
    #[must_use]
    pub fn flushes(&self) -> u64 {
        self.images.lock().flushes
    }

    /// Batches committed since the last flush.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.images.lock().pending.len()
    }

    /// The disk a machine finds after losing power now: the durable image plus the first
    /// `survivors` unflushed batches (clamped to how many there are).
    #[must_use]
    pub fn crash_image(&self, survivors: usize) -> MemStore {
        let images = self.images.lock();
        let mut map = images.durable.clone();
        for batch in images.pending.iter().take(survivors) {
            batch.clone().apply_to(&mut map);
        }
        let store = MemStore::new();
        let mut batch = StoreBatch::default();
        for (key, value) in map {
            batch.insert(&key, value);
        }
        let Ok(()) = store.commit(batch);
        store
    }
}

impl KvStore for PowerLossStore {
    type Error = Infallible;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Infallible> {
        self.images.lock().current.get(key)
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), Infallible> {
        let mut images = self.images.lock();
        let Ok(()) = images.current.commit(batch.clone());
        images.pending.push(batch);
        drop(images);
        if self.flush_on_commit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), Infallible> {
        let mut images = self.images.lock();
        let pending = std::mem::take(&mut images.pending);
        for batch in pending {
            batch.apply_to(&mut images.durable);
        }
        images.flushes += 1;
        Ok(())
    }

    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), Infallible> {
        self.images.lock().current.scan_prefix(prefix, visit)
    }

    fn is_empty(&self) -> Result<bool, Infallible> {
        self.images.lock().current.is_empty()
    }
}
