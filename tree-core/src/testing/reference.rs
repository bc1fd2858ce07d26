//! The naive model: leaves in a map, every root recomputed from scratch.
//!
//! It re-states zerokit's rules directly, per call, without `UpdateBatch`, so the batch
//! validator and the rehash engine are checked against an independent reading of the rules.

use std::collections::{BTreeMap, BTreeSet};

use hasher::{Digest, Hasher};

use crate::{Depth, MerkleProof, TreeError};

/// A deliberately simple Merkle tree for small depths (root recomputation is `O(capacity)`).
#[derive_where::derive_where(Debug, Clone)]
pub struct ReferenceTree<H: Hasher> {
    depth: Depth,
    leaves: BTreeMap<u64, Digest<H>>,
    deleted: BTreeSet<u64>,
    next_index: u64,
    metadata: Vec<u8>,
}

impl<H: Hasher> ReferenceTree<H> {
    /// An empty model tree.
    #[must_use]
    pub fn new(depth: Depth) -> Self {
        Self {
            depth,
            leaves: BTreeMap::new(),
            deleted: BTreeSet::new(),
            next_index: 0,
            metadata: Vec::new(),
        }
    }

    fn cap(&self) -> u64 {
        self.depth.capacity()
    }

    /// `next_index`.
    #[must_use]
    pub fn next_index(&self) -> u64 {
        self.next_index
    }

    /// Deleted indices, increasing.
    #[must_use]
    pub fn empty_leaves_indices(&self) -> Vec<u64> {
        self.deleted.iter().copied().collect()
    }

    /// The metadata.
    #[must_use]
    pub fn metadata(&self) -> &[u8] {
        &self.metadata
    }

    /// Leaf value (empty where unset).
    #[must_use]
    pub fn leaf(&self, index: u64) -> Digest<H> {
        self.leaves
            .get(&index)
            .copied()
            .unwrap_or_else(H::empty_leaf)
    }

    /// All levels, bottom-up, recomputed from the leaves.
    #[must_use]
    pub fn levels(&self) -> Vec<Vec<Digest<H>>> {
        let mut levels = vec![(0..self.cap()).map(|i| self.leaf(i)).collect::<Vec<_>>()];
        while levels.last().map_or(0, Vec::len) > 1 {
            let below = levels.last().cloned().unwrap_or_default();
            levels.push(
                below
                    .chunks(2)
                    .map(|pair| H::hash_pair(&pair[0], &pair[1]))
                    .collect(),
            );
        }
        levels
    }

    /// The root.
    #[must_use]
    pub fn root(&self) -> Digest<H> {
        self.levels()
            .last()
            .and_then(|top| top.first().copied())
            .unwrap_or_else(H::empty_leaf)
    }

    /// A proof from the recomputed levels.
    #[must_use]
    pub fn proof(&self, index: u64) -> MerkleProof<H> {
        let levels = self.levels();
        let siblings = (0..usize::from(self.depth.get()))
            .map(|level| {
                let i = usize::try_from((index >> level) ^ 1).unwrap_or(usize::MAX);
                levels[level][i]
            })
            .collect();
        MerkleProof::new(index, siblings)
    }

    /// zerokit `set`.
    ///
    /// # Errors
    /// Index past capacity.
    pub fn set(&mut self, index: u64, leaf: Digest<H>) -> Result<(), TreeError> {
        if index >= self.cap() {
            return Err(TreeError::IndexOutOfBounds {
                index,
                capacity: self.cap(),
            });
        }
        self.leaves.insert(index, leaf);
        self.deleted.remove(&index);
        self.next_index = self.next_index.max(index + 1);
        Ok(())
    }

    fn check_range(&self, start: u64, len: usize) -> Result<(), TreeError> {
        let len = len as u64;
        let end = start
            .checked_add(len)
            .ok_or(TreeError::RangeOverflow { start, len })?;
        if end > self.cap() {
            return Err(TreeError::RangeOutOfBounds {
                start,
                end,
                capacity: self.cap(),
            });
        }
        Ok(())
    }

    /// zerokit `set_range`.
    ///
    /// # Errors
    /// Overflowing or out-of-capacity range.
    pub fn set_range(&mut self, start: u64, leaves: &[Digest<H>]) -> Result<(), TreeError> {
        self.check_range(start, leaves.len())?;
        for (i, leaf) in leaves.iter().enumerate() {
            self.set(start + i as u64, *leaf)?;
        }
        Ok(())
    }

    fn check_delete(&self, index: u64, next_index: u64) -> Result<(), TreeError> {
        if index >= self.cap() {
            return Err(TreeError::IndexOutOfBounds {
                index,
                capacity: self.cap(),
            });
        }
        if index >= next_index {
            return Err(TreeError::DeleteUnset { index, next_index });
        }
        Ok(())
    }

    /// zerokit `delete`.
    ///
    /// # Errors
    /// Index past capacity or not set.
    pub fn delete(&mut self, index: u64) -> Result<(), TreeError> {
        self.check_delete(index, self.next_index)?;
        self.leaves.insert(index, H::empty_leaf());
        self.deleted.insert(index);
        Ok(())
    }

    /// zerokit `update_next`.
    ///
    /// # Errors
    /// Full tree.
    pub fn update_next(&mut self, leaf: Digest<H>) -> Result<(), TreeError> {
        if self.next_index >= self.cap() {
            return Err(TreeError::TreeFull {
                capacity: self.cap(),
            });
        }
        self.set(self.next_index, leaf)
    }

    /// zerokit `override_range`: removals outside the written range, then the write.
    ///
    /// # Errors
    /// Nothing to do, bad range, bad removal.
    pub fn override_range(
        &mut self,
        start: u64,
        leaves: &[Digest<H>],
        removes: &[u64],
    ) -> Result<(), TreeError> {
        if leaves.is_empty() && removes.is_empty() {
            return Err(TreeError::EmptyOverride);
        }
        self.check_range(start, leaves.len())?;
        let end = start.saturating_add(leaves.len() as u64);
        let outside: BTreeSet<u64> = removes
            .iter()
            .copied()
            .filter(|&i| leaves.is_empty() || i < start || i >= end)
            .collect();
        for &index in removes {
            if index >= self.cap() {
                return Err(TreeError::IndexOutOfBounds {
                    index,
                    capacity: self.cap(),
                });
            }
        }
        for &index in &outside {
            self.check_delete(index, self.next_index)?;
        }
        for index in outside {
            self.delete(index)?;
        }
        self.set_range(start, leaves)
    }

    /// Replaces the metadata.
    pub fn set_metadata(&mut self, bytes: &[u8]) {
        self.metadata = bytes.to_vec();
    }
}
