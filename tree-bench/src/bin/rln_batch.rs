//! RLN proof verification for relays: proofs per second on 1,024 distinct proofs, zerokit's
//! verifier one at a time against ours one at a time and batched (`RlnVerifier::verify_batch`),
//! on 1 and 2 threads; the cost of a batch holding one bad proof (bisection); what decoding
//! with point validation costs; and the `min_parallel_proofs` sweep.
//!
//! Every figure starts from bytes, as a relay receives them: zerokit's rows include its
//! `Proof::deserialize_compressed` (which validates points), ours our decoding (the same).
//! "One at a time" on 2 threads verifies two proofs at once (rayon over the proofs), so both
//! sides use both cores.
//!
//! `cargo run --release -p tree-bench --bin rln_batch [-- --quick]`

use std::time::{Duration, Instant};

use ark_serialize::CanonicalDeserialize;
use hasher::Fr;
use rand::{rngs::StdRng, Rng, SeedableRng};
use rayon::prelude::*;
use rln::prelude::{Proof, RLNBuilder};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::verifier::{
    proof_from_bytes, proof_to_bytes, rerandomize, BatchConfig, ProofItem, RlnVerifier, Verdict,
};
use rln_glue::witness::{PublicValues, RlnWitness};
use tree_bench::fmt_duration;
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

const LIMIT: u64 = 10;

struct Message {
    bytes: Vec<u8>,
    values: PublicValues,
}

/// `n` distinct valid messages: `real` proofs from rln's prover, re-randomized.
fn messages(n: usize, real: usize) -> Result<(Vec<Message>, Fr), Box<dyn std::error::Error>> {
    let mut rng = StdRng::seed_from_u64(18);
    let secrets: Vec<IdentitySecret> = (0..real)
        .map(|i| IdentitySecret::new(Fr::from(i as u64 * 977 + 5)))
        .collect();
    let mut tree = OptimalMerkleTree::<hasher::PoseidonHasher>::new(Depth::new(20)?);
    for s in &secrets {
        tree.update_next(rate_commitment(id_commitment(s), Fr::from(LIMIT)))?;
    }
    let prover = RLNBuilder::stateless().build();
    let verifier = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes())?;
    let mut proofs = Vec::new();
    for (k, secret) in secrets.iter().enumerate() {
        let witness = RlnWitness::from_tree(
            &tree,
            k as u64,
            secret,
            Fr::from(LIMIT),
            Fr::from(0u64),
            hash_to_field_le(format!("relay message {k}").as_bytes()),
            external_nullifier(Fr::from(1u64), hash_to_field_le(b"rln-batch-bench")),
        )?;
        let (proof, _) = prover.generate_proof(&witness.to_zerokit()?)?;
        proofs.push((proof, witness.public_values()));
    }
    let out = (0..n)
        .map(|i| {
            let (proof, values) = &proofs[i % real];
            Message {
                bytes: proof_to_bytes(&rerandomize(proof, verifier.verifying_key(), &mut rng)),
                values: *values,
            }
        })
        .collect();
    Ok((out, tree.root()))
}

fn items(messages: &[Message]) -> Vec<ProofItem<'_>> {
    messages
        .iter()
        .map(|m| ProofItem {
            proof: &m.bytes,
            values: m.values,
            x: m.values.x,
        })
        .collect()
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap_or_else(|e| panic!("rayon pool: {e}"))
}

/// The fastest of `reps` runs of `f` (the least disturbed on a shared machine).
fn best(reps: usize, mut f: impl FnMut()) -> Duration {
    (0..reps)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 256 } else { 1024 };
    let reps = if quick { 1 } else { 3 };
    let started = Instant::now();
    let (messages, root) = messages(n, 4)?;
    let roots = [Fr::from(1u64), root];
    println!(
        "RLN batch verification: {n} distinct proofs (4 from rln 3.0.0's prover, re-randomized) \
         made in {:.1} s; best of {reps} runs\n",
        started.elapsed().as_secs_f64()
    );
    let zerokit = RLNBuilder::stateless().build();
    let verifier = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes())?;
    let all = items(&messages);

    let zerokit_one = |m: &Message| {
        let proof = Proof::deserialize_compressed(m.bytes.as_slice());
        let v = m.values;
        let values = v.to_zerokit();
        let ok = proof
            .ok()
            .and_then(|p| zerokit.verify_with_roots(&p, &values, &v.x, &roots).ok());
        assert_eq!(ok, Some(true), "zerokit refused a valid proof");
    };

    println!("| verifier | threads | proofs/s | per proof | vs zerokit (same threads) |");
    println!("|---|---|---|---|---|");
    let mut per_core_64 = Vec::new();
    for threads in [1, 2] {
        let pool = pool(threads);
        let zk = best(reps, || {
            pool.install(|| messages.par_iter().for_each(zerokit_one))
        });
        let row = |name: &str, time: Duration| {
            let rate = n as f64 / time.as_secs_f64();
            println!(
                "| {name} | {threads} | {rate:.0} | {} | {:.2}x |",
                fmt_duration(time / n as u32),
                zk.as_secs_f64() / time.as_secs_f64()
            );
        };
        row("zerokit `verify_with_roots`, one at a time", zk);
        let ours_single = best(reps, || {
            pool.install(|| {
                all.par_iter().for_each(|item| {
                    assert_eq!(verifier.verify_item(item, &roots), Verdict::Valid);
                });
            });
        });
        row("ours `verify_item`, one at a time", ours_single);
        for size in [8, 64, 256, 1024].into_iter().filter(|&s| s <= n) {
            let time = best(reps, || {
                pool.install(|| {
                    for chunk in all.chunks(size) {
                        let verdicts = verifier.verify_batch(chunk, &roots);
                        assert!(verdicts.iter().all(|v| *v == Verdict::Valid));
                    }
                });
            });
            row(&format!("ours `verify_batch`, batches of {size}"), time);
            if size == 64 {
                per_core_64.push((threads, zk.as_secs_f64() / time.as_secs_f64()));
            }
        }
    }

    // One bad proof per batch: the batch check fails and bisection finds it.
    println!("\nOne bad proof per batch (a flipped nullifier at a random position), 2 threads:\n");
    println!("| batch | all valid | one bad | extra cost | bad proof found |");
    println!("|---|---|---|---|---|");
    let pool2 = pool(2);
    let mut rng = StdRng::seed_from_u64(7);
    for size in [8, 64, 256, 1024].into_iter().filter(|&s| s <= n) {
        let valid = best(reps, || {
            pool2.install(|| {
                std::hint::black_box(verifier.verify_batch(&all[..size], &roots));
            });
        });
        let mut spoiled = all[..size].to_vec();
        let bad = rng.gen_range(0..size);
        spoiled[bad].values.nullifier += Fr::from(1u64);
        let mut found = true;
        let with_bad = best(reps, || {
            pool2.install(|| {
                let verdicts = verifier.verify_batch(&spoiled, &roots);
                found &= verdicts
                    .iter()
                    .enumerate()
                    .all(|(i, v)| (*v == Verdict::BadProof) == (i == bad));
            });
        });
        println!(
            "| {size} | {} | {} | {:.2}x | {} |",
            fmt_duration(valid),
            fmt_duration(with_bad),
            with_bad.as_secs_f64() / valid.as_secs_f64(),
            if found { "yes, only it" } else { "NO" }
        );
    }

    // Decoding: what point validation (on the curve; B in G2) costs per proof, on one thread:
    // arkworks' validating decoder (zerokit's), ours (G2 by the endomorphism test), none.
    let decode = |how: u8| {
        best(reps, || {
            for m in &messages {
                let ok = match how {
                    0 => Proof::deserialize_compressed(m.bytes.as_slice()).is_ok(),
                    1 => proof_from_bytes(&m.bytes).is_ok(),
                    _ => Proof::deserialize_compressed_unchecked(m.bytes.as_slice()).is_ok(),
                };
                assert!(ok);
            }
        }) / n as u32
    };
    let (theirs, ours, unchecked) = (decode(0), decode(1), decode(2));
    println!("\nDecoding a proof, 1 thread (included in every figure above):\n");
    println!("| decoder | per proof | validation's share |\n|---|---|---|");
    for (name, time) in [
        ("arkworks, validating (zerokit's)", theirs),
        (
            "ours (`proof_from_bytes`: G2 by the endomorphism test)",
            ours,
        ),
        ("no validation (unsafe: for scale only)", unchecked),
    ] {
        println!(
            "| {name} | {} | {} |",
            fmt_duration(time),
            fmt_duration(time.saturating_sub(unchecked))
        );
    }

    // The threshold: proofs per rayon task on 2 threads.
    println!("\n`min_parallel_proofs` sweep, 2 threads, batches of 64:\n");
    println!("| min_parallel_proofs | proofs/s |\n|---|---|");
    for min in [1, 2, 4, 8, 16, 32, 64] {
        let v = verifier.clone().with_batch_config(BatchConfig {
            min_parallel_proofs: min,
        });
        let time = best(reps, || {
            pool2.install(|| {
                for chunk in all.chunks(64) {
                    std::hint::black_box(v.verify_batch(chunk, &roots));
                }
            });
        });
        let default = if min == BatchConfig::default().min_parallel_proofs {
            " (default)"
        } else {
            ""
        };
        println!("| {min}{default} | {:.0} |", n as f64 / time.as_secs_f64());
    }
    for (threads, ratio) in per_core_64 {
        println!(
            "\nbatches of 64 on {threads} thread(s): {ratio:.2}x zerokit's proofs/s (target >= 3x)"
        );
    }
    Ok(())
}
