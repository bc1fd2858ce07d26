//! The one Merkle proof type of every tree, and the one place a path is folded into a root.

use derive_where::derive_where;
use hasher::{Digest, Hasher};

/// A membership proof: the leaf index and the sibling of each node on the path, bottom-up.
///
/// `path_index()[i]` is 0 when our node is the left child at level `i` (zerokit's
/// `identity_path_index`), i.e. bit `i` of the index.
#[derive_where(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(bound(
        serialize = "Digest<H>: serde::Serialize",
        deserialize = "Digest<H>: serde::Deserialize<'de>"
    ))
)]
pub struct MerkleProof<H: Hasher> {
    index: u64,
    siblings: Vec<Digest<H>>,
}

impl<H: Hasher> MerkleProof<H> {
    /// A proof for leaf `index` with `siblings` ordered from the leaves up.
    #[must_use]
    pub fn new(index: u64, siblings: Vec<Digest<H>>) -> Self {
        Self { index, siblings }
    }

    /// The proven leaf's index.
    #[must_use]
    pub fn leaf_index(&self) -> u64 {
        self.index
    }

    /// The sibling path, bottom-up (RLN's `pathElements`).
    #[must_use]
    pub fn path_elements(&self) -> &[Digest<H>] {
        &self.siblings
    }

    /// Direction bits, bottom-up: 0 = our node is the left child (RLN's `identityPathIndex`).
    #[must_use]
    pub fn path_index(&self) -> Vec<u8> {
        (0..self.siblings.len())
            .map(|level| u8::from(level < 64 && (self.index >> level) & 1 == 1))
            .collect()
    }

    /// Number of levels the proof covers (the tree depth it was made for).
    #[must_use]
    pub fn len(&self) -> usize {
        self.siblings.len()
    }

    /// True for a proof of a depth-0 tree (no siblings).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.siblings.is_empty()
    }

    /// The root this path yields for `leaf`.
    #[must_use]
    pub fn compute_root(&self, leaf: &Digest<H>) -> Digest<H> {
        self.siblings
            .iter()
            .zip(self.path_index())
            .fold(*leaf, |node, (sibling, bit)| {
                if bit == 0 {
                    H::hash_pair(&node, sibling)
                } else {
                    H::hash_pair(sibling, &node)
                }
            })
    }

    /// True when `leaf` at this proof's index is a member of the tree with `root`.
    ///
    /// A proof whose index does not fit its length (bits that contradict the path) is not valid;
    /// "not valid" is `false`, never an error.
    #[must_use]
    pub fn verify(&self, root: &Digest<H>, leaf: &Digest<H>) -> bool {
        let fits = self.siblings.len() >= 64 || self.index >> self.siblings.len() == 0;
        fits && self.compute_root(leaf) == *root
    }
}
