//! Groth16 proof re-randomization: a fresh, unlinkable proof of the same statement without the
//! prover. Tests use it to hold thousands of distinct valid proofs from a handful of real ones.

use ark_bn254::{Bn254, Fr};
use ark_ec::CurveGroup;
use ark_ff::{Field, UniformRand};
use ark_groth16::VerifyingKey;
use rand::Rng;

use super::RlnProof;

/// A new valid proof for the same public inputs (and an invalid one stays invalid):
/// `A' = ρ⁻¹·A`, `B' = ρ·B + ρσ·δ`, `C' = C + σ·A` for random `ρ ≠ 0` and `σ`, since
/// `e(A', B') = e(A, B)·e(σ·A, δ)` and `e(C', δ) = e(C, δ)·e(σ·A, δ)`.
#[must_use]
pub fn rerandomize(proof: &RlnProof, vk: &VerifyingKey<Bn254>, rng: &mut impl Rng) -> RlnProof {
    let (rho, rho_inv) = loop {
        let rho = Fr::rand(rng);
        if let Some(inv) = rho.inverse() {
            break (rho, inv);
        }
    };
    let sigma = Fr::rand(rng);
    RlnProof {
        a: (proof.a * rho_inv).into_affine(),
        b: (proof.b * rho + vk.delta_g2 * (rho * sigma)).into_affine(),
        c: (proof.c + proof.a * sigma).into_affine(),
    }
}
