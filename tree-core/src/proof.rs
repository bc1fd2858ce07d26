//! The one Merkle proof type of every tree, and the one place a path is folded into a root.

use derive_where::derive_where;
use hasher::{Digest, DigestCodec, Hasher};

use crate::{Depth, TreeError};

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

    /// A proof from RLN's parts: the sibling path and its direction bits (`identityPathIndex`,
    /// 0 = our node is the left child), as circuits and zerokit's witnesses carry them.
    ///
    /// # Errors
    /// [`TreeError::MalformedProof`] when the lengths differ, a bit is not 0 or 1, or the path is
    /// longer than [`crate::MAX_DEPTH`].
    pub fn from_path(siblings: Vec<Digest<H>>, path_index: &[u8]) -> Result<Self, TreeError> {
        let malformed = |reason| TreeError::MalformedProof { reason };
        if siblings.len() != path_index.len() {
            return Err(malformed("path elements and path bits differ in length"));
        }
        if siblings.len() > usize::from(crate::MAX_DEPTH) {
            return Err(malformed("path longer than the deepest tree"));
        }
        let mut index = 0u64;
        for (level, &bit) in path_index.iter().enumerate() {
            match bit {
                0 => {}
                1 => index |= 1 << level,
                _ => return Err(malformed("path bit is neither 0 nor 1")),
            }
        }
        Ok(Self::new(index, siblings))
    }
}

impl<H: DigestCodec> MerkleProof<H> {
    /// The proof's bytes: depth (`u8`), leaf index (`u64` big-endian), then each sibling in the
    /// hasher's canonical encoding, bottom-up.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.siblings.len() * H::LEN);
        // Proofs are made by trees of depth <= MAX_DEPTH (63), so the length fits a byte.
        out.push(u8::try_from(self.siblings.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&self.index.to_be_bytes());
        for sibling in &self.siblings {
            out.extend_from_slice(&H::encode_to_vec(sibling));
        }
        out
    }

    /// Reads [`to_bytes`](Self::to_bytes) for a tree of `depth`: a proof made for another depth
    /// is refused, never folded into some other root.
    ///
    /// # Errors
    /// [`TreeError::MalformedProof`] for another depth, a wrong length, an index that does not
    /// fit the depth or a non-canonical sibling.
    pub fn from_bytes(bytes: &[u8], depth: Depth) -> Result<Self, TreeError> {
        let malformed = |reason| TreeError::MalformedProof { reason };
        let (&levels, rest) = bytes.split_first().ok_or(malformed("empty"))?;
        if levels != depth.get() {
            return Err(malformed("proof is for another depth"));
        }
        if rest.len() != 8 + usize::from(levels) * H::LEN {
            return Err(malformed("length does not match the depth"));
        }
        let (index, siblings) = rest.split_at(8);
        let mut index_bytes = [0u8; 8];
        index_bytes.copy_from_slice(index);
        let index = u64::from_be_bytes(index_bytes);
        if index >= depth.capacity() {
            return Err(malformed("leaf index does not fit the depth"));
        }
        let siblings = siblings
            .chunks_exact(H::LEN)
            .map(|chunk| {
                H::decode(chunk).map_err(|_| malformed("sibling is not a canonical digest"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(index, siblings))
    }
}
