//! Batched Poseidon on hostile batches: the IFMA lanes (the workspace's one `unsafe` module)
//! where the CPU has them, against the scalar path and light-poseidon.
//!
//! The bytes choose a batch length (0..=40, so empty batches, tails of every length and several
//! groups of eight), and each input is either a field-edge value (0, 1, p−1, p−2, 2^253, …) or
//! 32 random bytes reduced into the field.
//!
//! Invariants: `hash_pairs` (lanes) and `hash_level` equal the scalar path for every pair,
//! and light-poseidon for the first few; nothing panics.

use ark_ff::{Field, PrimeField};
use hasher::{hash_pairs, hash_pairs_interleaved, poseidon_light, Fr, Hasher, PoseidonHasher};

/// An input from up to 33 bytes: the first picks an edge value or the field reduction.
pub(crate) fn element(bytes: &[u8]) -> Fr {
    let Some((&shape, rest)) = bytes.split_first() else {
        return Fr::from(0u64);
    };
    let two = Fr::from(2u64);
    match shape % 8 {
        0 => Fr::from(0u64),
        1 => Fr::from(1u64),
        2 => -Fr::from(1u64),
        3 => -two,
        4 => two.pow([253]),
        5 => -two.pow([253]),
        _ => Fr::from_le_bytes_mod_order(rest),
    }
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(len % 41);
    let mut chunks = rest.chunks(33);
    let mut next = || element(chunks.next().unwrap_or(&[]));
    let (left, right): (Vec<Fr>, Vec<Fr>) = (0..n).map(|_| (next(), next())).unzip();
    let mut lanes = vec![Fr::from(0u64); n];
    hash_pairs(&left, &right, &mut lanes);
    let mut scalar = vec![Fr::from(0u64); n];
    hash_pairs_interleaved::<1>(&left, &right, &mut scalar);
    assert_eq!(lanes, scalar, "lanes and scalar disagree on {n} pairs");
    let children: Vec<Fr> = left
        .iter()
        .zip(&right)
        .flat_map(|(l, r)| [*l, *r])
        .collect();
    let mut level = vec![Fr::from(0u64); n];
    PoseidonHasher::hash_level(&children, &mut level);
    assert_eq!(level, scalar, "hash_level and scalar disagree on {n} pairs");
    for ((l, r), got) in left.iter().zip(&right).zip(&lanes).take(3) {
        let want = poseidon_light(&[*l, *r]).ok();
        assert_eq!(Some(*got), want, "light-poseidon disagrees");
    }
}

/// A full group plus a tail, with every edge shape.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut seed = vec![11u8];
    for i in 0..22u8 {
        seed.push(i);
        seed.extend((0..32).map(|k| i.wrapping_mul(31).wrapping_add(k)));
    }
    vec![seed, vec![0], vec![8, 2, 3, 4, 5]]
}
