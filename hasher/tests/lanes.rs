//! Poseidon on IFMA lanes is bit-exact with the scalar path and with light-poseidon (the
//! reference no one here wrote): batches of every length 0..=17 (full groups of eight, tails,
//! empty), edge values, circomlib's vector inside a batch, and random batches by property test.
//! On a CPU without the lanes the same calls run the portable path and the same checks hold.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use ark_ff::{BigInteger, Field, PrimeField};
use hasher::{
    fr_from_be_bytes, hash_pairs, hash_pairs_interleaved, ifma_available, lane_permutations,
    poseidon_light, FastPoseidon, Fr, Hasher, PoseidonHasher,
};
use proptest::prelude::*;

/// Values at the edges of the field and of the limb split: 0, 1, 2, p−1, p−2, (p−1)/2, 2^52−1,
/// 2^52, 2^104, 2^253 (the largest power of two below p), and an all-ones-below-p pattern.
fn edges() -> Vec<Fr> {
    let one = Fr::from(1u64);
    let two = Fr::from(2u64);
    let mut half = Fr::MODULUS;
    half.div2();
    let mut v = vec![
        Fr::from(0u64),
        one,
        two,
        -one,
        -two,
        Fr::from_bigint(half).unwrap(),
        Fr::from((1u64 << 52) - 1),
        Fr::from(1u64 << 52),
        two.pow([104]),
        two.pow([253]),
    ];
    v.push(-two.pow([253]));
    v.push(Fr::from_le_bytes_mod_order(&[0xff; 31]));
    v
}

fn reference(left: &[Fr], right: &[Fr]) -> Vec<Fr> {
    left.iter()
        .zip(right)
        .map(|(l, r)| poseidon_light(&[*l, *r]).unwrap())
        .collect()
}

/// Hashes `left`/`right` pairwise three ways (default batch path, scalar, hasher level) and
/// checks all against light-poseidon.
fn check(left: &[Fr], right: &[Fr]) {
    let n = left.len();
    let want = reference(left, right);
    let mut batched = vec![Fr::from(0u64); n];
    hash_pairs(left, right, &mut batched);
    assert_eq!(batched, want, "hash_pairs, {n} pairs");
    let mut scalar = vec![Fr::from(0u64); n];
    hash_pairs_interleaved::<1>(left, right, &mut scalar);
    assert_eq!(scalar, want, "scalar, {n} pairs");
    let children: Vec<Fr> = left.iter().zip(right).flat_map(|(l, r)| [*l, *r]).collect();
    let mut level = vec![Fr::from(0u64); n];
    PoseidonHasher::hash_level(&children, &mut level);
    assert_eq!(level, want, "hash_level, {n} pairs");
}

#[test]
fn batches_of_every_length_are_bit_exact() {
    let before = lane_permutations();
    let edges = edges();
    for n in 0..=17usize {
        // Every edge value on each side, shifted so each lane position sees several of them.
        for shift in 0..edges.len() {
            let left: Vec<Fr> = (0..n).map(|i| edges[(i + shift) % edges.len()]).collect();
            let right: Vec<Fr> = (0..n)
                .map(|i| edges[(i * 5 + shift + 3) % edges.len()])
                .collect();
            check(&left, &right);
        }
    }
    if ifma_available() {
        assert!(lane_permutations() > before, "the lanes ran");
    }
}

#[test]
fn circomlib_vector_inside_a_batch() {
    // Poseidon(1, 2) from circomlib's tests, at every lane position of a batch of 11.
    let want = fr_from_be_bytes(
        &(0..32)
            .map(|i| {
                u8::from_str_radix(
                    &"115cc0f5e7d690413df64c6b9662e9cf2a3617f2743245519e19607a4417189a"
                        [2 * i..2 * i + 2],
                    16,
                )
                .unwrap()
            })
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    for position in 0..11 {
        let mut left: Vec<Fr> = (0..11u64).map(|i| Fr::from(i * 1000 + 5)).collect();
        let mut right = left.clone();
        left[position] = Fr::from(1u64);
        right[position] = Fr::from(2u64);
        let mut out = vec![Fr::from(0u64); 11];
        hash_pairs(&left, &right, &mut out);
        assert_eq!(out[position], want, "lane {position}");
    }
}

#[test]
fn permute_first_many_equals_permute_on_random_states() {
    // Whole states (word 0 nonzero too), every width the hasher uses.
    fn run<const T: usize>() {
        let p = FastPoseidon::<T>::new().unwrap();
        let states: Vec<[Fr; T]> = (0..19u64)
            .map(|i| core::array::from_fn(|w| Fr::from(i * 31 + w as u64).pow([7]) - Fr::from(i)))
            .collect();
        let mut got = vec![Fr::from(0u64); states.len()];
        p.permute_first_many(&states, &mut got);
        for (state, g) in states.iter().zip(&got) {
            let mut s = *state;
            p.permute_reference(&mut s);
            assert_eq!(*g, s[0], "t = {T}");
        }
    }
    run::<2>();
    run::<3>();
    run::<4>();
}

fn fr_strategy() -> impl Strategy<Value = Fr> {
    prop_oneof![
        any::<[u8; 32]>().prop_map(|b| Fr::from_le_bytes_mod_order(&b)),
        (0..12usize).prop_map(|i| edges()[i]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Lanes (where present) = scalar = light-poseidon on random batches.
    #[test]
    fn random_batches_are_bit_exact(pairs in prop::collection::vec((fr_strategy(), fr_strategy()), 0..40)) {
        let (left, right): (Vec<Fr>, Vec<Fr>) = pairs.into_iter().unzip();
        check(&left, &right);
    }
}

#[test]
fn canonical_outputs() {
    // Every digest re-encodes to fewer than 254 bits: the lanes hand back canonical values.
    let left: Vec<Fr> = (0..64u64).map(|i| -Fr::from(i + 1)).collect();
    let right = left.clone();
    let mut out = vec![Fr::from(0u64); 64];
    hash_pairs(&left, &right, &mut out);
    for x in out {
        assert!(x.into_bigint() < Fr::MODULUS);
        assert!(x.into_bigint().num_bits() <= 254);
    }
}
