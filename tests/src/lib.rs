//! Shared helpers for Canopy's cross-crate tests (under `tests/tests/`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hasher::Fr;
use tree_sled::{KvStore, MemStore, StoreBatch};

pub mod chain;
pub mod engines;
pub mod power_loss;
pub mod proxy;
pub mod redb_backend;
pub mod report;
pub mod steps;

/// Proptest case count: `PROPTEST_CASES` when set, else `default`.
#[must_use]
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A Poseidon leaf from a small seed (seed 0 is the empty leaf).
#[must_use]
pub fn fr_leaf(seed: u64) -> Fr {
    Fr::from(seed)
}

/// A store whose N-th commit fails before writing anything.
#[derive(Clone)]
pub struct FaultyStore {
    /// The store that holds what did commit.
    pub inner: MemStore,
    /// Commits attempted so far.
    pub commits: Arc<AtomicUsize>,
    /// The 0-based commit that fails.
    pub fail_at: usize,
    /// Whether the failing commit is written anyway (as sled's when its flush fails).
    pub lands: bool,
}

impl FaultyStore {
    /// A fresh store whose `fail_at`-th commit fails.
    #[must_use]
    pub fn new(fail_at: usize) -> Self {
        Self {
            inner: MemStore::new(),
            commits: Arc::new(AtomicUsize::new(0)),
            fail_at,
            lands: false,
        }
    }

    /// A fresh store whose `fail_at`-th commit is written but still reports failure.
    #[must_use]
    pub fn landing(fail_at: usize) -> Self {
        Self {
            lands: true,
            ..Self::new(fail_at)
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("injected fault")]
pub struct Injected;

impl KvStore for FaultyStore {
    type Error = Injected;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Injected> {
        Ok(self.inner.get(key).unwrap_or_default())
    }
    fn commit(&self, batch: StoreBatch) -> Result<(), Injected> {
        if self.commits.fetch_add(1, Ordering::SeqCst) == self.fail_at {
            if self.lands {
                let Ok(()) = self.inner.commit(batch);
            }
            return Err(Injected);
        }
        let Ok(()) = self.inner.commit(batch);
        Ok(())
    }
    fn flush(&self) -> Result<(), Injected> {
        Ok(())
    }
    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), Injected> {
        let Ok(()) = self.inner.scan_prefix(prefix, visit);
        Ok(())
    }
    fn is_empty(&self) -> Result<bool, Injected> {
        Ok(self.inner.is_empty().unwrap_or(false))
    }
}
