//! zk-kit's LeanIMT (Semaphore v4's groups) on the one engine: a tree of [`Lean<H>`] nodes
//! (absent nodes; a lone left child carried up) filled from index 0, with zk-kit's operations
//! and its proof shape.
//!
//! The hashing rule is all the engine needs: a depth-`d` engine tree of lean nodes holds every
//! LeanIMT of up to `2^d` leaves and its root is the LeanIMT's root (the levels above the
//! LeanIMT's own depth carry it up unchanged). So a LeanIMT is as persistent (sled, redb), as
//! checkpointed and as parallel as any other tree. What this module adds is zk-kit's surface:
//! inserts without gaps, updates and removals only of inserted leaves, and proofs that carry only
//! the siblings of present nodes, with the index as zk-kit encodes it (the direction bits of
//! those siblings only).
//!
//! ```
//! use hasher::{Fr, Lean, PoseidonHasher};
//! use tree_core::lean::LeanImt;
//! use tree_core::{Depth, OptimalMerkleTree};
//!
//! let mut group = LeanImt::new(OptimalMerkleTree::<Lean<PoseidonHasher>>::new(Depth::new(32)?));
//! group.insert_many(&[Fr::from(1u64), Fr::from(2u64), Fr::from(3u64)])?;
//! assert_eq!(group.depth(), 2);
//! let proof = group.proof(2)?;
//! assert_eq!(proof.siblings.len(), 1); // leaf 2 has no right sibling: one level is skipped
//! assert!(proof.verify());
//! group.remove(0)?; // zk-kit's removal: the leaf becomes 0
//! assert_eq!(group.leaf(0)?, Fr::from(0u64));
//! # Ok::<(), tree_core::TreeError>(())
//! ```

use derive_where::derive_where;
use hasher::{Digest, Hasher, Lean, LeanHash};

use crate::{MerkleTree, MerkleTreeExt, TreeError, UpdateBatch};

/// A LeanIMT over any engine tree of [`Lean<H>`] nodes (in memory, sled, redb).
#[derive(Debug, Clone)]
pub struct LeanImt<T> {
    tree: T,
}

/// A LeanIMT membership proof as zk-kit's `MerkleProof`: the siblings of the present nodes on
/// the path, bottom-up, and `index` whose bit `i` says whether sibling `i` is on the left.
#[derive_where(Clone, Debug, PartialEq, Eq)]
pub struct LeanProof<H: Hasher> {
    /// The root the proof is for.
    pub root: Digest<H>,
    /// The proven leaf.
    pub leaf: Digest<H>,
    /// zk-kit's index: bit `i` set when sibling `i` is the left child.
    pub index: u64,
    /// Siblings of present nodes only, bottom-up.
    pub siblings: Vec<Digest<H>>,
}

impl<H: Hasher> LeanProof<H> {
    /// zk-kit's `verifyProof`: folds the leaf with the siblings and compares with the root.
    #[must_use]
    pub fn verify(&self) -> bool {
        if self.siblings.len() < 64 && self.index >> self.siblings.len() != 0 {
            return false;
        }
        let root = self
            .siblings
            .iter()
            .enumerate()
            .fold(self.leaf, |node, (i, sibling)| {
                if i < 64 && (self.index >> i) & 1 == 1 {
                    H::hash_pair(sibling, &node)
                } else {
                    H::hash_pair(&node, sibling)
                }
            });
        root == self.root
    }
}

impl<H, T> LeanImt<T>
where
    H: LeanHash,
    T: MerkleTree<Hasher = Lean<H>>,
{
    /// The LeanIMT held by `tree` (empty, or one this module filled: leaves from 0, no gaps).
    pub fn new(tree: T) -> Self {
        Self { tree }
    }

    /// The engine tree underneath: checkpoints, history, records, integrity checks.
    pub fn tree(&self) -> &T {
        &self.tree
    }

    /// The engine tree underneath, mutably, for checkpoints, rewinds and records. Leaf writes
    /// through it bypass zk-kit's rules (gaps, removals by absence): use this type's methods.
    pub fn tree_mut(&mut self) -> &mut T {
        &mut self.tree
    }

    /// The engine tree, unwrapped.
    pub fn into_inner(self) -> T {
        self.tree
    }

    /// Number of leaves inserted (removed ones included, as zk-kit counts).
    pub fn size(&self) -> u64 {
        self.tree.next_index()
    }

    /// zk-kit's depth: the levels a proof can have, `⌈log₂ size⌉` (0 for 0 or 1 leaves).
    pub fn depth(&self) -> u8 {
        let size = self.size();
        if size <= 1 {
            return 0;
        }
        // `64 - leading_zeros` is at most 64.
        u8::try_from(64 - (size - 1).leading_zeros()).unwrap_or(u8::MAX)
    }

    /// The root; `None` for an empty LeanIMT.
    pub fn root(&self) -> Option<Digest<H>> {
        self.tree.root()
    }

    /// Appends `leaf`.
    ///
    /// # Errors
    /// [`TreeError::TreeFull`] past the engine tree's capacity; storage errors.
    pub fn insert(&mut self, leaf: Digest<H>) -> Result<(), T::Error> {
        self.tree.update_next(Some(leaf))
    }

    /// Appends `leaves` in one batch (one rehash of each touched level).
    ///
    /// # Errors
    /// [`TreeError::EmptyInsert`] for no leaves; [`TreeError::RangeOutOfBounds`] past capacity;
    /// storage errors.
    pub fn insert_many(&mut self, leaves: &[Digest<H>]) -> Result<(), T::Error> {
        if leaves.is_empty() {
            return Err(TreeError::EmptyInsert.into());
        }
        let start = self.size();
        self.tree
            .set_range(start, leaves.iter().map(|leaf| Some(*leaf)))
    }

    fn inserted(&self, index: u64) -> Result<(), T::Error> {
        let size = self.size();
        if index >= size {
            return Err(TreeError::LeafNotInserted { index, size }.into());
        }
        Ok(())
    }

    /// Replaces the leaf at `index`.
    ///
    /// # Errors
    /// [`TreeError::LeafNotInserted`] unless `index < size`; storage errors.
    pub fn update(&mut self, index: u64, leaf: Digest<H>) -> Result<(), T::Error> {
        self.inserted(index)?;
        self.tree.set(index, Some(leaf))
    }

    /// zk-kit's `updateMany`: `leaves[i]` at `indices[i]`, in one batch (each touched node
    /// rehashed once).
    ///
    /// # Errors
    /// [`TreeError::UpdateShape`] unless the two have one length; [`TreeError::RepeatedIndex`];
    /// [`TreeError::LeafNotInserted`]; storage errors. Nothing changes on an error.
    pub fn update_many(&mut self, indices: &[u64], leaves: &[Digest<H>]) -> Result<(), T::Error> {
        if indices.len() != leaves.len() {
            return Err(TreeError::UpdateShape {
                indices: indices.len(),
                leaves: leaves.len(),
            }
            .into());
        }
        let mut seen = rustc_hash::FxHashSet::default();
        let mut batch = UpdateBatch::new();
        for (&index, leaf) in indices.iter().zip(leaves) {
            self.inserted(index)?;
            if !seen.insert(index) {
                return Err(TreeError::RepeatedIndex { index }.into());
            }
            batch.set(index, Some(*leaf));
        }
        self.tree.apply(batch)
    }

    /// zk-kit's removal: the leaf at `index` becomes the zero value (it stays counted in
    /// [`size`](Self::size) and is still hashed).
    ///
    /// # Errors
    /// As [`update`](Self::update).
    pub fn remove(&mut self, index: u64) -> Result<(), T::Error> {
        self.update(index, Digest::<H>::default())
    }

    /// The leaf at `index`.
    ///
    /// # Errors
    /// [`TreeError::LeafNotInserted`] unless `index < size`; storage errors.
    pub fn leaf(&self, index: u64) -> Result<Digest<H>, T::Error> {
        self.inserted(index)?;
        let size = self.size();
        self.tree
            .get(index)?
            .ok_or_else(|| TreeError::LeafNotInserted { index, size }.into())
    }

    /// zk-kit's proof of the leaf at `index`.
    ///
    /// # Errors
    /// [`TreeError::LeafNotInserted`] unless `index < size`; storage errors.
    pub fn proof(&self, index: u64) -> Result<LeanProof<H>, T::Error> {
        let leaf = self.leaf(index)?;
        let path = self.tree.proof(index)?;
        let mut siblings = Vec::new();
        let mut bits = 0u64;
        for (level, sibling) in path.path_elements().iter().enumerate() {
            if let Some(sibling) = sibling {
                if level < 64 && (index >> level) & 1 == 1 {
                    bits |= 1 << siblings.len();
                }
                siblings.push(*sibling);
            }
        }
        let size = self.size();
        let root = self
            .root()
            .ok_or_else(|| T::Error::from(TreeError::LeafNotInserted { index, size }))?;
        Ok(LeanProof {
            root,
            leaf,
            index: bits,
            siblings,
        })
    }
}
