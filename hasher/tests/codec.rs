//! Codec round trips and rejection of non-canonical bytes (property tests).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use ark_ff::{BigInteger, PrimeField};
use hasher::{
    fr_from_be_bytes, fr_to_be_bytes, DecodeError, DigestCodec, Fr, Keccak256Hasher, PoseidonHasher,
};
use proptest::prelude::*;

fn modulus_le() -> Vec<u8> {
    Fr::MODULUS.to_bytes_le()
}

/// `a >= b` for little-endian integers of equal length.
fn ge_le(a: &[u8], b: &[u8]) -> bool {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return x > y;
        }
    }
    true
}

proptest! {
    #[test]
    fn poseidon_codec_round_trips(bytes in any::<[u8; 32]>()) {
        let value = Fr::from_le_bytes_mod_order(&bytes);
        let encoded = PoseidonHasher::encode_to_vec(&value);
        prop_assert_eq!(encoded.len(), PoseidonHasher::LEN);
        prop_assert_eq!(PoseidonHasher::decode(&encoded), Ok(value));
        prop_assert_eq!(fr_from_be_bytes(&fr_to_be_bytes(&value)), Ok(value));
    }

    #[test]
    fn poseidon_decode_accepts_exactly_the_canonical_range(bytes in any::<[u8; 32]>()) {
        let decoded = PoseidonHasher::decode(&bytes);
        if ge_le(&bytes, &modulus_le()) {
            prop_assert_eq!(decoded, Err(DecodeError::NonCanonical));
        } else {
            let value = decoded.unwrap();
            prop_assert_eq!(PoseidonHasher::encode_to_vec(&value), bytes.to_vec());
        }
    }

    /// Values in [p, 2^256) are the ones a lossy decoder would silently reduce.
    #[test]
    fn poseidon_decode_rejects_values_above_modulus(offset in any::<[u8; 32]>()) {
        // modulus + (offset mod (2^256 - p)): add little-endian with carry, skip on overflow.
        let m = modulus_le();
        let mut sum = [0u8; 32];
        let mut carry = 0u16;
        for i in 0..32 {
            let s = u16::from(m[i]) + u16::from(if i < 31 { offset[i] } else { offset[i] & 0x0f }) + carry;
            sum[i] = (s & 0xff) as u8;
            carry = s >> 8;
        }
        prop_assume!(carry == 0);
        prop_assert_eq!(PoseidonHasher::decode(&sum), Err(DecodeError::NonCanonical));
    }

    #[test]
    fn wrong_lengths_are_rejected(len in 0usize..80) {
        prop_assume!(len != 32);
        let bytes = vec![0u8; len];
        prop_assert_eq!(
            PoseidonHasher::decode(&bytes),
            Err(DecodeError::WrongLength { expected: 32, found: len })
        );
        prop_assert_eq!(
            Keccak256Hasher::decode(&bytes),
            Err(DecodeError::WrongLength { expected: 32, found: len })
        );
    }

    #[test]
    fn keccak_codec_round_trips(bytes in any::<[u8; 32]>()) {
        prop_assert_eq!(Keccak256Hasher::decode(&Keccak256Hasher::encode_to_vec(&bytes)), Ok(bytes));
    }
}
