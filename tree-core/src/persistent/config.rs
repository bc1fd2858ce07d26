//! When a committed batch becomes durable, and which nodes stay in memory: one policy each,
//! honoured by every engine.

/// Which nodes of a persistent tree stay in memory once read (kept current by every commit): the
/// top of the tree, where every proof and every rehash reads. Memory is bounded by what is in
/// use, never by the capacity: a band is cached only while it uses at most `band_chunks` chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeCache {
    /// Levels below the root always cached (0: none).
    pub top_levels: u8,
    /// Also cache every band of levels (see [`ChunkShape`](super::layout::ChunkShape)) using at
    /// most this many chunks (about 1 KiB each) at the tree's size: the top of a tree that grows
    /// from index 0, whatever its depth. A proof then reads only the bands below. 0: only
    /// `top_levels`.
    pub band_chunks: u32,
}

impl Default for NodeCache {
    /// The top 14 levels, and the bands that fit 4096 chunks (about 4 MiB per band): at 2^24
    /// leaves a proof reads two store entries, at 2^20 one.
    fn default() -> Self {
        Self {
            top_levels: 14,
            band_chunks: 4096,
        }
    }
}

impl NodeCache {
    /// Only the top `levels` levels (tests that want reads to reach the store).
    #[must_use]
    pub fn top(levels: u8) -> Self {
        Self {
            top_levels: levels,
            band_chunks: 0,
        }
    }
}

/// When an applied batch becomes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", deny_unknown_fields)
)]
pub enum Durability {
    /// fsync after every apply: a crash loses nothing that `apply` acknowledged.
    EveryCommit,
    /// Durable at least every `every_ms` milliseconds (sled flushes in the background; redb
    /// makes the first commit after the interval durable, and a flush or close makes everything
    /// durable): a crash can lose the batches acknowledged since the last durability point, each
    /// lost batch whole; the tree reopens at the state after some earlier batch. Call `flush()`
    /// for a durability point.
    Periodic {
        /// Flush interval in milliseconds.
        every_ms: u64,
    },
}
