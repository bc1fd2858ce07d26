//! LeanIMT against zk-kit's other two implementations no one here wrote: the Solidity library
//! (`@zk-kit/lean-imt.sol`, in `chain-harness/contracts/LeanGroup.sol` on a hardhat node) and the
//! TypeScript package (`@zk-kit/lean-imt` with poseidon-lite, in Node). One random sequence of
//! inserts, batch inserts, updates and removals per seed: after every operation the contract's
//! `root()`, `size()` and `depth()` equal ours; the contract's updates and removals take our
//! proofs' siblings (and verify them against its root); the TypeScript tree's roots after every
//! operation and its proofs of every leaf equal ours, and its verifier accepts ours.

use std::io::Write;
use std::process::{Command, Stdio};

use alloy::primitives::U256;
use alloy::sol_types::SolValue;
use chain_harness::{calls, LocalChain};
use hasher::{Fr, Lean, PoseidonHasher};
use integration_tests::report;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use tree_core::lean::{LeanImt, LeanProof};
use tree_core::{Depth, OptimalMerkleTree};

type Group = LeanImt<OptimalMerkleTree<Lean<PoseidonHasher>>>;

fn u256(x: &Fr) -> U256 {
    U256::from_be_slice(&hasher::fr_to_be_bytes(x))
}

fn decimal(x: &Fr) -> String {
    x.to_string()
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Fr),
    InsertMany(Vec<Fr>),
    Update(u64, Fr),
    /// TypeScript's `updateMany`; on the chain, one `update` per leaf.
    UpdateMany(Vec<(u64, Fr)>),
    Remove(u64),
}

/// A sequence the contract accepts: leaves unique and non-zero, updates and removals only of
/// leaves still present (the contract finds a leaf by its value; a removed leaf is 0).
fn sequence(seed: u64, len: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut live: Vec<u64> = Vec::new();
    let mut size = 0u64;
    let mut fresh = {
        let mut next = 0u64;
        move |rng: &mut StdRng| {
            next += 1;
            // Small and field-sized values alike, never repeating.
            if rng.gen_bool(0.5) {
                Fr::from(next)
            } else {
                -Fr::from(next)
            }
        }
    };
    let mut ops = Vec::with_capacity(len);
    for _ in 0..len {
        let op = match rng.gen_range(0..10) {
            0..=3 => Op::Insert(fresh(&mut rng)),
            4..=5 => Op::InsertMany(
                (0..rng.gen_range(1..=12))
                    .map(|_| fresh(&mut rng))
                    .collect(),
            ),
            6..=7 if !live.is_empty() => {
                Op::Update(live[rng.gen_range(0..live.len())], fresh(&mut rng))
            }
            8 if !live.is_empty() => {
                let mut picked: Vec<u64> = live.clone();
                picked.sort_unstable();
                picked.dedup();
                let n = rng.gen_range(1..=picked.len().min(6));
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let at = rng.gen_range(0..picked.len());
                    pairs.push((picked.swap_remove(at), fresh(&mut rng)));
                }
                Op::UpdateMany(pairs)
            }
            _ if !live.is_empty() => {
                let at = rng.gen_range(0..live.len());
                Op::Remove(live.swap_remove(at))
            }
            _ => Op::Insert(fresh(&mut rng)),
        };
        match &op {
            Op::Insert(_) => {
                live.push(size);
                size += 1;
            }
            Op::InsertMany(leaves) => {
                live.extend(size..size + leaves.len() as u64);
                size += leaves.len() as u64;
            }
            Op::Update(..) | Op::UpdateMany(_) | Op::Remove(_) => {}
        }
        ops.push(op);
    }
    ops
}

async fn views(chain: &LocalChain, group: alloy::primitives::Address) -> (U256, U256, U256) {
    let [root, size, depth] = calls::lean_views();
    let mut out = [U256::ZERO; 3];
    for (slot, data) in out.iter_mut().zip([root, size, depth]) {
        let bytes = chain.call(group, data).await.unwrap();
        *slot = U256::abi_decode(&bytes).unwrap();
    }
    (out[0], out[1], out[2])
}

fn proof_json(p: &LeanProof<PoseidonHasher>) -> Value {
    json!({
        "root": decimal(&p.root),
        "leaf": decimal(&p.leaf),
        "index": p.index,
        "siblings": p.siblings.iter().map(decimal).collect::<Vec<_>>(),
    })
}

/// zk-kit's TypeScript LeanIMT replaying `ops`.
fn typescript(ops: &[Op], proofs: &[u64], verify: &[Value]) -> Value {
    let ops: Vec<Value> = ops
        .iter()
        .map(|op| match op {
            Op::Insert(x) => json!({ "insert": decimal(x) }),
            Op::InsertMany(xs) => {
                json!({ "insertMany": xs.iter().map(decimal).collect::<Vec<_>>() })
            }
            Op::Update(i, x) => json!({ "update": [i, decimal(x)] }),
            Op::UpdateMany(pairs) => json!({ "updateMany": [
                pairs.iter().map(|(i, _)| i).collect::<Vec<_>>(),
                pairs.iter().map(|(_, x)| decimal(x)).collect::<Vec<_>>(),
            ] }),
            Op::Remove(i) => json!({ "remove": i }),
        })
        .collect();
    let request = json!({ "ops": ops, "proofs": proofs, "verify": verify });
    let mut child = Command::new("node")
        .arg(LocalChain::node_dir().join("lean-imt.js"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(request.to_string().as_bytes())
        .expect("request written");
    let output = child.wait_with_output().expect("node finishes");
    assert!(output.status.success(), "lean-imt.js failed");
    serde_json::from_slice(&output.stdout).expect("JSON from lean-imt.js")
}

/// Runs one seed; returns how many operations the three implementations were compared on.
async fn differential(chain: &LocalChain, seed: u64, len: usize) -> u64 {
    let contract = chain.deploy_lean_group().await.unwrap();
    let ops = sequence(seed, len);
    let mut ours: Group = LeanImt::new(OptimalMerkleTree::new(Depth::new(32).unwrap()));
    let mut roots = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let mut sent = Vec::new();
        match op {
            Op::Insert(x) => {
                ours.insert(*x).unwrap();
                sent.push(calls::lean_insert(u256(x)));
            }
            Op::InsertMany(xs) => {
                ours.insert_many(xs).unwrap();
                sent.push(calls::lean_insert_many(xs.iter().map(u256).collect()));
            }
            Op::Update(i, x) => {
                let proof = ours.proof(*i).unwrap();
                ours.update(*i, *x).unwrap();
                sent.push(calls::lean_update(
                    u256(&proof.leaf),
                    u256(x),
                    proof.siblings.iter().map(u256).collect(),
                ));
            }
            Op::UpdateMany(pairs) => {
                // The contract updates one leaf per call, each with the proof of the tree as it
                // is then: a shadow tree walks those steps; ours takes the one batch.
                let mut shadow = ours.clone();
                for (i, x) in pairs {
                    let proof = shadow.proof(*i).unwrap();
                    shadow.update(*i, *x).unwrap();
                    sent.push(calls::lean_update(
                        u256(&proof.leaf),
                        u256(x),
                        proof.siblings.iter().map(u256).collect(),
                    ));
                }
                let (indices, leaves): (Vec<u64>, Vec<Fr>) = pairs.iter().copied().unzip();
                ours.update_many(&indices, &leaves).unwrap();
                assert_eq!(
                    ours.root(),
                    shadow.root(),
                    "seed {seed} step {step}: update_many vs updates"
                );
            }
            Op::Remove(i) => {
                let proof = ours.proof(*i).unwrap();
                ours.remove(*i).unwrap();
                sent.push(calls::lean_remove(
                    u256(&proof.leaf),
                    proof.siblings.iter().map(u256).collect(),
                ));
            }
        }
        for data in sent {
            let hash = chain.send(contract, data).await.unwrap();
            assert_eq!(
                chain.failed_transactions(&[hash]).await.unwrap(),
                0,
                "seed {seed} step {step}: {op:?} reverted"
            );
        }
        let (root, size, depth) = views(chain, contract).await;
        let our_root = ours.root().unwrap();
        assert_eq!(
            root,
            u256(&our_root),
            "seed {seed} step {step}: root after {op:?}"
        );
        assert_eq!(
            size,
            U256::from(ours.size()),
            "seed {seed} step {step}: size"
        );
        assert_eq!(
            depth,
            U256::from(ours.depth()),
            "seed {seed} step {step}: depth"
        );
        roots.push(decimal(&our_root));
    }

    let indices: Vec<u64> = (0..ours.size()).collect();
    let our_proofs: Vec<Value> = indices
        .iter()
        .map(|&i| proof_json(&ours.proof(i).unwrap()))
        .collect();
    let ts = typescript(&ops, &indices, &our_proofs);
    assert_eq!(ts["roots"], json!(roots), "seed {seed}: TypeScript roots");
    let theirs = ts["proofs"].as_array().expect("proofs");
    assert_eq!(
        theirs.len(),
        our_proofs.len(),
        "seed {seed}: TypeScript proofs"
    );
    for (index, (ours, theirs)) in our_proofs.iter().zip(theirs).enumerate() {
        assert_eq!(
            ours, theirs,
            "seed {seed}: TypeScript proof of leaf {index}"
        );
    }
    let verified = ts["verified"].as_array().expect("verified");
    assert_eq!(verified.len(), indices.len());
    assert!(
        verified.iter().all(|v| v == &json!(true)),
        "seed {seed}: TypeScript verifies ours"
    );
    ops.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leanimt_equals_zk_kit_solidity_and_typescript() {
    let chain = LocalChain::start().await.unwrap();
    let seeds: u64 = std::env::var("CANOPY_LEAN_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut compared = 0;
    for seed in 0..seeds {
        compared += differential(&chain, seed, 30).await;
    }
    report::record(
        "chain",
        "leanimt",
        &[("leanimt_ops", compared), ("mismatches", 0)],
        &[],
    );
}
