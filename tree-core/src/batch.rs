//! `UpdateBatch`: the one mutating primitive, and the one validator every tree uses.

use std::collections::BTreeMap;

use derive_where::derive_where;
use hasher::{Digest, Hasher};

use crate::{Depth, TreeError};

/// One recorded operation, in call order. Kept as recorded (a run stays a run) so validation can
/// report the error the caller's own call would have produced.
#[derive_where(Clone, Debug, PartialEq, Eq)]
enum BatchOp<H: Hasher> {
    Set {
        index: u64,
        leaf: Digest<H>,
    },
    Delete {
        index: u64,
    },
    Range {
        start: u64,
        leaves: Vec<Digest<H>>,
    },
    /// `override_range` with nothing to write and nothing to remove: refused at validation.
    EmptyOverride,
}

/// A set of leaf changes applied to a tree as one unit: one rehash and, in the persistent tree,
/// one atomic write.
///
/// Operations are recorded in call order and the last write to an index wins. A delete resets the
/// leaf to the empty value and records the slot as deleted; it never lowers `next_index`.
///
/// ```
/// use hasher::Keccak256Hasher;
/// use tree_core::UpdateBatch;
///
/// let mut batch = UpdateBatch::<Keccak256Hasher>::new();
/// batch.set_range(0, [[1u8; 32], [2u8; 32], [3u8; 32]]).delete(1).set(1, [9u8; 32]);
/// batch.metadata(b"block 17".to_vec());
/// assert_eq!(batch.len(), 5); // recorded writes and deletes, before de-duplication
/// ```
#[derive_where(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpdateBatch<H: Hasher> {
    ops: Vec<BatchOp<H>>,
    metadata: Option<Vec<u8>>,
    records: Records,
}

/// Keyed records a batch writes (`None` removes the key), the last write of each key kept.
pub type Records = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// The longest record key a tree stores.
pub const MAX_RECORD_KEY: usize = 64;

impl<H: Hasher> UpdateBatch<H> {
    /// An empty batch (applying it changes nothing).
    #[must_use]
    pub fn new() -> Self {
        Self {
            ops: Vec::new(),
            metadata: None,
            records: Records::new(),
        }
    }

    /// Writes `leaf` at `index`.
    pub fn set(&mut self, index: u64, leaf: Digest<H>) -> &mut Self {
        self.ops.push(BatchOp::Set { index, leaf });
        self
    }

    /// Writes `leaves` contiguously from `start`.
    pub fn set_range(
        &mut self,
        start: u64,
        leaves: impl IntoIterator<Item = Digest<H>>,
    ) -> &mut Self {
        self.ops.push(BatchOp::Range {
            start,
            leaves: leaves.into_iter().collect(),
        });
        self
    }

    /// Resets `index` to the empty leaf and records it as deleted.
    pub fn delete(&mut self, index: u64) -> &mut Self {
        self.ops.push(BatchOp::Delete { index });
        self
    }

    /// zerokit's `override_range`: resets every index in `removes`, then writes `leaves` from
    /// `start`, so a removal inside the written range is overwritten ("writes win on overlap").
    /// Both empty is refused when the batch is validated ([`TreeError::EmptyOverride`]).
    pub fn override_range(
        &mut self,
        start: u64,
        leaves: impl IntoIterator<Item = Digest<H>>,
        removes: impl IntoIterator<Item = u64>,
    ) -> &mut Self {
        let leaves: Vec<_> = leaves.into_iter().collect();
        let before = self.ops.len();
        for index in removes {
            self.ops.push(BatchOp::Delete { index });
        }
        if leaves.is_empty() && self.ops.len() == before {
            self.ops.push(BatchOp::EmptyOverride);
        } else {
            // Even with no leaves the range is recorded: zerokit checks `start` against capacity.
            self.ops.push(BatchOp::Range { start, leaves });
        }
        self
    }

    /// Appends `other`'s operations after this batch's (its metadata, when set, replaces
    /// this batch's): the batch that applies one and then the other.
    pub fn append(&mut self, other: Self) -> &mut Self {
        self.ops.extend(other.ops);
        if other.metadata.is_some() {
            self.metadata = other.metadata;
        }
        self.records.extend(other.records);
        self
    }

    /// Replaces the tree's opaque metadata with `bytes` as part of this batch (so, in the
    /// persistent tree, e.g. "last processed block" lands atomically with the leaves it covers).
    pub fn metadata(&mut self, bytes: Vec<u8>) -> &mut Self {
        self.metadata = Some(bytes);
        self
    }

    /// Sets record `key` to `value` as part of this batch: a keyed side table (a chain
    /// follower's members by id) that lands in the batch's commit, is recorded in the open
    /// checkpoint's undo frame and rewinds with the leaves. Keys are 1 to [`MAX_RECORD_KEY`]
    /// bytes; the last write of a key wins.
    pub fn put_record(&mut self, key: &[u8], value: Vec<u8>) -> &mut Self {
        self.records.insert(key.to_vec(), Some(value));
        self
    }

    /// Removes record `key` as part of this batch (see [`put_record`](Self::put_record)).
    pub fn remove_record(&mut self, key: &[u8]) -> &mut Self {
        self.records.insert(key.to_vec(), None);
        self
    }

    /// Number of leaf writes and deletes recorded (before de-duplication).
    #[must_use]
    pub fn len(&self) -> usize {
        self.ops
            .iter()
            .map(|op| match op {
                BatchOp::Range { leaves, .. } => leaves.len(),
                BatchOp::EmptyOverride => 0,
                BatchOp::Set { .. } | BatchOp::Delete { .. } => 1,
            })
            .sum()
    }

    /// True when the batch records no leaf change, no metadata and no record.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.metadata.is_none() && self.records.is_empty()
    }

    /// Checks the batch against a tree of `depth` whose `next_index` is `next_index`, and turns it
    /// into the sorted, de-duplicated writes every tree applies. This is the only validator.
    ///
    /// Rules (zerokit-compatible): every write lies below capacity and a range's end does not
    /// overflow; `override_range` with nothing to do is refused; a delete that survives (is not
    /// overwritten later in the batch) must target an index below `next_index` as it stands at
    /// that point of the batch (so "append 4, then delete the 3rd" is one valid batch, exactly as
    /// the calls one by one). The new `next_index` is the maximum of the old one and one past
    /// every written index.
    ///
    /// # Errors
    /// [`TreeError::EmptyOverride`], [`TreeError::RangeOverflow`], [`TreeError::RangeOutOfBounds`],
    /// [`TreeError::IndexOutOfBounds`], [`TreeError::DeleteUnset`], [`TreeError::RecordKey`]: the
    /// first violated rule, in that order of checks. Nothing is applied when an error is returned.
    pub fn validate(self, depth: Depth, next_index: u64) -> Result<PreparedBatch<H>, TreeError> {
        let capacity = depth.capacity();
        if let Some(key) = self
            .records
            .keys()
            .find(|key| key.is_empty() || key.len() > MAX_RECORD_KEY)
        {
            return Err(TreeError::RecordKey { len: key.len() });
        }
        // Pass 1: writes and ranges, as each call would have reported them.
        for op in &self.ops {
            match op {
                BatchOp::EmptyOverride => return Err(TreeError::EmptyOverride),
                BatchOp::Set { index, .. } => depth.check_index(*index)?,
                BatchOp::Range { start, leaves } => {
                    range_end(*start, leaves.len(), capacity)?;
                }
                BatchOp::Delete { .. } => {}
            }
        }
        // Pass 2: deletes past capacity.
        for op in &self.ops {
            if let BatchOp::Delete { index } = op {
                depth.check_index(*index)?;
            }
        }
        // Flatten in call order, then sort (stable) and keep the last write of each index.
        // A delete is checked against `next_index` at its own point in the batch; one that fails
        // is remembered in `unset` (rare, so a small map) and forgiven only if a later write to
        // the same index overrides it.
        let mut running_next = next_index;
        let mut unset: BTreeMap<u64, u64> = BTreeMap::new();
        let mut writes: Vec<(u64, Option<Digest<H>>)> = Vec::with_capacity(self.len());
        for op in self.ops {
            match op {
                BatchOp::Set { index, leaf } => {
                    if !unset.is_empty() {
                        unset.remove(&index);
                    }
                    running_next = running_next.max(index + 1);
                    writes.push((index, Some(leaf)));
                }
                BatchOp::Delete { index } => {
                    if index >= running_next {
                        unset.insert(index, running_next);
                    } else if !unset.is_empty() {
                        unset.remove(&index);
                    }
                    writes.push((index, None));
                }
                BatchOp::Range { start, leaves } => {
                    let end = start + leaves.len() as u64; // checked in pass 1
                    if !unset.is_empty() {
                        let overwritten: Vec<u64> =
                            unset.range(start..end).map(|(&i, _)| i).collect();
                        for index in overwritten {
                            unset.remove(&index);
                        }
                    }
                    writes.extend(
                        (start..)
                            .zip(leaves)
                            .map(|(index, leaf)| (index, Some(leaf))),
                    );
                    if end > start {
                        running_next = running_next.max(end);
                    }
                }
                BatchOp::EmptyOverride => {}
            }
        }
        // Pass 3: a surviving delete must target a leaf set before it (in the tree or earlier in
        // the batch).
        if let Some((&index, &next_index)) = unset.iter().next() {
            return Err(TreeError::DeleteUnset { index, next_index });
        }
        if !writes.windows(2).all(|w| w[0].0 < w[1].0) {
            writes.sort_by_key(|w| w.0);
            // Keep the last write of each index, in place.
            let mut kept = 0;
            for i in 0..writes.len() {
                if kept > 0 && writes[kept - 1].0 == writes[i].0 {
                    writes[kept - 1] = writes[i];
                } else {
                    writes[kept] = writes[i];
                    kept += 1;
                }
            }
            writes.truncate(kept);
        }
        Ok(PreparedBatch {
            writes,
            next_index: running_next,
            metadata: self.metadata,
            records: self.records,
        })
    }
}

/// `start + len`, checked against overflow and capacity. The one place this arithmetic lives.
///
/// # Errors
/// [`TreeError::RangeOverflow`] or [`TreeError::RangeOutOfBounds`].
pub fn range_end(start: u64, len: usize, capacity: u64) -> Result<u64, TreeError> {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    let end = start
        .checked_add(len)
        .ok_or(TreeError::RangeOverflow { start, len })?;
    if end > capacity {
        return Err(TreeError::RangeOutOfBounds {
            start,
            end,
            capacity,
        });
    }
    Ok(end)
}

/// A validated batch: strictly increasing leaf indices, each with its new value (`None` =
/// deleted, i.e. the empty leaf), plus the resulting `next_index` and metadata.
#[derive_where(Clone, Debug, PartialEq, Eq)]
pub struct PreparedBatch<H: Hasher> {
    writes: Vec<(u64, Option<Digest<H>>)>,
    next_index: u64,
    metadata: Option<Vec<u8>>,
    records: Records,
}

impl<H: Hasher> PreparedBatch<H> {
    /// The writes, sorted by index with no duplicates; `None` is a delete.
    #[must_use]
    pub fn writes(&self) -> &[(u64, Option<Digest<H>>)] {
        &self.writes
    }

    /// The tree's `next_index` once the batch is applied.
    #[must_use]
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// The metadata the batch sets, if any.
    #[must_use]
    pub fn metadata(&self) -> Option<&[u8]> {
        self.metadata.as_deref()
    }

    /// The records the batch writes, by key (`None` removes).
    #[must_use]
    pub fn records(&self) -> &Records {
        &self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hasher::Keccak256Hasher as K;

    fn depth3() -> Depth {
        Depth::new(3).unwrap()
    }

    #[test]
    fn last_write_wins_and_writes_win_over_removes() {
        let mut b = UpdateBatch::<K>::new();
        b.override_range(2, [[1; 32], [2; 32]], [0, 3, 5]);
        let p = b.validate(depth3(), 6).unwrap();
        assert_eq!(
            p.writes(),
            &[(0, None), (2, Some([1; 32])), (3, Some([2; 32])), (5, None)]
        );
        assert_eq!(p.next_index(), 6);
    }

    #[test]
    fn remove_inside_written_range_may_exceed_next_index() {
        let mut b = UpdateBatch::<K>::new();
        b.override_range(0, [[1; 32], [2; 32]], [1]);
        assert_eq!(b.validate(depth3(), 0).unwrap().next_index(), 2);
    }

    #[test]
    fn deletes_are_checked_at_their_point_in_the_batch() {
        let mut b = UpdateBatch::<K>::new();
        b.set_range(0, [[1; 32]; 4]).delete(2);
        let p = b.validate(depth3(), 0).unwrap();
        assert_eq!(p.writes()[2], (2, None));
        assert_eq!(p.next_index(), 4);
        // A delete before the write that sets its index fails, unless that write overrides it.
        let mut b = UpdateBatch::<K>::new();
        b.delete(2).set_range(0, [[1; 32]; 4]);
        assert_eq!(
            b.validate(depth3(), 0).unwrap().writes()[2],
            (2, Some([1; 32]))
        );
        let mut b = UpdateBatch::<K>::new();
        b.delete(5).set_range(0, [[1; 32]; 4]);
        assert_eq!(
            b.validate(depth3(), 0),
            Err(TreeError::DeleteUnset {
                index: 5,
                next_index: 0
            })
        );
    }

    #[test]
    fn errors() {
        let mut b = UpdateBatch::<K>::new();
        b.override_range(0, [], []);
        assert_eq!(b.validate(depth3(), 0), Err(TreeError::EmptyOverride));
        let mut b = UpdateBatch::<K>::new();
        b.set_range(7, [[1; 32], [2; 32]]);
        assert_eq!(
            b.validate(depth3(), 0),
            Err(TreeError::RangeOutOfBounds {
                start: 7,
                end: 9,
                capacity: 8
            })
        );
        let mut b = UpdateBatch::<K>::new();
        b.set_range(u64::MAX, [[1; 32]]);
        assert_eq!(
            b.validate(depth3(), 0),
            Err(TreeError::RangeOverflow {
                start: u64::MAX,
                len: 1
            })
        );
        let mut b = UpdateBatch::<K>::new();
        b.delete(4);
        assert_eq!(
            b.validate(depth3(), 4),
            Err(TreeError::DeleteUnset {
                index: 4,
                next_index: 4
            })
        );
        let mut b = UpdateBatch::<K>::new();
        b.delete(8);
        assert_eq!(
            b.validate(depth3(), 4),
            Err(TreeError::IndexOutOfBounds {
                index: 8,
                capacity: 8
            })
        );
    }
}
