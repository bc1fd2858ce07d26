//! Roots of empty subtrees, computed once per tree.

use derive_where::derive_where;
use hasher::{Digest, Hasher};

use crate::Depth;

/// `roots[level]` is the root of an all-empty subtree of height `level` (`roots[0]` is the empty
/// leaf). A sparse tree answers every node it does not store from here.
#[derive_where(Clone, Debug, PartialEq, Eq)]
pub struct EmptyRoots<H: Hasher> {
    roots: Vec<Digest<H>>,
}

impl<H: Hasher> EmptyRoots<H> {
    /// Computes the `depth + 1` empty roots (`depth` hashes).
    #[must_use]
    pub fn new(depth: Depth) -> Self {
        let mut roots = Vec::with_capacity(usize::from(depth.get()) + 1);
        let mut node = H::empty_leaf();
        roots.push(node);
        for _ in 0..depth.get() {
            node = H::hash_pair(&node, &node);
            roots.push(node);
        }
        Self { roots }
    }

    /// The empty root at `level` (the empty leaf for 0). Levels above the depth return the top.
    #[must_use]
    pub fn at(&self, level: u8) -> Digest<H> {
        let i = usize::from(level).min(self.roots.len() - 1);
        self.roots[i]
    }
}
