//! Fixed-depth binary Merkle trees with one batched mutation and parallel rehashing.
//!
//! ```text
//! level 2 (root)              r
//!                       /           \
//! level 1            n0               n1
//!                  /    \           /    \
//! level 0        l0      l1       l2      l3      (leaves; index 0..capacity)
//!                ^ next_index = 3 after writing l0..l2; deleting l1 keeps it at 3
//! ```
//!
//! Glossary:
//! - **depth**: levels above the leaves ([`Depth`], 1..=[`MAX_DEPTH`]); **capacity** = `2^depth`.
//! - **level**: height above the leaves, 0 = leaves, `depth` = root ([`NodeAddr`]).
//! - **index**: a node's position from the left within its level (`u64`).
//! - **`next_index`**: one past the highest leaf ever written (zerokit's `leaves_set`); deletes
//!   reset a leaf to the empty leaf without lowering it.
//!
//! Every tree implements [`MerkleTree`], whose one mutating method applies an [`UpdateBatch`];
//! `set`, `set_range`, `update_next`, `delete` and `override_range` ([`MerkleTreeExt`]) only build
//! batches, [`UpdateBatch::validate`] is the only validator, and [`rehash`] is the only rehash.
//! Roots and proofs are bit-for-bit zerokit's for the same hasher and operations. Every tree
//! is the one [`engine::Tree`] over a store: [`FullMerkleTree`] and [`OptimalMerkleTree`] over
//! memory, [`persistent::PersistentTree`] over any key-value store (sled, redb).
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::{Depth, FullMerkleTree, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
//!
//! let depth = Depth::new(10)?;
//! let mut sparse = OptimalMerkleTree::<PoseidonHasher>::new(depth);
//! let mut dense = FullMerkleTree::<PoseidonHasher>::new(depth)?;
//! for tree in [&mut sparse as &mut dyn MerkleTreeDyn, &mut dense] {
//!     tree.register(&[Fr::from(1u64), Fr::from(2u64), Fr::from(3u64)])?;
//! }
//! assert_eq!(sparse.root(), dense.root());
//! sparse.override_range(1, [Fr::from(9u64)], [0])?; // remove member 0, replace member 1
//! assert_eq!(sparse.empty_leaves_indices()?, vec![0]);
//! let proof = sparse.proof(1)?;
//! assert!(sparse.verify_proof(&proof, &Fr::from(9u64)));
//! # trait MerkleTreeDyn { fn register(&mut self, leaves: &[Fr]) -> Result<(), tree_core::TreeError>; }
//! # impl<T: MerkleTree<Hasher = PoseidonHasher, Error = tree_core::TreeError>> MerkleTreeDyn for T {
//! #     fn register(&mut self, leaves: &[Fr]) -> Result<(), tree_core::TreeError> {
//! #         let start = self.next_index();
//! #         self.set_range(start, leaves.iter().copied())
//! #     }
//! # }
//! # Ok::<(), tree_core::TreeError>(())
//! ```
//!
//! Other shapes on the same engine:
//! - **LeanIMT** (zk-kit's, Semaphore v4's groups): [`lean::LeanImt`] over a tree of
//!   [`hasher::Lean`] nodes, with zk-kit's operations and proof shape (example in [`lean`]).
//! - **Poseidon2** ([`hasher::Poseidon2Hasher`], [`hasher::Poseidon2T3Hasher`]): any tree, any
//!   store.
//! - **Depth 30 at World ID's scale**: the sparse tree's memory follows the leaves present, not
//!   the capacity; the persistent trees hold only their top levels in RAM.
//!
//! ```
//! use hasher::{Fr, Poseidon2Hasher};
//! use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
//!
//! let mut world = OptimalMerkleTree::<Poseidon2Hasher>::new(Depth::new(30)?); // 2^30 capacity
//! world.set_range(0, (1..=1000u64).map(Fr::from))?; // memory for 1,000 leaves, not 2^30
//! let proof = world.proof(999)?;
//! assert_eq!(proof.len(), 30);
//! assert!(world.verify_proof(&proof, &Fr::from(1000u64)));
//! # Ok::<(), tree_core::TreeError>(())
//! ```

mod addr;
mod batch;
mod empty;
pub mod engine;
mod error;
mod full;
pub mod history;
pub mod lean;
mod mem;
mod optimal;
pub mod persistent;
mod proof;
pub mod rehash;
pub mod snapshot;
mod tree;

#[cfg(feature = "test-utils")]
pub mod testing;

pub use addr::{Depth, NodeAddr, MAX_DEPTH};
pub use batch::{range_end, PreparedBatch, Records, UpdateBatch, MAX_RECORD_KEY};
pub use empty::EmptyRoots;
pub use error::{AsTreeError, TreeError};
pub use full::{DenseNodes, FullMerkleTree};
pub use history::{CheckpointInfo, History, HistoryConfig};
pub use mem::{Frame, InMemoryStore, InMemoryTree, MemNodes};
pub use optimal::{OptimalMerkleTree, SparseNodes};
pub use proof::MerkleProof;
pub use rehash::{RehashConfig, DEFAULT_MIN_PARALLEL_NODES};
pub use snapshot::{Snapshot, SnapshotError};
pub use tree::{MerkleTree, MerkleTreeExt};
