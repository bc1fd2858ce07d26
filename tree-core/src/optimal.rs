//! `OptimalMerkleTree`: only touched nodes are stored; memory grows with the leaves set.

use derive_where::derive_where;
use hasher::{Digest, Hasher};
use rustc_hash::FxHashMap;

use crate::mem::{InMemoryTree, MemNodes};
use crate::{Depth, EmptyRoots, NodeAddr, RehashConfig};

/// A sparse tree: nodes never written read as the empty subtree of their level, so an empty
/// depth-32 tree costs a few hundred bytes and no allocation is proportional to capacity.
///
/// Each level keeps a dense prefix (indices `0..n` written so far, in order: membership sets grow
/// from index 0, so this is where nearly every node lives, at 32 B per BN254 node) and an
/// `FxHashMap` for nodes written beyond it (≈ 41–94 B each, by hashbrown's load factor). The map
/// holds only nodes that differ from the empty subtree; it drains into the prefix as the prefix
/// reaches them.
///
/// ```
/// use hasher::Keccak256Hasher;
/// use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
///
/// let mut tree = OptimalMerkleTree::<Keccak256Hasher>::new(Depth::new(32)?);
/// tree.set(1 << 31, [7u8; 32])?;
/// assert_eq!(tree.next_index(), (1 << 31) + 1);
/// assert!(tree.stored_nodes() <= 33);
/// # Ok::<(), tree_core::TreeError>(())
/// ```
pub type OptimalMerkleTree<H> = InMemoryTree<H, SparseNodes<H>>;

impl<H: Hasher> OptimalMerkleTree<H> {
    /// An empty sparse tree with the default rehash configuration.
    #[must_use]
    pub fn new(depth: Depth) -> Self {
        Self::with_config(depth, RehashConfig::default())
    }

    /// An empty sparse tree with `config`.
    #[must_use]
    pub fn with_config(depth: Depth, config: RehashConfig) -> Self {
        Self::from_nodes(SparseNodes::new(depth), depth, config)
    }
}

/// One level of a sparse tree.
#[derive_where(Clone, Debug)]
struct SparseLevel<H: Hasher> {
    prefix: Vec<Digest<H>>,
    beyond: FxHashMap<u64, Digest<H>>,
    empty: Digest<H>,
}

impl<H: Hasher> SparseLevel<H> {
    fn prefix_len(&self) -> u64 {
        u64::try_from(self.prefix.len()).unwrap_or(u64::MAX)
    }

    fn get(&self, index: u64) -> Digest<H> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.prefix.get(i))
            .or_else(|| self.beyond.get(&index))
            .copied()
            .unwrap_or(self.empty)
    }

    fn set(&mut self, index: u64, value: Digest<H>) {
        let len = self.prefix_len();
        if index < len {
            if let Some(slot) = usize::try_from(index)
                .ok()
                .and_then(|i| self.prefix.get_mut(i))
            {
                *slot = value;
            }
        } else if index == len {
            self.prefix.push(value);
            while let Some(next) = self.beyond.remove(&self.prefix_len()) {
                self.prefix.push(next);
            }
        } else if value == self.empty {
            self.beyond.remove(&index);
        } else {
            self.beyond.insert(index, value);
        }
    }
}

/// Sparse node storage, one sparse level (a map of its non-empty nodes) per level.
#[derive_where(Clone, Debug)]
pub struct SparseNodes<H: Hasher> {
    levels: Vec<SparseLevel<H>>,
}

impl<H: Hasher> SparseNodes<H> {
    fn new(depth: Depth) -> Self {
        let empty = EmptyRoots::<H>::new(depth);
        Self {
            levels: (0..=depth.get())
                .map(|level| SparseLevel {
                    prefix: Vec::new(),
                    beyond: FxHashMap::default(),
                    empty: empty.at(level),
                })
                .collect(),
        }
    }
}

impl<H: Hasher> MemNodes<H> for SparseNodes<H> {
    fn write_level(&mut self, level: u8, indices: &[u64], values: &[Digest<H>]) {
        let level = &mut self.levels[usize::from(level)];
        for (&index, &value) in indices.iter().zip(values) {
            level.set(index, value);
        }
    }

    fn get(&self, addr: NodeAddr) -> Digest<H> {
        self.levels[usize::from(addr.level)].get(addr.index)
    }

    fn heap_bytes(&self) -> usize {
        let node = core::mem::size_of::<Digest<H>>();
        let entry = core::mem::size_of::<(u64, Digest<H>)>() + 1; // + hashbrown control byte
        self.levels
            .iter()
            .map(|l| l.prefix.capacity() * node + l.beyond.capacity() * entry)
            .sum()
    }

    fn stored_nodes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.prefix.len() + l.beyond.len())
            .sum()
    }
}

/// Sparse levels never allocate before the first write.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MerkleTree, MerkleTreeExt};
    use hasher::Keccak256Hasher as K;

    #[test]
    fn empty_deep_tree_allocates_nothing() {
        let tree = OptimalMerkleTree::<K>::new(Depth::new(63).unwrap());
        assert_eq!(tree.heap_bytes(), 0);
    }

    #[test]
    fn beyond_map_drains_into_prefix() {
        let mut tree = OptimalMerkleTree::<K>::new(Depth::new(4).unwrap());
        tree.set(2, [2; 32]).unwrap();
        tree.set(1, [1; 32]).unwrap();
        tree.set(0, [9; 32]).unwrap();
        assert_eq!(tree.nodes_for_test().levels[0].prefix.len(), 3);
        assert!(tree.nodes_for_test().levels[0].beyond.is_empty());
        assert_eq!(tree.get(2).unwrap(), [2; 32]);
    }
}
