//! The default Poseidon (FastPoseidon) computes exactly light-poseidon's function.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use hasher::{poseidon, poseidon_light, Fr, Hasher, LightPoseidonHasher, PoseidonHasher};

// Random-input equality with light-poseidon and zerokit lives in `vectors.rs`, one loop for all
// three implementations; the derivation of the optimised constants is tested in `fast.rs`.

#[test]
fn circomlib_vector_and_hasher() {
    let one_two = poseidon(&[Fr::from(1u64), Fr::from(2u64)]).unwrap();
    assert_eq!(
        hasher::fr_to_be_bytes(&one_two)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>(),
        "115cc0f5e7d690413df64c6b9662e9cf2a3617f2743245519e19607a4417189a"
    );
    let (l, r) = (Fr::from(7u64), Fr::from(11u64));
    assert_eq!(
        PoseidonHasher::hash_pair(&l, &r),
        LightPoseidonHasher::hash_pair(&l, &r)
    );
    assert_eq!(PoseidonHasher::ID, LightPoseidonHasher::ID);
    // Wider inputs fall back to light-poseidon; empty and too many are errors.
    let five: Vec<Fr> = (1..=5u64).map(Fr::from).collect();
    assert_eq!(poseidon(&five).unwrap(), poseidon_light(&five).unwrap());
    assert!(poseidon(&[]).is_err());
    assert!(poseidon(&[Fr::from(1u64); 13]).is_err());
}
