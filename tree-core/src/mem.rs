//! The in-memory tree: one `MerkleTree` implementation over a pluggable node store.
//!
//! [`FullMerkleTree`](crate::FullMerkleTree) and [`OptimalMerkleTree`](crate::OptimalMerkleTree)
//! are this type with a dense or a sparse store, so apply, validation and bookkeeping are written
//! once.

use std::convert::Infallible;

use derive_where::derive_where;
use hasher::{Digest, Hasher};

use crate::rehash::{apply_writes, NodeLevels};
use crate::state::Bookkeeping;
use crate::{Depth, MerkleProof, MerkleTree, NodeAddr, RehashConfig, TreeError, UpdateBatch};

/// What an in-memory node store adds to [`NodeLevels`]: infallible reads.
pub trait MemNodes<H: Hasher>: NodeLevels<H, Error = Infallible> {
    /// The node at a valid `addr`.
    fn get(&self, addr: NodeAddr) -> Digest<H>;
    /// Heap bytes held for nodes (capacity, not just length), for memory reports.
    fn heap_bytes(&self) -> usize;
    /// Number of node values held.
    fn stored_nodes(&self) -> usize;
}

/// An in-memory Merkle tree over node store `S`.
#[derive_where(Clone, Debug; S)]
pub struct InMemoryTree<H: Hasher, S> {
    nodes: S,
    book: Bookkeeping,
    _hasher: core::marker::PhantomData<H>,
}

impl<H: Hasher, S: MemNodes<H>> InMemoryTree<H, S> {
    pub(crate) fn from_parts(nodes: S, depth: Depth, config: RehashConfig) -> Self {
        Self {
            nodes,
            book: Bookkeeping::new(depth, config),
            _hasher: core::marker::PhantomData,
        }
    }

    #[cfg(test)]
    pub(crate) fn nodes_for_test(&self) -> &S {
        &self.nodes
    }

    /// Heap bytes held for nodes.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.nodes.heap_bytes()
    }

    /// Number of node values held.
    #[must_use]
    pub fn stored_nodes(&self) -> usize {
        self.nodes.stored_nodes()
    }
}

impl<H: Hasher, S: MemNodes<H>> MerkleTree for InMemoryTree<H, S> {
    type Hasher = H;
    type Error = TreeError;

    fn depth(&self) -> Depth {
        self.book.depth
    }

    fn next_index(&self) -> u64 {
        self.book.next_index
    }

    fn root(&self) -> Digest<H> {
        self.nodes.get(NodeAddr {
            level: self.book.depth.get(),
            index: 0,
        })
    }

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, TreeError> {
        self.book.depth.check_addr(addr)?;
        Ok(self.nodes.get(addr))
    }

    fn empty_leaves_indices(&self) -> Result<Vec<u64>, TreeError> {
        Ok(self.book.deleted.iter().copied().collect())
    }

    fn metadata(&self) -> Result<Vec<u8>, TreeError> {
        Ok(self.book.metadata.clone())
    }

    fn apply(&mut self, batch: UpdateBatch<H>) -> Result<(), TreeError> {
        let prepared = batch.validate(self.book.depth, self.book.next_index)?;
        let Ok(()) = apply_writes::<H, S>(
            &mut self.nodes,
            self.book.depth,
            prepared.writes(),
            &self.book.config,
        );
        self.book.record(&prepared);
        Ok(())
    }

    /// Direct reads from the node store (no per-level bounds check or `Result`).
    fn proof(&self, index: u64) -> Result<MerkleProof<H>, TreeError> {
        self.book.depth.check_index(index)?;
        let siblings = (0..self.book.depth.get())
            .map(|level| {
                self.nodes.get(NodeAddr {
                    level,
                    index: (index >> level) ^ 1,
                })
            })
            .collect();
        Ok(MerkleProof::new(index, siblings))
    }

    fn rehash_config(&self) -> &RehashConfig {
        &self.book.config
    }

    fn set_rehash_config(&mut self, config: RehashConfig) {
        self.book.config = config;
    }
}
