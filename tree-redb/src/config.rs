//! Typed configuration of the redb store.

use std::path::PathBuf;

use tree_core::persistent::{Durability, NodeCache};

/// Where and how to open a redb database. `Default` is a temporary database held in memory
/// (redb's in-memory backend: nothing touches the filesystem).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct RedbConfig {
    /// Database directory; `None` keeps the database in memory.
    pub path: Option<PathBuf>,
    /// redb's page-cache size in bytes.
    pub cache_capacity: usize,
    /// When batches become durable.
    pub durability: Durability,
    /// How many levels below the root the tree caches in memory; 0 disables the cache.
    pub cached_levels: u8,
    /// Also keep in memory every band of levels that uses at most this many node chunks
    /// (about 1 KiB each) at the tree's size: the top of the tree whatever its depth
    /// ([`NodeCache`](tree_core::persistent::NodeCache)); 0 turns it off.
    pub cached_band_chunks: u32,
    /// Verify every page's checksum on open (reads the whole file): off by default so that
    /// opening stays O(1); redb checks a file it did not close cleanly anyway.
    pub check_integrity_on_open: bool,
}

impl Default for RedbConfig {
    fn default() -> Self {
        Self {
            path: None,
            cache_capacity: 256 * 1024 * 1024,
            durability: Durability::Periodic { every_ms: 500 },
            cached_levels: NodeCache::default().top_levels,
            cached_band_chunks: NodeCache::default().band_chunks,
            check_integrity_on_open: false,
        }
    }
}

impl RedbConfig {
    /// A persistent database in directory `path` with default settings.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: Some(path.into()),
            ..Self::default()
        }
    }

    /// A database held in memory, gone when dropped.
    #[must_use]
    pub fn temporary() -> Self {
        Self::default()
    }

    /// Sets the durability policy.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets redb's page-cache size in bytes.
    #[must_use]
    pub fn cache_capacity(mut self, bytes: usize) -> Self {
        self.cache_capacity = bytes;
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
}
