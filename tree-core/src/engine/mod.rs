//! The one tree engine: every rule of a Canopy tree written once over a [`TreeStore`].
//!
//! ```text
//!  MerkleTree::apply(UpdateBatch)    validate once (crate::batch), rehash once (crate::rehash)
//!        │
//!  Tree::prepare ── Overlay of changed nodes ──► Change ──► TreeStore::stage   (reads only)
//!  Tree::publish ─────────────────────────────────────────► TreeStore::commit  (one unit)
//!  (`apply` on a memory store writes the nodes in place: TreeStore::write_in_place)
//!  History (crate::history): checkpoints, rewind, root window, proof_at over the same store
//!
//!  stores: DenseNodes | SparseNodes (memory, crate::mem) | KvTreeStore over sled, redb, …
//! ```
//!
//! [`FullMerkleTree`](crate::FullMerkleTree), [`OptimalMerkleTree`](crate::OptimalMerkleTree)
//! and [`PersistentTree`](crate::persistent::PersistentTree) are this type over their stores.
//!
//! ```
//! use hasher::Keccak256Hasher as K;
//! use tree_core::persistent::{MemStore, PersistentTree};
//! use tree_core::{Depth, History, MerkleTree, OptimalMerkleTree, RehashConfig, UpdateBatch};
//!
//! let depth = Depth::new(8)?;
//! let mut sparse = OptimalMerkleTree::<K>::new(depth);
//! let mut stored = PersistentTree::<K, _>::open_store(MemStore::new(), depth, RehashConfig::default(), tree_core::persistent::NodeCache::top(2))?;
//! let mut block = UpdateBatch::new();
//! block.set_range(0, [[1u8; 32], [2u8; 32]]);
//! sparse.apply_checkpointed(block.clone(), 7)?; // the block and its checkpoint: one commit
//! let prepared = stored.prepare(block)?; // every hash, reading only
//! assert_eq!(prepared.root(), &sparse.root());
//! stored.publish(prepared)?;
//! stored.checkpoint(7)?;
//! assert_eq!(sparse.checkpoints()?, stored.checkpoints()?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod apply;
mod history;
mod overlay;
mod store;

use derive_where::derive_where;
use hasher::{Digest, Hasher};

use crate::history::CheckpointList;
use crate::{Depth, HistoryConfig, MerkleProof, MerkleTree, NodeAddr, RehashConfig, UpdateBatch};

pub use apply::PreparedApply;
pub use store::{Change, InPlace, LevelWrites, NodeRead, TreeStore};

/// What a store holds besides nodes, loaded when a tree is opened over it.
#[derive(Clone, Debug)]
pub(crate) struct TreeState<D> {
    /// The root.
    pub root: D,
    /// One past the highest leaf ever written.
    pub next_index: u64,
    /// The caller's metadata.
    pub metadata: Vec<u8>,
    /// The retention settings.
    pub history: HistoryConfig,
    /// The retained checkpoints.
    pub checkpoints: CheckpointList<D>,
}

/// A Merkle tree over store `S`: the same semantics, roots and proofs whatever the store.
#[derive_where(Clone; S)]
pub struct Tree<H: Hasher, S> {
    pub(crate) store: S,
    pub(crate) depth: Depth,
    pub(crate) root: Digest<H>,
    pub(crate) next_index: u64,
    pub(crate) metadata: Vec<u8>,
    pub(crate) config: RehashConfig,
    pub(crate) history: HistoryConfig,
    pub(crate) checkpoints: CheckpointList<Digest<H>>,
    /// Bumped by every commit: what `publish` checks a prepared batch against.
    generation: u64,
}

impl<H: Hasher, S: TreeStore<H>> Tree<H, S> {
    /// A tree over `store`, whose contents `state` describes.
    pub(crate) fn from_store(
        store: S,
        depth: Depth,
        config: RehashConfig,
        state: TreeState<Digest<H>>,
    ) -> Self {
        Self {
            store,
            depth,
            root: state.root,
            next_index: state.next_index,
            metadata: state.metadata,
            config,
            history: state.history,
            checkpoints: state.checkpoints,
            generation: 0,
        }
    }

    /// Applies `batch` and sets the metadata in the same commit (e.g. the block number whose
    /// members the batch registers).
    ///
    /// # Errors
    /// As [`MerkleTree::apply`].
    pub fn apply_with_metadata(
        &mut self,
        mut batch: UpdateBatch<H>,
        metadata: Vec<u8>,
    ) -> Result<(), S::Error> {
        batch.metadata(metadata);
        MerkleTree::apply(self, batch)
    }

    /// Record `key`'s value, as the last commit left it (see
    /// [`UpdateBatch::put_record`]).
    ///
    /// # Errors
    /// A storage read failure.
    pub fn record(&self, key: &[u8]) -> Result<Option<Vec<u8>>, S::Error> {
        self.store.record(key)
    }
}

impl<H: Hasher, S: TreeStore<H>> MerkleTree for Tree<H, S> {
    type Hasher = H;
    type Error = S::Error;

    fn depth(&self) -> Depth {
        self.depth
    }

    fn next_index(&self) -> u64 {
        self.next_index
    }

    fn root(&self) -> Digest<H> {
        self.root
    }

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, S::Error> {
        self.depth.check_addr(addr)?;
        self.store.node(addr)
    }

    fn empty_leaves_indices(&self) -> Result<Vec<u64>, S::Error> {
        self.store.deleted_leaves()
    }

    fn metadata(&self) -> Result<Vec<u8>, S::Error> {
        Ok(self.metadata.clone())
    }

    fn apply(&mut self, batch: UpdateBatch<H>) -> Result<(), S::Error> {
        self.apply_inner(batch, None)
    }

    /// The store's siblings of the path: one bounds check for the index, none per level.
    fn proof(&self, index: u64) -> Result<MerkleProof<H>, S::Error> {
        self.depth.check_index(index)?;
        let siblings = self.store.siblings(self.depth, index)?;
        Ok(MerkleProof::new(index, siblings))
    }

    fn rehash_config(&self) -> &RehashConfig {
        &self.config
    }

    fn set_rehash_config(&mut self, config: RehashConfig) {
        self.config = config;
    }
}

impl<H: Hasher, S> core::fmt::Debug for Tree<H, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tree")
            .field("depth", &self.depth)
            .field("next_index", &self.next_index)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}
