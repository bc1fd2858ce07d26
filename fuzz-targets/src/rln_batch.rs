//! RLN batch verification on hostile messages: any bytes become a batch of items (proof bytes,
//! public values, signal), verified against a root window under a verifying key of random
//! points.
//!
//! Invariants: one verdict per item; every item's batch verdict equals its single verdict
//! (`verify_item`, arkworks' Groth16 verifier): what bisection finds is exactly what single
//! verification says; nothing panics.

use std::sync::OnceLock;

use ark_bn254::{Bn254, Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::{CurveGroup, PrimeGroup};
use ark_groth16::VerifyingKey;
use ark_serialize::CanonicalSerialize;
use rand::{rngs::StdRng, Rng, SeedableRng};
use rln_glue::verifier::{ProofItem, RlnVerifier, PROOF_LEN};
use rln_glue::witness::PublicValues;

/// A verifier whose key is random points (no proof is valid under it: every decodable proof
/// goes through the pairing check and, failing, through bisection).
fn verifier() -> &'static RlnVerifier {
    static VERIFIER: OnceLock<Option<RlnVerifier>> = OnceLock::new();
    let built = VERIFIER.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(18);
        let g1 = |rng: &mut StdRng| {
            (G1Projective::generator() * Fr::from(rng.gen::<u64>())).into_affine()
        };
        let g2 = |rng: &mut StdRng| {
            (G2Projective::generator() * Fr::from(rng.gen::<u64>())).into_affine()
        };
        let vk = VerifyingKey::<Bn254> {
            alpha_g1: g1(&mut rng),
            beta_g2: g2(&mut rng),
            gamma_g2: g2(&mut rng),
            delta_g2: g2(&mut rng),
            gamma_abc_g1: (0..6).map(|_| g1(&mut rng)).collect(),
        };
        let mut bytes = Vec::new();
        vk.serialize_compressed(&mut bytes).ok()?;
        RlnVerifier::from_bytes(&bytes).ok()
    });
    match built {
        Some(v) => v,
        None => panic!("a key of valid points must load"),
    }
}

/// The window every item is checked against.
const ROOTS: [u64; 2] = [1, 2];

/// Reads items from `data`: per item a length byte (128 means a full proof), that many proof
/// bytes, a root selector, and five 8-byte public values; the signal is the proof's `x` unless
/// a flag bit says otherwise.
fn items(data: &[u8]) -> Vec<(Vec<u8>, PublicValues, Fr)> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(PROOF_LEN + 1).min(tail.len());
        let (proof, tail) = tail.split_at(len);
        let mut field = [0u8; 41];
        let take = tail.len().min(41);
        field[..take].copy_from_slice(&tail[..take]);
        rest = &tail[take..];
        let value = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&field[1 + 8 * i..9 + 8 * i]);
            Fr::from(u64::from_le_bytes(b))
        };
        let flags = field[0];
        let root = if flags & 1 == 0 {
            Fr::from(ROOTS[usize::from(flags >> 1 & 1)])
        } else {
            value(4)
        };
        let values = PublicValues {
            y: value(0),
            root,
            nullifier: value(1),
            x: value(2),
            external_nullifier: value(3),
        };
        let x = if flags & 4 == 0 {
            values.x
        } else {
            values.x + Fr::from(1u64)
        };
        out.push((proof.to_vec(), values, x));
        if out.len() == 16 {
            break;
        }
    }
    out
}

/// Checks one input.
pub fn run(data: &[u8]) {
    let verifier = verifier();
    let owned = items(data);
    let items: Vec<ProofItem<'_>> = owned
        .iter()
        .map(|(proof, values, x)| ProofItem {
            proof,
            values: *values,
            x: *x,
        })
        .collect();
    let roots: Vec<Fr> = ROOTS.iter().map(|&r| Fr::from(r)).collect();
    let batch = verifier.verify_batch(&items, &roots);
    assert_eq!(batch.len(), items.len(), "one verdict per item");
    for (i, (item, verdict)) in items.iter().zip(&batch).enumerate() {
        assert_eq!(
            *verdict,
            verifier.verify_item(item, &roots),
            "item {i}: the batch verdict differs from single verification"
        );
    }
}

/// Items whose proofs decode (random multiples of the generators: on the curve, B in G2), so
/// mutations reach the pairing check and bisection, not only the decoder.
#[must_use]
pub fn seeds() -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut seeds = Vec::new();
    for count in [1usize, 3, 8] {
        let mut seed = Vec::new();
        for k in 0..count {
            let a: G1Affine =
                (G1Projective::generator() * Fr::from(rng.gen::<u64>())).into_affine();
            let b: G2Affine =
                (G2Projective::generator() * Fr::from(rng.gen::<u64>())).into_affine();
            let c: G1Affine =
                (G1Projective::generator() * Fr::from(rng.gen::<u64>())).into_affine();
            let mut proof = Vec::new();
            if a.serialize_compressed(&mut proof).is_err()
                || b.serialize_compressed(&mut proof).is_err()
                || c.serialize_compressed(&mut proof).is_err()
            {
                continue;
            }
            seed.push(u8::try_from(PROOF_LEN).unwrap_or(128));
            seed.extend_from_slice(&proof);
            // Flags: in-window root (alternating), the proof's own signal.
            seed.push(u8::try_from(k % 2).unwrap_or(0) << 1);
            seed.extend((0..40).map(|_| rng.gen::<u8>()));
        }
        seeds.push(seed);
    }
    seeds
}

#[cfg(test)]
mod tests {
    use super::*;
    use rln_glue::verifier::Verdict;

    /// The seeds reach the pairing check (their proofs decode, their roots are in the window),
    /// so mutations of them exercise the batch check and bisection, not only the decoder.
    #[test]
    fn seeds_reach_the_pairing_check() {
        let roots: Vec<Fr> = ROOTS.iter().map(|&r| Fr::from(r)).collect();
        let mut pairings = 0;
        for seed in seeds() {
            for (proof, values, x) in items(&seed) {
                let item = ProofItem {
                    proof: &proof,
                    values,
                    x,
                };
                if verifier().verify_item(&item, &roots) == Verdict::BadProof {
                    pairings += 1;
                }
            }
            run(&seed);
        }
        assert_eq!(pairings, 1 + 3 + 8);
    }
}
