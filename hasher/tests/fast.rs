//! FastPoseidon computes exactly light-poseidon's (and zerokit's) function.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use hasher::{poseidon, poseidon_fast, FastPoseidonHasher, Fr, Hasher, PoseidonHasher};

// Random-input equality with light-poseidon and zerokit lives in `vectors.rs`, one loop for all
// three implementations.

#[test]
fn circomlib_vector_and_hasher() {
    let one_two = poseidon_fast(&[Fr::from(1u64), Fr::from(2u64)]).unwrap();
    assert_eq!(
        hasher::fr_to_be_bytes(&one_two)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        "115cc0f5e7d690413df64c6b9662e9cf2a3617f2743245519e19607a4417189a"
    );
    let (l, r) = (Fr::from(7u64), Fr::from(11u64));
    assert_eq!(
        FastPoseidonHasher::hash_pair(&l, &r),
        PoseidonHasher::hash_pair(&l, &r)
    );
    assert_eq!(FastPoseidonHasher::ID, PoseidonHasher::ID);
    // Wider inputs fall back to light-poseidon; empty is an error.
    let five: Vec<Fr> = (1..=5u64).map(Fr::from).collect();
    assert_eq!(poseidon_fast(&five).unwrap(), poseidon(&five).unwrap());
    assert!(poseidon_fast(&[]).is_err());
}
