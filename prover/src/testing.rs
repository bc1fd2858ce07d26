//! Test and benchmark support (feature `test-utils`).

use ark_bn254::Fr;
use ark_ff::UniformRand;
use ark_std::rand::Rng;

/// `n` scalars shaped like a circom witness: a fifth each zero, one, small (below 2^20), small
/// negative, and full-width.
pub fn witness_like<R: Rng>(n: usize, rng: &mut R) -> Vec<Fr> {
    (0..n)
        .map(|_| match rng.gen_range(0..5) {
            0 => Fr::from(0u8),
            1 => Fr::from(1u8),
            2 => Fr::from(rng.gen_range(2..1u64 << 20)),
            3 => -Fr::from(rng.gen_range(1..1u64 << 8)),
            _ => Fr::rand(rng),
        })
        .collect()
}
