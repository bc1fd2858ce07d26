//! RLN proof generation on rln 3.0.0's shipped depth-20 circuit and proving key, per proof, on 1
//! and 2 threads, interleaved: rln's full proof (`RLN::generate_proof`: witness calculation and
//! arkworks' Groth16), rln's partial proof (`generate_partial_proof` once per member, then
//! `finish_proof` per message), and ours (`rln_glue::proving::RlnProver`: our witness-graph
//! evaluator, the quotient's FFTs, fixed-base MSM tables; and our own partial proof and
//! finish), with our steps apart; the scalar shapes the MSMs are fed; then the
//! start-up cost and memory of our tables. Every proof of ours is checked by our verifier.
//!
//! `cargo run --release -p tree-bench --bin rln_prover [-- --quick] [--arithmetic portable|ifma]`
//! (default: IFMA lanes where the CPU has them; `portable` measures the ark-ff path).

use std::time::{Duration, Instant};

use ark_ff::{BigInteger, PrimeField};
use hasher::{Fr, PoseidonHasher};
use prover::{Arithmetic, ProverConfig};
use rln::prelude::{RLNBuilder, RLNMerkleProof, RLNPartialWitnessInput, SecretFr};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::proving::RlnProver;
use rln_glue::verifier::RlnVerifier;
use rln_glue::witness::RlnWitness;
use tree_bench::{fmt_duration, proc_status_bytes, Stats};
use tree_core::{Depth, MerkleTreeExt, OptimalMerkleTree};

const LIMIT: u64 = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let reps = if quick { 3 } else { 11 };
    let arithmetic = match args.iter().position(|a| a == "--arithmetic") {
        // The names ProverConfig's serde form uses.
        Some(i) => serde_json::from_value(serde_json::Value::String(
            args.get(i + 1)
                .ok_or("--arithmetic needs auto, portable or ifma")?
                .clone(),
        ))?,
        None => Arithmetic::Auto,
    };
    let config = ProverConfig {
        arithmetic,
        ..ProverConfig::default()
    };

    // Start-up: rln's proving key (shared by both sides), then our tables.
    let rss = || proc_status_bytes("VmRSS").unwrap_or(0);
    let rss0 = rss();
    let t = Instant::now();
    let _ = rln::prelude::default_zkey_single();
    let zkey_load = t.elapsed();
    let rss1 = rss();
    let t = Instant::now();
    let ours = RlnProver::load_with(&config)?;
    let tables_build = t.elapsed();
    let rss2 = rss();
    let circuit = ours.circuit();
    let theirs = RLNBuilder::stateless().build();
    let verifier = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes())?;

    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20)?);
    let secrets: Vec<IdentitySecret> = (0..reps as u64)
        .map(|i| IdentitySecret::new(Fr::from(i * 7_919 + 13)))
        .collect();
    for s in &secrets {
        tree.update_next(rate_commitment(id_commitment(s), Fr::from(LIMIT)))?;
    }
    let witnesses: Vec<RlnWitness> = secrets
        .iter()
        .enumerate()
        .map(|(k, s)| {
            RlnWitness::from_tree(
                &tree,
                k as u64,
                s,
                Fr::from(LIMIT),
                Fr::from(1u64),
                hash_to_field_le(format!("message {k}").as_bytes()),
                external_nullifier(Fr::from(1u64), hash_to_field_le(b"rln_prover bench")),
            )
        })
        .collect::<Result<_, _>>()?;

    println!(
        "RLN proof generation, rln 3.0.0's depth-20 circuit and zkey, median of {reps} (interleaved)\n"
    );
    println!("| threads | rln full proof | rln partial: precompute | rln partial: finish | ours: full proof | ours: partial | ours: finish | rln full / ours full | rln finish / ours full | rln finish / ours finish | ours: witness | ours: quotient (FFTs) | ours: MSMs |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let mut rows: [Vec<Duration>; 9] = Default::default();
        for w in &witnesses {
            let zk = w.to_zerokit()?;
            let t = Instant::now();
            let (proof, _) = pool.install(|| theirs.generate_proof(&zk))?;
            rows[0].push(t.elapsed());
            if !verifier.verify_inputs(&proof, &w.public_values().as_inputs()) {
                return Err("rln's proof does not verify".into());
            }

            let mut secret = w.identity_secret.expose();
            let partial_input = RLNPartialWitnessInput::new()
                .identity_secret(SecretFr::from(&mut secret))
                .user_message_limit(w.user_message_limit)
                .merkle_proof(RLNMerkleProof::new(
                    w.path_elements.clone(),
                    w.identity_path_index.clone(),
                ))
                .build()?;
            let t = Instant::now();
            let partial = pool.install(|| theirs.generate_partial_proof(&partial_input))?;
            rows[1].push(t.elapsed());
            let t = Instant::now();
            let (proof, _) = pool.install(|| theirs.finish_proof(&partial, &zk))?;
            rows[2].push(t.elapsed());
            if !verifier.verify_inputs(&proof, &w.public_values().as_inputs()) {
                return Err("rln's finished proof does not verify".into());
            }

            let mut rng = rand::rngs::OsRng;
            let t = Instant::now();
            let (proof, values) = pool.install(|| ours.prove(w, &mut rng))?;
            rows[3].push(t.elapsed());
            if !verifier.verify_inputs(&proof, &values.as_inputs()) {
                return Err("our proof does not verify".into());
            }

            let t = Instant::now();
            let partial = pool.install(|| ours.partial(w))?;
            rows[7].push(t.elapsed());
            let t = Instant::now();
            let (proof, values) = pool.install(|| ours.finish(&partial, w, &mut rng))?;
            rows[8].push(t.elapsed());
            if !verifier.verify_inputs(&proof, &values.as_inputs()) {
                return Err("our finished proof does not verify".into());
            }

            // Our steps apart, on the same witness.
            let inputs = w.circuit_inputs();
            let t = Instant::now();
            let z = circuit.graph.witness(&inputs)?;
            rows[4].push(t.elapsed());
            let t = Instant::now();
            let _ = pool.install(|| circuit.prover.quotient(&z))?;
            rows[5].push(t.elapsed());
            let t = Instant::now();
            let _ = pool.install(|| circuit.prover.prove(&z, &mut rng))?;
            rows[6].push(t.elapsed());
        }
        let [full, pre, finish, ours_total, witness, quotient, prove, ours_pre, ours_finish] =
            rows.map(|samples| Stats::from_samples(samples).median);
        let msms = prove.saturating_sub(quotient);
        println!(
            "| {threads} | {} | {} | {} | {} | {} | {} | {:.2}x | {:.2}x | {:.2}x | {} | {} | {} |",
            fmt_duration(full),
            fmt_duration(pre),
            fmt_duration(finish),
            fmt_duration(ours_total),
            fmt_duration(ours_pre),
            fmt_duration(ours_finish),
            full.as_secs_f64() / ours_total.as_secs_f64(),
            finish.as_secs_f64() / ours_total.as_secs_f64(),
            finish.as_secs_f64() / ours_finish.as_secs_f64(),
            fmt_duration(witness),
            fmt_duration(quotient),
            fmt_duration(msms),
        );
    }
    // What the MSMs are fed: the scalar shapes of a real assignment and of H.
    let z = circuit.graph.witness(&witnesses[0].circuit_inputs())?;
    let h = circuit.prover.quotient(&z)?;
    for (name, scalars) in [("assignment", &z), ("H", &h)] {
        let bits = |f: &Fr| f.into_bigint().num_bits();
        let count = |p: &dyn Fn(u32) -> bool| scalars.iter().filter(|f| p(bits(f))).count();
        println!(
            "{name}: {} scalars: {} zero, {} one, {} of 2..=16 bits, {} of 17..=64 bits, {} wider (negatives count as wide)",
            scalars.len(),
            count(&|b| b == 0),
            scalars.iter().filter(|f| **f == Fr::from(1u8)).count(),
            count(&|b| (2..=16).contains(&b)),
            count(&|b| (17..=64).contains(&b)),
            count(&|b| b > 64),
        );
    }
    println!(
        "\nStart-up: rln's zkey {} (+{:.1} MiB RSS, shared); our tables {} on the default rayon pool (+{:.1} MiB RSS; tables {:.1} MiB, arithmetic {arithmetic:?}, IFMA on this CPU: {})",
        fmt_duration(zkey_load),
        rss1.saturating_sub(rss0) as f64 / (1024.0 * 1024.0),
        fmt_duration(tables_build),
        rss2.saturating_sub(rss1) as f64 / (1024.0 * 1024.0),
        ours.table_bytes() as f64 / (1024.0 * 1024.0),
        prover::lanes::ifma_available(),
    );
    Ok(())
}
