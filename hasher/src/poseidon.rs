//! circomlib-compatible Poseidon over the BN254 scalar field, on light-poseidon.

use std::cell::RefCell;

use ark_ff::{BigInt, BigInteger, PrimeField};
use light_poseidon::{Poseidon, PoseidonHasher as _};

use crate::{DecodeError, DigestCodec, Hasher};

/// The BN254 scalar field element: the very type zerokit's `rln` 3.x uses.
pub use ark_bn254::Fr;
/// light-poseidon's error, returned by [`poseidon_light()`] for an unsupported number of inputs.
pub use light_poseidon::PoseidonError;

/// Largest number of inputs [`poseidon_light()`] accepts: light-poseidon 0.4 ships the circomlib
/// parameters up to width 13.
pub const POSEIDON_MAX_INPUTS: usize = light_poseidon::MAX_X5_LEN - 1;

thread_local! {
    // Building light-poseidon's parameters parses ~200 round constants from strings (tens of
    // microseconds to milliseconds per width), far more than a hash costs. Each thread builds each
    // width it uses once, on first use, and keeps it; `Poseidon::hash` needs `&mut self`, hence
    // one instance per thread rather than one shared behind a lock.
    static POSEIDONS: RefCell<Vec<Option<Poseidon<Fr>>>> =
        RefCell::new((0..POSEIDON_MAX_INPUTS).map(|_| None).collect());
}

/// circomlib's `Poseidon(n)` of `inputs` (1..=[`POSEIDON_MAX_INPUTS`] elements), computed by
/// light-poseidon: the reference for [`poseidon`](crate::poseidon).
///
/// Costs one permutation of width `n + 1` (≈ 10–15 µs for two inputs on this project's 2-core
/// machine) plus, the first time a thread uses a width, building that width's parameters.
///
/// # Errors
/// [`PoseidonError::InvalidNumberOfInputs`] (or `InvalidWidthCircom`) when `inputs` is empty or
/// longer than [`POSEIDON_MAX_INPUTS`].
pub fn poseidon_light(inputs: &[Fr]) -> Result<Fr, PoseidonError> {
    let n = inputs.len();
    if n == 0 || n > POSEIDON_MAX_INPUTS {
        return Err(PoseidonError::InvalidNumberOfInputs {
            inputs: n,
            max_limit: POSEIDON_MAX_INPUTS,
            width: n + 1,
        });
    }
    POSEIDONS.with(|cell| {
        let mut slots = cell.borrow_mut();
        let slot = &mut slots[n - 1];
        if slot.is_none() {
            *slot = Some(Poseidon::<Fr>::new_circom(n)?);
        }
        match slot {
            Some(hasher) => hasher.hash(inputs),
            None => unreachable!("slot filled just above"),
        }
    })
}

/// The hasher ID every circomlib-Poseidon tree writes, whichever implementation computed it.
pub(crate) const POSEIDON_ID: &str = "poseidon-bn254-circom";

/// Poseidon over BN254 as a tree hasher evaluated with light-poseidon: the reference
/// implementation, selectable where a user wants the audited crate in the loop.
///
/// Same digests, `ID` and codec as [`PoseidonHasher`](crate::PoseidonHasher) (the default,
/// about 1.9x faster).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LightPoseidonHasher;

impl Hasher for LightPoseidonHasher {
    type Digest = Fr;
    const ID: &'static str = POSEIDON_ID;

    fn hash_pair(left: &Fr, right: &Fr) -> Fr {
        match poseidon_light(&[*left, *right]) {
            Ok(parent) => parent,
            // Two inputs is always a supported width.
            Err(_) => unreachable!("Poseidon with 2 inputs is always supported"),
        }
    }
}

impl DigestCodec for LightPoseidonHasher {
    const LEN: usize = 32;

    fn encode(digest: &Fr, out: &mut [u8]) {
        out[..32].copy_from_slice(&fr_to_le_bytes(digest));
    }

    fn decode(bytes: &[u8]) -> Result<Fr, DecodeError> {
        fr_from_le_bytes(bytes)
    }
}

/// The canonical 32-byte little-endian encoding of a field element.
#[must_use]
pub fn fr_to_le_bytes(value: &Fr) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&value.into_bigint().to_bytes_le());
    out
}

/// The canonical 32-byte big-endian encoding of a field element.
#[must_use]
pub fn fr_to_be_bytes(value: &Fr) -> [u8; 32] {
    let mut out = fr_to_le_bytes(value);
    out.reverse();
    out
}

/// Parses 32 little-endian bytes as a canonical field element.
///
/// # Errors
/// [`DecodeError::WrongLength`] unless exactly 32 bytes; [`DecodeError::NonCanonical`] when the
/// integer is at or above the modulus (it is never reduced).
pub fn fr_from_le_bytes(bytes: &[u8]) -> Result<Fr, DecodeError> {
    let array = <[u8; 32]>::try_from(bytes).map_err(|_| DecodeError::WrongLength {
        expected: 32,
        found: bytes.len(),
    })?;
    let mut limbs = [0u64; 4];
    for (limb, chunk) in limbs.iter_mut().zip(array.chunks_exact(8)) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        *limb = u64::from_le_bytes(word);
    }
    Fr::from_bigint(BigInt::new(limbs)).ok_or(DecodeError::NonCanonical)
}

/// Parses 32 big-endian bytes as a canonical field element.
///
/// # Errors
/// As [`fr_from_le_bytes`].
pub fn fr_from_be_bytes(bytes: &[u8]) -> Result<Fr, DecodeError> {
    let mut reversed = bytes.to_vec();
    reversed.reverse();
    fr_from_le_bytes(&reversed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr_hex(value: &Fr) -> String {
        fr_to_be_bytes(value)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn too_many_and_zero_inputs_are_errors() {
        assert!(poseidon_light(&[]).is_err());
        assert!(poseidon_light(&vec![Fr::from(1u64); POSEIDON_MAX_INPUTS + 1]).is_err());
        assert!(poseidon_light(&vec![Fr::from(1u64); POSEIDON_MAX_INPUTS]).is_ok());
    }

    #[test]
    fn modulus_is_rejected_and_modulus_minus_one_accepted() {
        let mut modulus = Fr::MODULUS.to_bytes_le();
        assert_eq!(fr_from_le_bytes(&modulus), Err(DecodeError::NonCanonical));
        modulus[0] -= 1; // the modulus is odd, so no borrow
        let max = fr_from_le_bytes(&modulus).unwrap();
        assert_eq!(max, -Fr::from(1u64));
        assert_eq!(fr_hex(&Fr::from(255u64)), format!("{:064x}", 255));
    }
}
