//! zk-kit's LeanIMT as a hashing rule: a node is present or absent, a pair with an absent right
//! child is its left child, and only two present children are hashed.
//!
//! A fixed-depth tree of [`Lean<H>`] nodes holding `n` leaves from index 0 has, at the level
//! where `2^level ≥ n`, exactly the LeanIMT root of those leaves, and above it the same value
//! (every right sibling is absent): so a depth-32 tree of the one engine holds every LeanIMT of
//! up to 2^32 leaves, with its persistence, history and parallel rehash. The proof shape (siblings
//! of present nodes only, the index as zk-kit encodes it) is `tree_core::lean`'s.
//!
//! ```
//! use hasher::{Fr, Hasher, Lean, PoseidonHasher};
//!
//! let (a, b) = (Some(Fr::from(1u64)), Some(Fr::from(2u64)));
//! assert_eq!(Lean::<PoseidonHasher>::hash_pair(&a, &None), a); // no right sibling: carried up
//! assert_eq!(
//!     Lean::<PoseidonHasher>::hash_pair(&a, &b),
//!     Some(PoseidonHasher::hash_pair(&Fr::from(1u64), &Fr::from(2u64)))
//! );
//! ```

use core::marker::PhantomData;

use crate::{DecodeError, Digest, DigestCodec, Hasher};

/// A hasher that can be a LeanIMT's: it names the LeanIMT of its hash, so a database of lean
/// nodes opens only with the same rule and hash.
pub trait LeanHash: Hasher {
    /// The [`Hasher::ID`] of [`Lean<Self>`].
    const LEAN_ID: &'static str;
}

/// The LeanIMT rule over hash `H`: digests are `Option<H::Digest>` (`None` = absent, the empty
/// leaf), `hash_pair(Some(l), Some(r)) = Some(H(l, r))`, a present node beside an absent one is
/// carried up unchanged, two absent nodes give an absent parent.
///
/// A LeanIMT fills leaves from index 0 with no gaps, so an absent left sibling of a present node
/// never arises there; on a raw tree with gaps the present node is carried up the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lean<H>(PhantomData<H>);

impl<H: LeanHash> Hasher for Lean<H> {
    type Digest = Option<Digest<H>>;
    const ID: &'static str = H::LEAN_ID;
    const BATCH: usize = H::BATCH;

    fn hash_pair(left: &Self::Digest, right: &Self::Digest) -> Self::Digest {
        match (left, right) {
            (Some(l), Some(r)) => Some(H::hash_pair(l, r)),
            (Some(x), None) | (None, Some(x)) => Some(*x),
            (None, None) => None,
        }
    }

    /// The pairs with two present children go to `H::hash_level` together (so lanes batch
    /// them); the rest are carried up.
    fn hash_level(children: &[Self::Digest], parents: &mut [Self::Digest]) {
        let n = parents.len().min(children.len() / 2);
        let mut full = Vec::with_capacity(2 * n);
        let mut at = Vec::with_capacity(n);
        for (i, (parent, pair)) in parents[..n]
            .iter_mut()
            .zip(children.chunks_exact(2))
            .enumerate()
        {
            match (pair[0], pair[1]) {
                (Some(l), Some(r)) => {
                    full.push(l);
                    full.push(r);
                    at.push(i);
                }
                (left, right) => *parent = Self::hash_pair(&left, &right),
            }
        }
        if at.is_empty() {
            return;
        }
        let mut hashed = vec![Digest::<H>::default(); at.len()];
        H::hash_level(&full, &mut hashed);
        for (i, digest) in at.into_iter().zip(hashed) {
            parents[i] = Some(digest);
        }
    }
}

/// Lean nodes encode as a presence byte (0 absent, 1 present) and `H`'s encoding (zeros when
/// absent); any other byte string is refused.
impl<H: LeanHash + DigestCodec> DigestCodec for Lean<H> {
    const LEN: usize = 1 + H::LEN;

    fn encode(digest: &Self::Digest, out: &mut [u8]) {
        match digest {
            Some(d) => {
                out[0] = 1;
                H::encode(d, &mut out[1..Self::LEN]);
            }
            None => out[..Self::LEN].fill(0),
        }
    }

    fn decode(bytes: &[u8]) -> Result<Self::Digest, DecodeError> {
        if bytes.len() != Self::LEN {
            return Err(DecodeError::WrongLength {
                expected: Self::LEN,
                found: bytes.len(),
            });
        }
        match bytes[0] {
            1 => H::decode(&bytes[1..]).map(Some),
            0 if bytes[1..].iter().all(|&b| b == 0) => Ok(None),
            _ => Err(DecodeError::NonCanonical),
        }
    }
}

#[cfg(any(feature = "poseidon", feature = "keccak"))]
macro_rules! lean_id {
    ($hasher:ty, $id:literal) => {
        impl LeanHash for $hasher {
            const LEAN_ID: &'static str = $id;
        }
    };
}

#[cfg(feature = "poseidon")]
lean_id!(crate::PoseidonHasher, "lean-poseidon-bn254-circom");
#[cfg(feature = "poseidon")]
lean_id!(crate::LightPoseidonHasher, "lean-poseidon-bn254-circom");
#[cfg(feature = "poseidon")]
lean_id!(crate::Poseidon2Hasher, "lean-poseidon2-bn254-t2-compress");
#[cfg(feature = "poseidon")]
lean_id!(crate::Poseidon2T3Hasher, "lean-poseidon2-bn254-t3-zkhash");
#[cfg(feature = "keccak")]
lean_id!(crate::Keccak256Hasher, "lean-keccak256");

#[cfg(all(test, feature = "poseidon"))]
mod tests {
    use super::*;
    use crate::{Fr, PoseidonHasher};

    type L = Lean<PoseidonHasher>;

    #[test]
    fn levels_equal_pairs_with_absent_nodes_mixed_in() {
        let children: Vec<Option<Fr>> = (0..40u64)
            .map(|i| (i % 7 != 3 && i < 35).then(|| Fr::from(i)))
            .collect();
        let mut parents = vec![Some(Fr::from(99u64)); 20];
        L::hash_level(&children, &mut parents);
        for (i, p) in parents.iter().enumerate() {
            assert_eq!(
                *p,
                L::hash_pair(&children[2 * i], &children[2 * i + 1]),
                "{i}"
            );
        }
        assert_eq!(parents[19], None);
    }

    #[test]
    fn codec_round_trips_and_refuses_other_bytes() {
        for d in [None, Some(Fr::from(0u64)), Some(-Fr::from(1u64))] {
            let bytes = L::encode_to_vec(&d);
            assert_eq!(bytes.len(), 33);
            assert_eq!(L::decode(&bytes), Ok(d));
        }
        let mut absent_with_payload = [0u8; 33];
        absent_with_payload[5] = 1;
        assert_eq!(
            L::decode(&absent_with_payload),
            Err(DecodeError::NonCanonical)
        );
        let mut flag = [0u8; 33];
        flag[0] = 2;
        assert_eq!(L::decode(&flag), Err(DecodeError::NonCanonical));
        assert!(L::decode(&[1u8; 32]).is_err());
        let mut big = [0xffu8; 33];
        big[0] = 1;
        assert_eq!(L::decode(&big), Err(DecodeError::NonCanonical));
    }
}
