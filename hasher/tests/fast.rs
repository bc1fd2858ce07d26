//! FastPoseidon computes exactly light-poseidon's (and zerokit's) function.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use ark_std::{rand::SeedableRng, UniformRand};
use hasher::{poseidon, poseidon_fast, FastPoseidonHasher, Fr, Hasher, PoseidonHasher};

#[test]
fn equals_light_poseidon_and_zerokit_on_random_inputs() {
    let zerokit = zerokit_utils::poseidon::Poseidon::<Fr>::from(&[
        (2, 8, 56, 0),
        (3, 8, 57, 0),
        (4, 8, 56, 0),
    ]);
    let cases: usize = std::env::var("FAST_POSEIDON_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let mut rng = ark_std::rand::rngs::StdRng::seed_from_u64(0xfa57);
    for width in 1..=3 {
        for _ in 0..cases {
            let inputs: Vec<Fr> = (0..width).map(|_| Fr::rand(&mut rng)).collect();
            let fast = poseidon_fast(&inputs).unwrap();
            assert_eq!(fast, poseidon(&inputs).unwrap(), "inputs {inputs:?}");
            assert_eq!(fast, zerokit.hash(&inputs).unwrap(), "inputs {inputs:?}");
        }
    }
}

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
