//! Batch verification: many RLN proofs under one verifying key checked with one product of
//! pairings, the way a relay should check the messages it forwards.
//!
//! Proof i is valid when `e(A_i, B_i) = e(α, β) · e(L_i, γ) · e(C_i, δ)`, with `L_i` the
//! verifying key's public-input combination of its values. With independent random scalars
//! `r_i` of 128 bits (a CSPRNG's, never zero), the batch is accepted when
//!
//! ```text
//! Π e(r_i·A_i, B_i) · e(Σ r_i·L_i, −γ) · e(Σ r_i·C_i, −δ) = e(α, β)^(Σ r_i)
//! ```
//!
//! which a batch holding an invalid proof passes with probability at most 2^-128 (the
//! small-exponent test of Bellare, Garay and Rabin; bellman's Groth16 batch verifier is the same
//! check). Each proof costs one Miller loop over its `B_i` and a 128-bit scalar multiplication;
//! `Σ r_i·L_i` is one 6-point multi-scalar multiplication of per-input sums of `r_i·x_ij`,
//! `Σ r_i·C_i` one MSM, and the whole batch one final exponentiation.
//!
//! When the product is not 1, bisection finds the invalid proofs: the left half is checked
//! anew and the right half's value is the parent's divided by the left's (the check is a
//! homomorphism once exponentiated, so no pairing is spent on it). A half whose value is 1 is
//! valid; a single proof's value is its own equation raised to `r_i ≠ 0` in a group of prime
//! order, so it is 1 exactly when single verification accepts it — the verdict is the same, not
//! just likely the same. One bad proof among n costs about n more Miller loops and log₂ n final
//! exponentiations.

use ark_bn254::{Bn254, Fr, G1Affine, G1Projective};
use ark_ec::pairing::{MillerLoopOutput, Pairing, PairingOutput};
use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::{One, Zero};
use rand::Rng;
use rayon::prelude::*;

use super::{precheck, ProofItem, RlnVerifier, Verdict};

/// How a batch is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchConfig {
    /// Proofs per rayon task: decoding, weighting and the Miller loops of a batch are split into
    /// tasks of at least this many proofs, so a batch smaller than twice this runs on the
    /// calling thread. Measured by `rln_batch` (tree-bench): one proof's share of the work
    /// (~0.2 ms) dwarfs rayon's dispatch (~µs), so the threshold is small.
    pub min_parallel_proofs: usize,
}

impl BatchConfig {
    /// The smallest rayon task in proofs (a configured 0 counts as 1).
    fn task(self) -> usize {
        self.min_parallel_proofs.max(1)
    }
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            min_parallel_proofs: 4,
        }
    }
}

/// A decoded proof that passed the cheap checks, weighted by its random scalar.
struct Weighted {
    /// Its position in the caller's batch.
    index: usize,
    /// The random scalar `r_i`.
    r: Fr,
    /// Its public inputs in the circuit's order.
    inputs: [Fr; 5],
    /// `r_i · A_i`.
    a: G1Affine,
    /// `B_i`, its line coefficients computed once for every check it takes part in.
    b: <Bn254 as Pairing>::G2Prepared,
    /// `C_i` (weighted inside the MSM).
    c: G1Affine,
}

/// A nonzero 128-bit scalar from the thread's CSPRNG (ChaCha, seeded by the OS).
fn random_weight(rng: &mut impl Rng) -> Fr {
    loop {
        let r: u128 = rng.gen();
        if r != 0 {
            return Fr::from(r);
        }
    }
}

impl RlnVerifier {
    /// Verifies a batch of messages against `acceptable_roots` and returns one verdict per item,
    /// in order, each the one [`verify_item`](Self::verify_item) would give.
    ///
    /// Items that do not decode, carry a root outside the window or a mismatched signal get
    /// their verdict without entering the pairing check; the rest are checked together (see the
    /// module docs) and, if the batch fails, bisected until every invalid proof is found.
    #[must_use]
    pub fn verify_batch(&self, items: &[ProofItem<'_>], acceptable_roots: &[Fr]) -> Vec<Verdict> {
        let mut verdicts = vec![Verdict::Valid; items.len()];
        let mut rng = rand::thread_rng();
        let weights: Vec<Fr> = items.iter().map(|_| random_weight(&mut rng)).collect();
        let prepared: Vec<Result<Weighted, Verdict>> = items
            .par_iter()
            .zip(weights)
            .enumerate()
            .with_min_len(self.batch.task())
            .map(|(index, (item, r))| {
                let proof = precheck(item, acceptable_roots)?;
                Ok(Weighted {
                    index,
                    r,
                    inputs: item.values.as_inputs(),
                    a: (proof.a * r).into_affine(),
                    b: proof.b.into(),
                    c: proof.c,
                })
            })
            .collect();
        let mut weighted = Vec::with_capacity(prepared.len());
        for (index, entry) in prepared.into_iter().enumerate() {
            match entry {
                Ok(entry) => weighted.push(entry),
                Err(verdict) => verdicts[index] = verdict,
            }
        }
        if !weighted.is_empty() {
            let value = self.batch_value(&weighted);
            for index in self.locate(&weighted, value) {
                verdicts[index] = Verdict::BadProof;
            }
        }
        verdicts
    }

    /// The positions of the invalid proofs among `entries`, whose batch value is `value`.
    fn locate(&self, entries: &[Weighted], value: Option<PairingOutput<Bn254>>) -> Vec<usize> {
        if value.is_some_and(|v| v.is_zero()) {
            return Vec::new();
        }
        if let [single] = entries {
            // The value is this proof's own equation raised to r ≠ 0: not 1 means single
            // verification fails it.
            return vec![single.index];
        }
        let (left, right) = entries.split_at(entries.len() / 2);
        let left_value = self.batch_value(left);
        let right_value = match (value, left_value) {
            (Some(parent), Some(left)) => Some(parent - left),
            _ => self.batch_value(right),
        };
        // The halves are independent: a failing batch of many proofs bisects on both cores.
        let (mut bad, right_bad) = if entries.len() >= 2 * self.batch.task() {
            rayon::join(
                || self.locate(left, left_value),
                || self.locate(right, right_value),
            )
        } else {
            (
                self.locate(left, left_value),
                self.locate(right, right_value),
            )
        };
        bad.extend(right_bad);
        bad
    }

    /// The batch equation's left side over `entries` divided by its right side, after the final
    /// exponentiation: zero (the group's identity, written additively) when the batch is valid.
    fn batch_value(&self, entries: &[Weighted]) -> Option<PairingOutput<Bn254>> {
        let vk = &self.pvk.vk;
        let r_sum: Fr = entries.iter().map(|e| e.r).sum();
        // Σ r_i·L_i = (Σ r_i)·IC_0 + Σ_j (Σ_i r_i·x_ij)·IC_{j+1}: field sums, then 6 points.
        let mut input_scalars = [Fr::zero(); 6];
        input_scalars[0] = r_sum;
        for e in entries {
            for (sum, x) in input_scalars[1..].iter_mut().zip(&e.inputs) {
                *sum += e.r * x;
            }
        }
        let chunk = self
            .batch
            .task()
            .max(entries.len().div_ceil(rayon::current_num_threads().max(1)));
        // The proofs' Miller loops in parallel chunks; meanwhile the two fixed-base pairs.
        let (proofs_loop, fixed_loop) = rayon::join(
            || {
                entries
                    .par_chunks(chunk)
                    .map(|part| {
                        Bn254::multi_miller_loop(
                            part.iter().map(|e| e.a),
                            part.iter().map(|e| e.b.clone()),
                        )
                        .0
                    })
                    .reduce(<Bn254 as Pairing>::TargetField::one, |x, y| x * y)
            },
            || {
                let l = G1Projective::msm_unchecked(&vk.gamma_abc_g1, &input_scalars);
                let (cs, rs): (Vec<G1Affine>, Vec<Fr>) = entries.iter().map(|e| (e.c, e.r)).unzip();
                let c = G1Projective::msm_unchecked(&cs, &rs);
                Bn254::multi_miller_loop(
                    G1Projective::normalize_batch(&[l, c]),
                    [
                        self.pvk.gamma_g2_neg_pc.clone(),
                        self.pvk.delta_g2_neg_pc.clone(),
                    ],
                )
                .0
            },
        );
        let value = Bn254::final_exponentiation(MillerLoopOutput(proofs_loop * fixed_loop))?;
        // e(α, β)^(Σ r_i) from the precomputed e(α, β): a cyclotomic exponentiation is cheaper
        // than a third Miller loop.
        Some(value - PairingOutput(self.pvk.alpha_g1_beta_g2) * r_sum)
    }
}
