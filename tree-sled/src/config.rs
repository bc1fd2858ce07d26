//! Typed configuration of the sled store.

use std::path::PathBuf;

use tree_core::persistent::{Durability, NodeCache};

/// sled's storage mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Mode {
    /// Smaller files, more compaction work.
    LowSpace,
    /// Faster writes, more disk.
    #[default]
    HighThroughput,
}

/// Where and how to open the database. `Default` is a temporary database (sled picks and later
/// removes the directory at open time; nothing touches the filesystem before `open`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct SledConfig {
    /// Database directory; `None` with `temporary` lets sled choose one.
    pub path: Option<PathBuf>,
    /// Remove the database when it is dropped.
    pub temporary: bool,
    /// sled's page-cache size in bytes.
    pub cache_capacity: u64,
    /// When batches become durable.
    pub durability: Durability,
    /// sled's space/throughput trade-off.
    pub mode: Mode,
    /// How many levels below the root the tree caches in memory (reads of the top of the tree
    /// for every proof and rehash); 0 disables the cache.
    pub cached_levels: u8,
    /// Also keep in memory every band of levels that uses at most this many node chunks
    /// (about 1 KiB each) at the tree's size: the top of the tree whatever its depth
    /// ([`NodeCache`](tree_core::persistent::NodeCache)); 0 turns it off.
    pub cached_band_chunks: u32,
}

impl Default for SledConfig {
    fn default() -> Self {
        Self {
            path: None,
            temporary: true,
            cache_capacity: 256 * 1024 * 1024,
            durability: Durability::Periodic { every_ms: 500 },
            mode: Mode::HighThroughput,
            cached_levels: NodeCache::default().top_levels,
            cached_band_chunks: NodeCache::default().band_chunks,
        }
    }
}

impl SledConfig {
    /// A persistent database at `path` with default settings.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: Some(path.into()),
            temporary: false,
            ..Self::default()
        }
    }

    /// A temporary database (removed on drop).
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

    /// Sets sled's page-cache size in bytes.
    #[must_use]
    pub fn cache_capacity(mut self, bytes: u64) -> Self {
        self.cache_capacity = bytes;
        self
    }

    /// Sets sled's mode.
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
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
