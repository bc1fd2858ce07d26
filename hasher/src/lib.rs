//! Hashers for Canopy's Merkle trees.
//!
//! A tree needs three things from its hash: the node type, how two children combine into their
//! parent, and the value of an empty leaf. [`Hasher`] is exactly that, with the bounds on the node
//! type stated once. Persistent trees also need a canonical byte form: [`DigestCodec`], whose
//! decoder never panics and rejects non-canonical bytes with a typed [`DecodeError`].
//!
//! ```text
//!                 root = hash_pair(n0, n1)
//!               /                          \
//!    n0 = hash_pair(l0, l1)       n1 = hash_pair(l2, l3)
//!        /        \                  /        \
//!      l0          l1              l2     l3 = empty_leaf()
//! ```
//!
//! The hashers that ship here:
//! - [`PoseidonHasher`] (feature `poseidon`): circomlib-compatible Poseidon over BN254, the hash
//!   of RLN membership trees, bit-for-bit what zerokit computes, evaluated by our own
//!   [`FastPoseidon`] (sparse partial rounds; whole levels eight at a time on AVX-512 IFMA
//!   lanes where the CPU has them, from the `field-lanes` crate).
//!   [`poseidon()`] hashes 1..=12 field elements for the RLN primitives.
//!   [`LightPoseidonHasher`] and [`poseidon_light()`] are the same function on light-poseidon,
//!   the reference it is tested against.
//! - [`Poseidon2Hasher`] and [`Poseidon2T3Hasher`] (feature `poseidon`): Poseidon2 over BN254
//!   (HorizenLabs instance, t = 2 compression as World ID 4.0 uses it, and `zkhash`'s t = 3 Merkle
//!   compression), on the same lanes; [`Poseidon2`] is the permutation for t = 2, 3, 4.
//! - [`Lean<H>`]: zk-kit's LeanIMT rule over any of them (absent nodes, a lone left child
//!   carried up), so the one engine holds LeanIMTs (Semaphore v4's groups).
//! - [`Keccak256Hasher`] (feature `keccak`): Keccak-256 over 32-byte nodes, for users outside the
//!   ZK field and as a cheap reference in benchmarks.
//!
//! ```
//! use hasher::{DigestCodec, Hasher, PoseidonHasher};
//! use ark_bn254::Fr;
//!
//! let parent = PoseidonHasher::hash_pair(&Fr::from(1u64), &Fr::from(2u64));
//! let mut bytes = [0u8; 32];
//! PoseidonHasher::encode(&parent, &mut bytes);
//! assert_eq!(PoseidonHasher::decode(&bytes), Ok(parent));
//! assert!(PoseidonHasher::decode(&[0xff; 32]).is_err()); // above the field modulus
//! ```
//!
//! Poseidon2 (World ID 4.0's compression) and the permutation itself:
//!
//! ```
//! use hasher::{poseidon2_t2, Fr, Hasher, Poseidon2Hasher};
//!
//! let (l, r) = (Fr::from(1u64), Fr::from(2u64));
//! let mut state = [l, r];
//! poseidon2_t2().permute(&mut state);
//! assert_eq!(Poseidon2Hasher::hash_pair(&l, &r), state[0] + l); // the paper's feed-forward
//! ```

mod codec;
#[cfg(feature = "poseidon")]
mod fast;
#[cfg(feature = "keccak")]
mod keccak;
mod lean;
#[cfg(feature = "poseidon")]
mod poseidon;
#[cfg(feature = "poseidon")]
mod poseidon2;

pub use codec::{DecodeError, DigestCodec};
#[cfg(feature = "poseidon")]
pub use fast::{
    hash_pairs, hash_pairs_interleaved, lane_permutations, poseidon, poseidon_arithmetic,
    set_poseidon_arithmetic, FastPoseidon, PoseidonHasher, SparseMatrix, INTERLEAVE,
    LANE_MIN_BATCH,
};
#[cfg(feature = "poseidon")]
pub use field_lanes::{ifma_available, Arithmetic, LanesError};
#[cfg(feature = "keccak")]
pub use keccak::Keccak256Hasher;
pub use lean::{Lean, LeanHash};
#[cfg(feature = "poseidon")]
pub use poseidon::{
    fr_from_be_bytes, fr_from_le_bytes, fr_to_be_bytes, fr_to_le_bytes, poseidon_light, Fr,
    LightPoseidonHasher, PoseidonError, POSEIDON_MAX_INPUTS,
};
#[cfg(feature = "poseidon")]
pub use poseidon2::{
    poseidon2_t2, poseidon2_t3, poseidon2_t4, Poseidon2, Poseidon2Hasher, Poseidon2T3Hasher,
    POSEIDON2_EXTERNAL_ROUNDS, POSEIDON2_INTERNAL_ROUNDS,
};

/// A two-to-one hash for binary Merkle trees.
///
/// Implementors are zero-sized markers; every method is an associated function so trees can be
/// generic without carrying a hasher value around. The bounds every tree needs on the node type
/// live here, once.
pub trait Hasher: Send + Sync + 'static {
    /// The node (and leaf) value.
    type Digest: Copy + Eq + Default + core::fmt::Debug + Send + Sync + 'static;

    /// A stable identifier written into persistent stores, so a database built with one hasher
    /// refuses to open with another.
    const ID: &'static str;

    /// Hashes a left and a right child into their parent.
    fn hash_pair(left: &Self::Digest, right: &Self::Digest) -> Self::Digest;

    /// The value of a leaf that holds nothing (zerokit's "default leaf").
    fn empty_leaf() -> Self::Digest {
        Self::Digest::default()
    }

    /// How many pairs [`hash_level`](Self::hash_level) hashes at once: callers that split a
    /// level into chunks keep them multiples of this (1: no batching).
    const BATCH: usize = 1;

    /// Hashes one level: `parents[i] = hash_pair(children[2i], children[2i + 1])`.
    ///
    /// This is the batch entry point the trees' rehash calls for every chunk of a level; a hasher
    /// with a faster batched permutation overrides it. Extra children beyond `2 * parents.len()`
    /// are ignored.
    fn hash_level(children: &[Self::Digest], parents: &mut [Self::Digest]) {
        for (parent, pair) in parents.iter_mut().zip(children.chunks_exact(2)) {
            if let [left, right] = pair {
                *parent = Self::hash_pair(left, right);
            }
        }
    }
}

/// The node type of hasher `H`: the one projection alias the workspace uses.
pub type Digest<H> = <H as Hasher>::Digest;
