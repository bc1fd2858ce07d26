//! RLN proofs at depth 20 with our sled tree and with rln 3.0.0's `PmTree` as the membership
//! backend: the Merkle witness extraction (the tree's share), proof generation and verification
//! (zerokit's verifier and our verifying-key-only one).
//!
//! `cargo run --release -p tree-bench --bin rln_proofs [-- --quick]`

use std::time::{Duration, Instant};

use hasher::{Fr, PoseidonHasher};
use rln::prelude::{
    PmTree, PmTreeSledConfig, PoseidonHash, RLNBuilder, RLNMerkleProof, RLNWitnessInput, SecretFr,
    SledDB,
};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::verifier::RlnVerifier;
use rln_glue::witness::RlnWitness;
use tree_bench::fmt_duration;
use tree_core::{Depth, MerkleTree, MerkleTreeExt};
use tree_sled::{SledConfig, SledMerkleTree};
use zerokit_utils::merkle_tree::{ZerokitMerkleProof, ZerokitMerkleTree};

const LIMIT: u64 = 20;

fn median(samples: Vec<Duration>) -> Duration {
    tree_bench::Stats::from_samples(samples).median
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let members: u64 = if quick { 1_000 } else { 10_000 };
    let reps = if quick { 3 } else { 9 };
    let depth = Depth::new(20)?;
    let secrets: Vec<IdentitySecret> = (0..members)
        .map(|i| IdentitySecret::new(Fr::from(i * 31 + 7)))
        .collect();
    let leaves: Vec<Fr> = secrets
        .iter()
        .map(|s| rate_commitment(id_commitment(s), Fr::from(LIMIT)))
        .collect();
    let x = hash_to_field_le(b"benchmark message");
    let ext = external_nullifier(Fr::from(1u64), hash_to_field_le(b"canopy-bench"));

    let dir = tempfile::tempdir()?;
    let mut ours =
        SledMerkleTree::<PoseidonHasher>::open(&SledConfig::new(dir.path().join("ours")), depth)?;
    ours.set_range(0, leaves.iter().copied())?;
    let config = PmTreeSledConfig::new()
        .path(dir.path().join("pmtree"))
        .build()?;
    let mut theirs = PmTree::<SledDB, PoseidonHash>::new(20, Fr::from(0u64), config)?;
    theirs.set_range(0, leaves.iter().copied())?;
    assert_eq!(ours.root(), theirs.root());

    let pick = |k: usize| (k as u64 * 7919) % members;
    // Witness extraction: the part of a proof the tree is responsible for.
    let mut ours_witness = Vec::new();
    let mut theirs_witness = Vec::new();
    let mut witnesses = Vec::new();
    let (mut ours_proof, mut theirs_proof) = (Vec::new(), Vec::new());
    for k in 0..reps * 10 {
        let i = pick(k);
        let started = Instant::now();
        std::hint::black_box(ours.proof(i)?);
        ours_proof.push(started.elapsed());
        let started = Instant::now();
        std::hint::black_box(theirs.proof(i as usize)?);
        theirs_proof.push(started.elapsed());
        let started = Instant::now();
        let w = RlnWitness::from_tree(
            &ours,
            i,
            &secrets[i as usize],
            Fr::from(LIMIT),
            Fr::from(0u64),
            x,
            ext,
        )?;
        let zk = w.to_zerokit()?;
        ours_witness.push(started.elapsed());
        let started = Instant::now();
        let proof = theirs.proof(i as usize)?;
        let mut secret = secrets[i as usize].expose();
        let theirs_zk = RLNWitnessInput::new_single()
            .identity_secret(SecretFr::from(&mut secret))
            .user_message_limit(Fr::from(LIMIT))
            .merkle_proof(RLNMerkleProof::new(
                proof.get_path_elements(),
                proof.get_path_index(),
            ))
            .x(x)
            .external_nullifier(ext)
            .message_id(Fr::from(0u64))
            .build()?;
        theirs_witness.push(started.elapsed());
        assert_eq!(w.path_elements, proof.get_path_elements());
        drop(theirs_zk);
        witnesses.push(zk);
    }
    let prover = RLNBuilder::stateless().build();
    let verifier = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes())?;
    let (mut prove, mut verify_zk, mut verify_ours) = (Vec::new(), Vec::new(), Vec::new());
    for w in witnesses.iter().take(reps) {
        let started = Instant::now();
        let (proof, values) = prover.generate_proof(w)?;
        prove.push(started.elapsed());
        let started = Instant::now();
        assert!(prover.verify(&proof, &values)?);
        verify_zk.push(started.elapsed());
        let inputs = [
            values.y().unwrap_or_default(),
            values.root(),
            values.nullifier().unwrap_or_default(),
            values.x(),
            values.external_nullifier(),
        ];
        let started = Instant::now();
        assert!(verifier.verify_inputs(&proof, &inputs));
        verify_ours.push(started.elapsed());
    }
    let (ow, tw, p) = (median(ours_witness), median(theirs_witness), median(prove));
    println!(
        "RLN proofs, depth 20, {members} members, rln 3.0.0 prover (stateless), 2 rayon threads\n"
    );
    println!("| step | SledMerkleTree | rln PmTree | PmTree / ours |\n|---|---|---|---|");
    let (op, tp) = (median(ours_proof), median(theirs_proof));
    println!(
        "| Merkle proof alone | {} | {} | {:.1}x |",
        fmt_duration(op),
        fmt_duration(tp),
        tp.as_secs_f64() / op.as_secs_f64()
    );
    println!(
        "| Merkle witness (proof, witness struct; ours also checks the leaf is the member's rate commitment: 2 Poseidon hashes) | {} | {} | {:.1}x |",
        fmt_duration(ow),
        fmt_duration(tw),
        tw.as_secs_f64() / ow.as_secs_f64()
    );
    println!(
        "| Groth16 proof generation | {} | {} | |",
        fmt_duration(p),
        fmt_duration(p)
    );
    println!(
        "| tree's share of witness + proof | {:.3}% | {:.3}% | |",
        100.0 * ow.as_secs_f64() / (ow + p).as_secs_f64(),
        100.0 * tw.as_secs_f64() / (tw + p).as_secs_f64()
    );
    println!(
        "| verification: zerokit's verifier / ours (vk only) | {} / {} | | |",
        fmt_duration(median(verify_zk)),
        fmt_duration(median(verify_ours))
    );
    Ok(())
}
