//! What an RLN node needs next to a Canopy tree.
//!
//! - [`primitives`]: identity keys, rate commitments (the tree's leaves), external nullifiers,
//!   `hash_to_field`, the Shamir share `(x, y)` and nullifier of a message, and secret recovery
//!   from two shares (slashing) — over Canopy's Poseidon, byte-compatible with zerokit `rln` 3.x.
//! - [`witness`]: the RLN circuit's witness for a member of any Canopy tree, as a typed struct
//!   and as circom input JSON, plus the public values a proof of it must carry.
//! - [`verifier`]: a verifier that needs only the verifying key, checking signal, root window
//!   and proof with a typed verdict.
//! - `proving` (feature `prover`): RLN proofs from these witnesses with Canopy's own prover
//!   (fixed-base MSM tables) on rln 3.0.0's shipped circuit and key.
//! - `zerokit` (feature `zerokit`): our trees as zerokit_utils trees, so `rln::RLN` proves and
//!   verifies over them unchanged.
//!
//! ```
//! use hasher::Fr;
//! use rln_glue::primitives::{external_nullifier, rate_commitment, IdentityKeys, IdentitySecret};
//! use rln_glue::witness::RlnWitness;
//! use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
//!
//! let keys = IdentityKeys::from_secret(IdentitySecret::new(Fr::from(42u64)));
//! let limit = Fr::from(10u64);
//! let mut tree = OptimalMerkleTree::new(Depth::new(20)?);
//! tree.update_next(rate_commitment(keys.id_commitment(), limit))?;
//! let epoch = Fr::from(1u64);
//! let witness = RlnWitness::from_tree(
//!     &tree, 0, keys.secret(), limit, Fr::from(0u64), Fr::from(7u64),
//!     external_nullifier(epoch, Fr::from(99u64)),
//! )?;
//! assert_eq!(witness.public_values().root, tree.root());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod primitives;
#[cfg(feature = "prover")]
pub mod proving;
pub mod verifier;
pub mod witness;
#[cfg(feature = "zerokit")]
pub mod zerokit;

pub use primitives::RlnError;
