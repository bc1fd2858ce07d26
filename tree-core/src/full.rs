//! `FullMerkleTree`: every node stored densely, one slice per level.

use derive_where::derive_where;
use hasher::{Digest, Hasher};

use crate::mem::{InMemoryTree, MemNodes};
use crate::{Depth, EmptyRoots, NodeAddr, RehashConfig, TreeError};

/// A tree that stores all `2^(depth+1) - 1` nodes: fastest reads, memory fixed by depth
/// (32 B per node for BN254, so depth 20 is 64 MiB). Same roots and proofs as every other tree.
///
/// ```
/// use hasher::Keccak256Hasher;
/// use tree_core::{Depth, FullMerkleTree, MerkleTree, MerkleTreeExt};
///
/// let mut tree = FullMerkleTree::<Keccak256Hasher>::new(Depth::new(4)?)?;
/// tree.set_range(0, [[1u8; 32], [2u8; 32]])?;
/// let proof = tree.proof(1)?;
/// assert!(tree.verify_proof(&proof, &[2u8; 32]));
/// # Ok::<(), tree_core::TreeError>(())
/// ```
pub type FullMerkleTree<H> = InMemoryTree<H, DenseNodes<H>>;

impl<H: Hasher> FullMerkleTree<H> {
    /// An empty dense tree with the default rehash configuration.
    ///
    /// # Errors
    /// [`TreeError::AllocationFailed`] when the node storage cannot be reserved (a typed error,
    /// never an abort: depth 32 needs 256 GiB).
    pub fn new(depth: Depth) -> Result<Self, TreeError> {
        Self::with_config(depth, RehashConfig::default())
    }

    /// An empty dense tree with `config`.
    ///
    /// # Errors
    /// As [`FullMerkleTree::new`].
    pub fn with_config(depth: Depth, config: RehashConfig) -> Result<Self, TreeError> {
        Ok(Self::from_nodes(DenseNodes::new(depth)?, depth, config))
    }
}

/// Dense node storage: `levels[l]` holds the `capacity >> l` nodes of level `l`.
#[derive_where(Clone, Debug)]
pub struct DenseNodes<H: Hasher> {
    levels: Vec<Vec<Digest<H>>>,
}

impl<H: Hasher> DenseNodes<H> {
    fn new(depth: Depth) -> Result<Self, TreeError> {
        let node_size = u64::try_from(core::mem::size_of::<Digest<H>>()).unwrap_or(u64::MAX);
        let nodes = depth.capacity().saturating_mul(2).saturating_sub(1);
        let failed = || TreeError::AllocationFailed {
            depth: depth.get(),
            bytes: nodes.saturating_mul(node_size),
        };
        let empty = EmptyRoots::<H>::new(depth);
        let mut levels = Vec::with_capacity(usize::from(depth.get()) + 1);
        for level in 0..=depth.get() {
            let width = usize::try_from(depth.width(level)).map_err(|_| failed())?;
            let mut nodes = Vec::new();
            nodes.try_reserve_exact(width).map_err(|_| failed())?;
            nodes.resize(width, empty.at(level));
            levels.push(nodes);
        }
        Ok(Self { levels })
    }
}

/// Narrows an index already validated against the level's width (which fits in memory).
fn slot(index: u64) -> usize {
    usize::try_from(index).unwrap_or(usize::MAX)
}

impl<H: Hasher> MemNodes<H> for DenseNodes<H> {
    fn write_level(&mut self, level: u8, indices: &[u64], values: &[Digest<H>]) {
        let level = &mut self.levels[usize::from(level)];
        if let (Some(&first), Some(&last)) = (indices.first(), indices.last()) {
            if slot(last - first) + 1 == indices.len() {
                level[slot(first)..=slot(last)].copy_from_slice(values);
                return;
            }
        }
        for (&index, value) in indices.iter().zip(values) {
            level[slot(index)] = *value;
        }
    }

    fn get(&self, addr: NodeAddr) -> Digest<H> {
        self.levels[usize::from(addr.level)][slot(addr.index)]
    }

    fn heap_bytes(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.capacity() * core::mem::size_of::<Digest<H>>())
            .sum()
    }

    fn stored_nodes(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }
}
