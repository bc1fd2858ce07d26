//! The `MerkleTree` trait (one mutating primitive) and the provided conveniences.

use hasher::{Digest, Hasher};

use crate::{AsTreeError, Depth, MerkleProof, NodeAddr, RehashConfig, TreeError, UpdateBatch};

/// A fixed-depth binary Merkle tree.
///
/// Backends implement the storage-facing methods; reads such as [`get`](Self::get) and
/// [`proof`](Self::proof) are provided on top of [`node`](Self::node), and every mutation goes
/// through [`apply`](Self::apply) via [`MerkleTreeExt`], so the semantics cannot fork per backend.
pub trait MerkleTree {
    /// The hash combining two children.
    type Hasher: Hasher;
    /// The backend's error: rule violations ([`TreeError`]) plus whatever its storage can fail with.
    type Error: std::error::Error + From<TreeError> + AsTreeError + Send + Sync + 'static;

    /// The tree's depth.
    fn depth(&self) -> Depth;

    /// One past the highest index ever written; deletes never lower it.
    fn next_index(&self) -> u64;

    /// The current root (cached, so infallible for every backend).
    fn root(&self) -> Digest<Self::Hasher>;

    /// The node at `addr` (the empty-subtree value where nothing was written).
    ///
    /// # Errors
    /// [`TreeError::LevelOutOfBounds`] / [`TreeError::NodeOutOfBounds`] for an address outside the
    /// tree; storage errors for persistent backends.
    fn node(&self, addr: NodeAddr) -> Result<Digest<Self::Hasher>, Self::Error>;

    /// Indices below `next_index` that hold the empty leaf because they were deleted (and not
    /// written since), in increasing order.
    ///
    /// # Errors
    /// Storage errors for persistent backends.
    fn empty_leaves_indices(&self) -> Result<Vec<u64>, Self::Error>;

    /// The opaque metadata last set by a batch (empty if never set).
    ///
    /// # Errors
    /// Storage errors for persistent backends.
    fn metadata(&self) -> Result<Vec<u8>, Self::Error>;

    /// Validates `batch` ([`UpdateBatch::validate`]) and applies it as one unit: on error nothing
    /// changes.
    ///
    /// # Errors
    /// The [`TreeError`] of the first rule the batch breaks, or a storage error.
    fn apply(&mut self, batch: UpdateBatch<Self::Hasher>) -> Result<(), Self::Error>;

    /// The rehash settings (parallel threshold, thread pool) in force.
    fn rehash_config(&self) -> &RehashConfig;

    /// Changes the rehash settings at run time (e.g. to sweep `min_parallel_nodes`).
    fn set_rehash_config(&mut self, config: RehashConfig);

    /// Number of leaves, `2^depth`.
    fn capacity(&self) -> u64 {
        self.depth().capacity()
    }

    /// zerokit's name for [`next_index`](Self::next_index).
    fn leaves_set(&self) -> u64 {
        self.next_index()
    }

    /// The leaf at `index`.
    ///
    /// # Errors
    /// [`TreeError::IndexOutOfBounds`] past capacity; storage errors.
    fn get(&self, index: u64) -> Result<Digest<Self::Hasher>, Self::Error> {
        self.depth().check_index(index)?;
        self.node(NodeAddr::leaf(index))
    }

    /// The root of the subtree of height `level` that contains leaf `leaf_index` (level 0 is the
    /// leaf itself, `depth` the root).
    ///
    /// # Errors
    /// [`TreeError::LevelOutOfBounds`] or [`TreeError::IndexOutOfBounds`]; storage errors.
    fn subtree_root(
        &self,
        level: u8,
        leaf_index: u64,
    ) -> Result<Digest<Self::Hasher>, Self::Error> {
        self.depth().check_index(leaf_index)?;
        let index = if level >= 64 { 0 } else { leaf_index >> level };
        self.node(NodeAddr { level, index })
    }

    /// A membership proof for the leaf at `index`.
    ///
    /// # Errors
    /// [`TreeError::IndexOutOfBounds`] past capacity; storage errors.
    fn proof(&self, index: u64) -> Result<MerkleProof<Self::Hasher>, Self::Error>;

    /// True when `proof` has this tree's depth and proves `leaf` against the current root.
    fn verify_proof(&self, proof: &MerkleProof<Self::Hasher>, leaf: &Digest<Self::Hasher>) -> bool {
        proof.len() == usize::from(self.depth().get()) && proof.verify(&self.root(), leaf)
    }
}

/// The mutating conveniences, each one batch. Blanket-implemented, so no backend can change what
/// they mean.
pub trait MerkleTreeExt: MerkleTree {
    /// Writes `leaf` at `index` (raising `next_index` past it).
    ///
    /// # Errors
    /// [`TreeError::IndexOutOfBounds`]; storage errors.
    fn set(&mut self, index: u64, leaf: Digest<Self::Hasher>) -> Result<(), Self::Error> {
        let mut batch = UpdateBatch::new();
        batch.set(index, leaf);
        self.apply(batch)
    }

    /// Writes `leaves` contiguously from `start`.
    ///
    /// # Errors
    /// [`TreeError::RangeOverflow`] or [`TreeError::RangeOutOfBounds`]; storage errors.
    fn set_range(
        &mut self,
        start: u64,
        leaves: impl IntoIterator<Item = Digest<Self::Hasher>>,
    ) -> Result<(), Self::Error> {
        let mut batch = UpdateBatch::new();
        batch.set_range(start, leaves);
        self.apply(batch)
    }

    /// Appends `leaf` at `next_index`.
    ///
    /// # Errors
    /// [`TreeError::TreeFull`] when `next_index == capacity`; storage errors.
    fn update_next(&mut self, leaf: Digest<Self::Hasher>) -> Result<(), Self::Error> {
        let next = self.next_index();
        if next >= self.capacity() {
            return Err(TreeError::TreeFull {
                capacity: self.capacity(),
            }
            .into());
        }
        self.set(next, leaf)
    }

    /// Resets the leaf at `index` to the empty leaf (`next_index` unchanged).
    ///
    /// # Errors
    /// [`TreeError::IndexOutOfBounds`], [`TreeError::DeleteUnset`]; storage errors.
    fn delete(&mut self, index: u64) -> Result<(), Self::Error> {
        let mut batch = UpdateBatch::new();
        batch.delete(index);
        self.apply(batch)
    }

    /// zerokit's `override_range`, as one batch: see [`UpdateBatch::override_range`].
    ///
    /// # Errors
    /// [`TreeError::EmptyOverride`], range errors, [`TreeError::DeleteUnset`]; storage errors.
    fn override_range(
        &mut self,
        start: u64,
        leaves: impl IntoIterator<Item = Digest<Self::Hasher>>,
        removes: impl IntoIterator<Item = u64>,
    ) -> Result<(), Self::Error> {
        let mut batch = UpdateBatch::new();
        batch.override_range(start, leaves, removes);
        self.apply(batch)
    }

    /// Replaces the metadata (a batch with no leaf changes).
    ///
    /// # Errors
    /// Storage errors.
    fn set_metadata(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        let mut batch = UpdateBatch::new();
        batch.metadata(bytes.to_vec());
        self.apply(batch)
    }

    /// Sets `min_parallel_nodes`, keeping the rest of the rehash configuration.
    fn set_min_parallel_nodes(&mut self, min_parallel_nodes: usize) {
        let mut config = self.rehash_config().clone();
        config.min_parallel_nodes = min_parallel_nodes;
        self.set_rehash_config(config);
    }
}

impl<T: MerkleTree + ?Sized> MerkleTreeExt for T {}
