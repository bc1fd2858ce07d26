//! Batch verification against zerokit's single verification (rln 3.0.0, `verify_with_roots`):
//! batches of real proofs (a few from rln's prover over our tree, re-randomized into thousands)
//! with tampered items at random positions; every item's verdict must equal zerokit's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use ark_bn254::{Fq, Fq2, G1Affine, G2Affine};
use ark_ec::AffineRepr;
use ark_ff::{Field, UniformRand};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use ark_std::rand::{rngs::StdRng, Rng, SeedableRng};
use hasher::Fr;
use proptest::prelude::*;
use rln::prelude::{Proof, RLNBuilder, VerifyProofError};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::verifier::{
    proof_to_bytes, rerandomize, ProofItem, RlnProof, RlnVerifier, Verdict, PROOF_LEN,
};
use rln_glue::witness::{PublicValues, RlnWitness};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

const LIMIT: u64 = 10;
/// Real proofs from the prover; every other valid proof is a re-randomization of one of them.
const REAL_PROOFS: usize = 4;

/// A valid message: its proof, public values and signal hash.
#[derive(Clone)]
struct Message {
    proof: RlnProof,
    values: PublicValues,
}

struct Fixture {
    verifier: RlnVerifier,
    zerokit: rln::prelude::RLN<
        rln::prelude::Stateless,
        rln::prelude::ArkGroth16Backend<rln::prelude::PoseidonHash>,
    >,
    messages: Vec<Message>,
    roots: Vec<Fr>,
}

/// A handful of real proofs for different members and messages of one tree, made once.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut rng = StdRng::seed_from_u64(18);
        let secrets: Vec<IdentitySecret> = (0..8)
            .map(|_| IdentitySecret::new(Fr::rand(&mut rng)))
            .collect();
        let mut tree = OptimalMerkleTree::<hasher::PoseidonHasher>::new(Depth::new(20).unwrap());
        for s in &secrets {
            tree.update_next(rate_commitment(id_commitment(s), Fr::from(LIMIT)))
                .unwrap();
        }
        let zerokit = RLNBuilder::stateless().build();
        let messages = (0..REAL_PROOFS)
            .map(|k| {
                let x = hash_to_field_le(format!("message {k}").as_bytes());
                let ext = external_nullifier(Fr::from(7u64), hash_to_field_le(b"batch-test"));
                let witness = RlnWitness::from_tree(
                    &tree,
                    k as u64,
                    &secrets[k],
                    Fr::from(LIMIT),
                    Fr::from(k as u64 % LIMIT),
                    x,
                    ext,
                )
                .unwrap();
                let (proof, _) = zerokit
                    .generate_proof(&witness.to_zerokit().unwrap())
                    .unwrap();
                Message {
                    proof,
                    values: witness.public_values(),
                }
            })
            .collect();
        // A window of three roots, the tree's current one among them.
        let roots = vec![Fr::from(11u64), tree.root(), Fr::from(12u64)];
        Fixture {
            verifier: RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes()).unwrap(),
            zerokit,
            messages,
            roots,
        }
    })
}

/// How an item of a batch is spoiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tamper {
    None,
    FlippedInput,
    RootOutsideWindow,
    SignalMismatch,
    SwappedAC,
    NegatedA,
    NegatedB,
    NegatedC,
    IdentityA,
    NotOnCurve,
    G2OutsideSubgroup,
    NonCanonicalCoordinate,
    Truncated,
    Extended,
}

const TAMPERS: [Tamper; 14] = [
    Tamper::None,
    Tamper::FlippedInput,
    Tamper::RootOutsideWindow,
    Tamper::SignalMismatch,
    Tamper::SwappedAC,
    Tamper::NegatedA,
    Tamper::NegatedB,
    Tamper::NegatedC,
    Tamper::IdentityA,
    Tamper::NotOnCurve,
    Tamper::G2OutsideSubgroup,
    Tamper::NonCanonicalCoordinate,
    Tamper::Truncated,
    Tamper::Extended,
];

/// An item as a relay receives it: proof bytes, claimed values, the message's signal hash.
struct Owned {
    bytes: Vec<u8>,
    values: PublicValues,
    x: Fr,
}

/// A G1 x-coordinate with no point above it (x³ + 3 is not a square).
fn x_off_curve(rng: &mut StdRng) -> Fq {
    loop {
        let x = Fq::rand(rng);
        if (x * x * x + Fq::from(3u64)).legendre().is_qnr() {
            return x;
        }
    }
}

/// A point on the G2 twist outside the prime-order subgroup (the cofactor is huge: a random
/// point is outside; checked).
fn g2_outside_subgroup(rng: &mut StdRng) -> G2Affine {
    loop {
        if let Some(p) = G2Affine::get_point_from_x_unchecked(Fq2::rand(rng), rng.gen()) {
            if p.is_on_curve() && !p.is_in_correct_subgroup_assuming_on_curve() {
                return p;
            }
        }
    }
}

fn make_item(message: &Message, tamper: Tamper, rng: &mut StdRng) -> Owned {
    let f = fixture();
    let proof = rerandomize(&message.proof, f.verifier.verifying_key(), rng);
    let mut values = message.values;
    let mut x = values.x;
    let mut p = proof;
    let mut bytes = None;
    match tamper {
        Tamper::None => {}
        Tamper::FlippedInput => match rng.gen_range(0..5) {
            0 => values.y += Fr::from(1u64),
            1 => values.nullifier += Fr::from(1u64),
            2 => values.external_nullifier += Fr::from(1u64),
            // x changes with the signal, so the signal check passes and the pairing fails.
            3 => {
                values.x += Fr::from(1u64);
                x = values.x;
            }
            // Another acceptable root: in the window, but not the one proven.
            _ => values.root = f.roots[0],
        },
        Tamper::RootOutsideWindow => values.root = Fr::rand(rng),
        Tamper::SignalMismatch => x = hash_to_field_le(b"another message"),
        Tamper::SwappedAC => std::mem::swap(&mut p.a, &mut p.c),
        Tamper::NegatedA => p.a = -p.a,
        Tamper::NegatedB => p.b = -p.b,
        Tamper::NegatedC => p.c = -p.c,
        Tamper::IdentityA => p.a = G1Affine::zero(),
        Tamper::NotOnCurve => {
            let mut b = proof_to_bytes(&p);
            let mut x_bytes = Vec::new();
            x_off_curve(rng).serialize_compressed(&mut x_bytes).unwrap();
            // A's x, little-endian; its flag bits (top of the last byte) kept.
            let flags = b[31] & 0xc0;
            b[..32].copy_from_slice(&x_bytes);
            b[31] = (b[31] & 0x3f) | flags;
            bytes = Some(b);
        }
        Tamper::G2OutsideSubgroup => {
            let mut b = proof_to_bytes(&p);
            let mut g2 = Vec::new();
            g2_outside_subgroup(rng)
                .serialize_compressed(&mut g2)
                .unwrap();
            b[32..96].copy_from_slice(&g2);
            bytes = Some(b);
        }
        Tamper::NonCanonicalCoordinate => {
            // C's x written as p + 1: reduced, it would be x = 1, the point (1, ±2) on the curve;
            // a canonical decoder refuses it. The top byte of p + 1 leaves the flag bits free.
            let mut b = proof_to_bytes(&p);
            let flags = b[127] & 0xc0;
            let mut p_plus_one = <Fq as ark_ff::PrimeField>::MODULUS;
            ark_ff::BigInteger::add_with_carry(&mut p_plus_one, &1u64.into());
            let x = ark_ff::BigInteger::to_bytes_le(&p_plus_one);
            b[96..128].copy_from_slice(&x);
            assert_eq!(b[127] & 0xc0, 0);
            b[127] |= flags;
            bytes = Some(b);
        }
        Tamper::Truncated => {
            let mut b = proof_to_bytes(&p);
            b.truncate(rng.gen_range(0..PROOF_LEN));
            bytes = Some(b);
        }
        Tamper::Extended => {
            let mut b = proof_to_bytes(&p);
            b.push(rng.gen());
            bytes = Some(b);
        }
    }
    Owned {
        bytes: bytes.unwrap_or_else(|| proof_to_bytes(&p)),
        values,
        x,
    }
}

/// zerokit's verdict: its proof decoding, then `verify_with_roots`.
fn zerokit_verdict(item: &Owned) -> Verdict {
    let f = fixture();
    // zerokit reads a proof with `Proof::deserialize_compressed` (and rejects trailing bytes in
    // its message framing, as a fixed-length field).
    let Ok(proof) = Proof::deserialize_compressed(item.bytes.as_slice()) else {
        return Verdict::Malformed;
    };
    if item.bytes.len() != PROOF_LEN {
        return Verdict::Malformed;
    }
    let v = item.values;
    let values = v.to_zerokit();
    match f
        .zerokit
        .verify_with_roots(&proof, &values, &item.x, &f.roots)
    {
        Ok(true) => Verdict::Valid,
        Ok(false) => Verdict::BadProof,
        Err(VerifyProofError::InvalidRoot) => Verdict::UnknownRoot,
        Err(VerifyProofError::InvalidSignal) => Verdict::SignalMismatch,
        Err(e) => panic!("zerokit: {e}"),
    }
}

fn as_items(owned: &[Owned]) -> Vec<ProofItem<'_>> {
    owned
        .iter()
        .map(|o| ProofItem {
            proof: &o.bytes,
            values: o.values,
            x: o.x,
        })
        .collect()
}

/// A batch of `size` items, each spoiled with probability `bad_rate`.
fn batch(size: usize, bad_rate: f64, rng: &mut StdRng) -> (Vec<Owned>, Vec<Tamper>) {
    let f = fixture();
    let tampers: Vec<Tamper> = (0..size)
        .map(|_| {
            if rng.gen_bool(bad_rate) {
                TAMPERS[rng.gen_range(1..TAMPERS.len())]
            } else {
                Tamper::None
            }
        })
        .collect();
    let items = tampers
        .iter()
        .map(|&t| {
            let m = &f.messages[rng.gen_range(0..f.messages.len())];
            make_item(m, t, rng)
        })
        .collect();
    (items, tampers)
}

#[test]
fn every_tamper_gets_zerokits_verdict_alone_and_in_a_batch() {
    let f = fixture();
    let mut rng = StdRng::seed_from_u64(1);
    // Each tamper, several times, so random choices inside a tamper are covered.
    let mut owned = Vec::new();
    let mut tampers = Vec::new();
    for _ in 0..3 {
        for &t in &TAMPERS {
            let m = &f.messages[rng.gen_range(0..f.messages.len())];
            owned.push(make_item(m, t, &mut rng));
            tampers.push(t);
        }
    }
    let expected: Vec<Verdict> = owned.iter().map(zerokit_verdict).collect();
    for ((t, e), o) in tampers.iter().zip(&expected).zip(&owned) {
        let want = match t {
            Tamper::None => Verdict::Valid,
            Tamper::RootOutsideWindow => Verdict::UnknownRoot,
            Tamper::SignalMismatch => Verdict::SignalMismatch,
            Tamper::NotOnCurve
            | Tamper::G2OutsideSubgroup
            | Tamper::NonCanonicalCoordinate
            | Tamper::Truncated
            | Tamper::Extended => Verdict::Malformed,
            _ => Verdict::BadProof,
        };
        assert_eq!(*e, want, "zerokit on {t:?}");
        let alone = f.verifier.verify_item(
            &ProofItem {
                proof: &o.bytes,
                values: o.values,
                x: o.x,
            },
            &f.roots,
        );
        assert_eq!(alone, *e, "verify_item on {t:?}");
    }
    let items = as_items(&owned);
    assert_eq!(f.verifier.verify_batch(&items, &f.roots), expected);
}

#[test]
fn batches_of_1_to_1024_with_tampered_items_equal_zerokit() {
    let f = fixture();
    let mut rng = StdRng::seed_from_u64(2);
    for (size, bad_rate) in [
        (1, 0.5),
        (2, 0.5),
        (3, 0.3),
        (7, 0.2),
        (64, 0.05),
        (257, 0.02),
        (1024, 0.004),
    ] {
        let (owned, tampers) = batch(size, bad_rate, &mut rng);
        let expected: Vec<Verdict> = owned.iter().map(zerokit_verdict).collect();
        let got = f.verifier.verify_batch(&as_items(&owned), &f.roots);
        for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(g, e, "batch of {size}, item {i} ({:?})", tampers[i]);
        }
        assert_eq!(got.len(), size);
    }
}

#[test]
fn all_valid_batches_are_accepted_and_distinct() {
    let f = fixture();
    let mut rng = StdRng::seed_from_u64(3);
    let (owned, _) = batch(1024, 0.0, &mut rng);
    // Re-randomized proofs are distinct proofs, not copies.
    let distinct: std::collections::HashSet<&Vec<u8>> = owned.iter().map(|o| &o.bytes).collect();
    assert_eq!(distinct.len(), owned.len());
    let items = as_items(&owned);
    for size in [1, 8, 64, 1024] {
        let verdicts = f.verifier.verify_batch(&items[..size], &f.roots);
        assert!(verdicts.iter().all(|v| *v == Verdict::Valid), "size {size}");
    }
    assert!(f.verifier.verify_batch(&[], &f.roots).is_empty());
}

#[test]
fn a_batch_with_one_bad_proof_finds_exactly_it_at_every_position() {
    let f = fixture();
    let mut rng = StdRng::seed_from_u64(4);
    let (mut owned, _) = batch(33, 0.0, &mut rng);
    let items_valid = owned.len();
    for position in 0..items_valid {
        let saved = owned[position].values;
        owned[position].values.nullifier += Fr::from(1u64);
        let verdicts = f.verifier.verify_batch(&as_items(&owned), &f.roots);
        for (i, v) in verdicts.iter().enumerate() {
            let want = if i == position {
                Verdict::BadProof
            } else {
                Verdict::Valid
            };
            assert_eq!(*v, want, "bad at {position}, item {i}");
        }
        owned[position].values = saved;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
    ))]

    /// Random batches: random sizes, tampers and positions; verdicts equal zerokit's.
    #[test]
    fn random_batches_equal_zerokit(seed in any::<u64>(), size in 1usize..24, bad_rate in 0.0f64..0.6) {
        let f = fixture();
        let mut rng = StdRng::seed_from_u64(seed);
        let (owned, _) = batch(size, bad_rate, &mut rng);
        let expected: Vec<Verdict> = owned.iter().map(zerokit_verdict).collect();
        prop_assert_eq!(f.verifier.verify_batch(&as_items(&owned), &f.roots), expected);
    }
}
