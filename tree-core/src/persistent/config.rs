//! When a committed batch becomes durable: one policy, honoured by every engine.

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
