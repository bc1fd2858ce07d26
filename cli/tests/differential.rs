//! Differential fuzzing of the JSON-RPC endpoint against the node. A seeded generator writes
//! JSON-RPC requests — every view Canopy answers with arguments at the edges (0, next−1, next,
//! capacity−1, capacity, 2^40−1; members, erased ids, strangers, 0, p, 2^256−1; pages in every
//! order and size), every block form (latest, none, numbers, hashes with and without
//! `requireCanonical`, an orphaned hash, pending, safe, finalized, earliest, 0x0, the future),
//! call objects as nwaku, viem, alloy, ethers and web3.py write them plus mutations (chainId,
//! gas, value forms, fee fields, blob and authorization lists, prefixes, `input` vs `data`,
//! extra or short calldata), batches mixing local, forwarded and invalid items, and framing
//! mutations — and sends each to `canopy follow --serve` and to the node at the same block,
//! between the blocks of a workload on the proxied contract with an upgrade to the
//! root-history implementation and a reorg. Every answer must be the node's: the same HTTP
//! status and the same JSON (result bytes; error code, message and data). Only where a request
//! is no JSON-RPC request at all (a framing mutation) do the two servers word their `-32600`
//! differently: there the codes and ids must match.
//!
//! `CANOPY_DIFF_REQUESTS` (default 5,000) and `CANOPY_DIFF_SEED` size and seed a run. A
//! difference fails the test with the request minimised (batch items alone, then call-object
//! fields dropped); keep it in `differential-regressions.jsonl`, which every run sends first.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use alloy::primitives::{Address, Uint, B256, U256};
use alloy::sol_types::SolCall;
use chain_harness::workload::{Sent, Workload};
use chain_harness::LocalChain;
use common::{follow_and_serve, hex, post, until_applied};
use follower::profile::IMembershipSet as C;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// The BN254 scalar modulus: the first id the contract refuses.
const P: &str = "0x30644e72e131a029b85045b68181585d2833e84879b9709143e1f593f0000001";

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the generator knows of the chain at the moment of a round.
struct Scene {
    contract: Address,
    head: u64,
    head_hash: B256,
    /// A block hash a reorg orphaned (the head's hash before the reorg round).
    orphaned: Option<B256>,
    next: u64,
    members: Vec<U256>,
    registered: Vec<U256>,
}

/// Counts of what the generator made, by kind and name.
#[derive(Default)]
struct Tally(BTreeMap<String, u64>);

impl Tally {
    fn add(&mut self, kind: &str, name: &str) {
        *self.0.entry(format!("{kind}:{name}")).or_default() += 1;
    }
}

fn uint(rng: &mut StdRng, scene: &Scene) -> u64 {
    let capacity = 1u64 << 20;
    let edges = [
        0,
        scene.next.saturating_sub(1),
        scene.next,
        scene.next + 1,
        capacity - 1,
        capacity,
        (1u64 << 32) - 1,
        (1u64 << 40) - 1,
    ];
    if rng.gen_bool(0.5) {
        *edges.choose(rng).unwrap()
    } else {
        rng.gen_range(0..scene.next.max(1) + 2)
    }
}

fn id(rng: &mut StdRng, scene: &Scene, tally: &mut Tally) -> U256 {
    let pick = |ids: &[U256], rng: &mut StdRng| ids.choose(rng).copied().unwrap_or(U256::ZERO);
    let (name, id) = match rng.gen_range(0..7) {
        0 | 1 => ("member", pick(&scene.members, rng)),
        2 => ("registered", pick(&scene.registered, rng)),
        3 => ("stranger", U256::from(rng.gen::<u64>())),
        4 => ("zero", U256::ZERO),
        5 => ("p", P.parse().unwrap()),
        _ => ("max", U256::MAX),
    };
    tally.add("id", name);
    id
}

/// A view's calldata, arguments at the edges, maybe mutated.
fn calldata(rng: &mut StdRng, scene: &Scene, tally: &mut Tally) -> Vec<u8> {
    let views = [
        "root",
        "nextFreeIndex",
        "MERKLE_TREE_DEPTH",
        "deployedBlockNumber",
        "HISTORY_SIZE",
        "getRecentRoots",
        "getRootAt",
        "getMerkleProof",
        "getRateCommitmentsInRangeBoundsInclusive",
        "isInMembershipSet",
        "getMembershipInfo",
    ];
    let view = *views.choose(rng).unwrap();
    tally.add("view", view);
    let mut data = match view {
        "root" => C::rootCall {}.abi_encode(),
        "nextFreeIndex" => C::nextFreeIndexCall {}.abi_encode(),
        "MERKLE_TREE_DEPTH" => C::MERKLE_TREE_DEPTHCall {}.abi_encode(),
        "deployedBlockNumber" => C::deployedBlockNumberCall {}.abi_encode(),
        "HISTORY_SIZE" => C::HISTORY_SIZECall {}.abi_encode(),
        "getRecentRoots" => C::getRecentRootsCall {}.abi_encode(),
        "getRootAt" => C::getRootAtCall {
            position: *[0u8, 1, 4, 5, 6, 255].choose(rng).unwrap(),
        }
        .abi_encode(),
        "getMerkleProof" => C::getMerkleProofCall {
            index: Uint::from(uint(rng, scene) & ((1u64 << 40) - 1)),
        }
        .abi_encode(),
        "getRateCommitmentsInRangeBoundsInclusive" => {
            let (a, b) = (uint(rng, scene), uint(rng, scene));
            let (start, end) = match rng.gen_range(0..4) {
                0 => (a.min(b), a.max(b)),
                1 => (a.max(b), a.min(b)),
                2 => (a, a),
                _ => (0, scene.next.saturating_sub(1)),
            };
            C::getRateCommitmentsInRangeBoundsInclusiveCall {
                startIndex: u32::try_from(start.min(u64::from(u32::MAX))).unwrap(),
                endIndex: u32::try_from(end.min(u64::from(u32::MAX))).unwrap(),
            }
            .abi_encode()
        }
        "isInMembershipSet" => C::isInMembershipSetCall {
            idCommitment: id(rng, scene, tally),
        }
        .abi_encode(),
        _ => C::getMembershipInfoCall {
            idCommitment: id(rng, scene, tally),
        }
        .abi_encode(),
    };
    if rng.gen_bool(0.1) {
        let mutation = match rng.gen_range(0..4) {
            0 => {
                data.push(0);
                "extra byte"
            }
            1 if data.len() > 4 => {
                data.pop();
                "short by a byte"
            }
            2 if data.len() >= 36 => {
                // A dirty high byte in the first argument's word.
                data[4] = 1;
                "dirty argument"
            }
            _ => {
                data[0] ^= 0xff;
                "unknown selector"
            }
        };
        tally.add("calldata", mutation);
    }
    data
}

/// The block parameter: `None` leaves it out.
fn block(rng: &mut StdRng, scene: &Scene, tally: &mut Tally) -> Option<Value> {
    let head = scene.head;
    let orphaned = scene.orphaned.unwrap_or(scene.head_hash);
    let (name, tag) = match rng.gen_range(0..20) {
        0..=4 => ("latest", Some(json!("latest"))),
        5 => ("none", None),
        6 | 7 => ("head number", Some(json!(format!("{head:#x}")))),
        8 => ("head-1", Some(json!(format!("{:#x}", head - 1)))),
        9 => ("hash", Some(json!({"blockHash": scene.head_hash}))),
        10 => (
            "hash canonical",
            Some(json!({"blockHash": scene.head_hash, "requireCanonical": true})),
        ),
        11 => (
            "orphaned canonical",
            Some(json!({"blockHash": orphaned, "requireCanonical": true})),
        ),
        12 => ("orphaned", Some(json!({"blockHash": orphaned}))),
        13 => ("pending", Some(json!("pending"))),
        14 => (
            "safe or finalized",
            Some(json!(*["safe", "finalized"].choose(rng).unwrap())),
        ),
        15 => (
            "earliest or 0x0",
            Some(json!(*["earliest", "0x0"].choose(rng).unwrap())),
        ),
        16 => ("future", Some(json!(format!("{:#x}", head + 1000)))),
        17 => (
            "blockNumber object",
            Some(json!({"blockNumber": format!("{head:#x}")})),
        ),
        18 => ("leading zero", Some(json!(format!("0x0{head:x}")))),
        _ => ("decimal", Some(json!(head.to_string()))),
    };
    tally.add("block", name);
    tag
}

/// A call object as a client writes it, maybe mutated.
fn call_object(rng: &mut StdRng, scene: &Scene, data: &[u8], tally: &mut Tally) -> Value {
    let to = scene.contract;
    let (name, mut object) = match rng.gen_range(0..5) {
        0 => (
            "nwaku",
            json!({
                "from": "0x0000000000000000000000000000000000000000", "to": to,
                "gas": null, "gasPrice": null, "maxFeePerGas": null, "maxPriorityFeePerGas": null,
                "value": "0x0", "nonce": null, "chainId": "0x7a69", "accessList": null,
                "maxFeePerBlobGas": null, "blobVersionedHashes": null, "input": hex(data),
            }),
        ),
        1 => ("viem", json!({"to": to, "data": hex(data)})),
        2 => ("alloy", json!({"to": to, "input": hex(data)})),
        3 => (
            "ethers",
            json!({"to": format!("{to:#x}"), "data": hex(data)}),
        ),
        _ => (
            "web3.py",
            json!({"to": to.to_checksum(None), "data": hex(data), "from": "0x00000000000000000000000000000000000000aa"}),
        ),
    };
    tally.add("object", name);
    if rng.gen_bool(0.3) {
        let field = |o: &mut Value, k: &str, v: Value| o[k] = v;
        let mutation = match rng.gen_range(0..16) {
            0 => {
                field(&mut object, "chainId", json!("0x1"));
                "chainId other"
            }
            1 => {
                field(&mut object, "chainId", json!("0x7a69"));
                "chainId same"
            }
            2 => {
                field(&mut object, "gas", json!("0x0"));
                "gas 0"
            }
            3 => {
                field(&mut object, "gas", json!("0x1c9c380"));
                "gas 30M"
            }
            4 => {
                field(
                    &mut object,
                    "value",
                    json!(*["0x00", "0", "0x1"].choose(rng).unwrap()),
                );
                "value form"
            }
            5 => {
                field(&mut object, "gasPrice", json!("0x1"));
                "gasPrice"
            }
            6 => {
                field(&mut object, "gasPrice", json!("0x1"));
                field(&mut object, "maxFeePerGas", json!("0x1"));
                "gasPrice and maxFeePerGas"
            }
            7 => {
                field(&mut object, "blobVersionedHashes", json!([]));
                "empty blob list"
            }
            8 => {
                field(&mut object, "authorizationList", json!([]));
                "empty authorization list"
            }
            9 => {
                field(&mut object, "to", json!(format!("{to:x}")));
                "to without 0x"
            }
            10 => {
                let bare = hex(data).trim_start_matches("0x").to_owned();
                let key = if object.get("input").is_some() {
                    "input"
                } else {
                    "data"
                };
                field(&mut object, key, json!(bare));
                "data without 0x"
            }
            11 => {
                field(&mut object, "input", json!(hex(data)));
                field(&mut object, "data", json!(hex(data)));
                "input and data equal"
            }
            12 => {
                field(&mut object, "input", json!(hex(data)));
                field(&mut object, "data", json!("0x18160ddd"));
                "input and data differ"
            }
            13 => {
                field(&mut object, "accessList", json!([]));
                "empty access list"
            }
            14 => {
                field(&mut object, "type", json!("0x2"));
                "type"
            }
            _ => {
                field(&mut object, "unknownField", json!(1));
                "unknown field"
            }
        };
        tally.add("mutation", mutation);
    }
    object
}

/// One request object (or a framing mutation, flagged): mostly `eth_call`, some forwarded
/// methods.
fn request(rng: &mut StdRng, scene: &Scene, id: u64, tally: &mut Tally) -> (Value, bool) {
    if rng.gen_bool(0.04) {
        // Not `null`: hardhat's node drops the connection on it, and then stops answering.
        let (name, item) = match rng.gen_range(0..7) {
            0 => ("number", json!(1)),
            1 => ("string", json!("x")),
            2 => (
                "method not a string",
                json!({"jsonrpc": "2.0", "id": id, "method": 5}),
            ),
            4 => ("no jsonrpc", json!({"id": id, "method": "eth_chainId"})),
            5 => (
                "jsonrpc 1.0",
                json!({"jsonrpc": "1.0", "id": id, "method": "eth_chainId"}),
            ),
            6 => (
                "id an object",
                json!({"jsonrpc": "2.0", "id": {}, "method": "eth_chainId"}),
            ),
            _ => ("no method", json!({"jsonrpc": "2.0", "id": id})),
        };
        tally.add("frame", name);
        return (item, true);
    }
    let (method, params) = match rng.gen_range(0..20) {
        0 => ("eth_chainId", json!([])),
        1 => ("eth_blockNumber", json!([])),
        2 => ("eth_getCode", json!([scene.contract, "latest"])),
        3 => ("net_version", json!([])),
        _ => {
            let data = calldata(rng, scene, tally);
            let object = call_object(rng, scene, &data, tally);
            match block(rng, scene, tally) {
                Some(tag) => ("eth_call", json!([object, tag])),
                None => ("eth_call", json!([object])),
            }
        }
    };
    tally.add("method", method);
    (
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        false,
    )
}

/// A request body: one request or a batch; whether any item is a framing mutation.
fn body(rng: &mut StdRng, scene: &Scene, next_id: &mut u64, tally: &mut Tally) -> (Value, bool) {
    let items = if rng.gen_bool(0.7) {
        1
    } else {
        rng.gen_range(2..=6)
    };
    let mut framing = false;
    let mut batch = Vec::new();
    for _ in 0..items {
        *next_id += 1;
        let (item, framed) = request(rng, scene, *next_id, tally);
        framing |= framed;
        batch.push(item);
    }
    if items == 1 {
        tally.add("body", "single");
        (batch.remove(0), framing)
    } else {
        tally.add("body", "batch");
        (Value::Array(batch), framing)
    }
}

/// The shape two answers must share where a request was no JSON-RPC request: codes and ids
/// (each server words its `-32600` its own way).
fn shape(answer: &Value) -> Value {
    match answer {
        Value::Array(items) => Value::Array(items.iter().map(shape).collect()),
        Value::Object(o) => json!({
            "id": o.get("id"),
            "result": o.get("result"),
            "code": o.get("error").and_then(|e| e.get("code")),
        }),
        other => other.clone(),
    }
}

/// Both servers' answers to `body`: (status, JSON) each.
async fn both(canopy: u16, node: u16, body: &Value) -> ((u16, Value), (u16, Value)) {
    let parse = |(status, text): (u16, String)| {
        let answer = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, answer)
    };
    let ours = parse(post(canopy, body.to_string()).await);
    let theirs = parse(post(node, body.to_string()).await);
    (ours, theirs)
}

/// Whether the answers agree (the framing rule where `framing`).
fn agree(ours: &(u16, Value), theirs: &(u16, Value), framing: bool) -> bool {
    if framing {
        shape(&ours.1) == shape(&theirs.1)
    } else {
        ours == theirs
    }
}

/// The smallest request of `body` that still differs: an item of a batch alone, then its call
/// object without each field that the difference does not need.
async fn minimise(canopy: u16, node: u16, body: &Value) -> Value {
    let mut current = body.clone();
    if let Value::Array(items) = body {
        for item in items {
            let (ours, theirs) = both(canopy, node, item).await;
            if ours != theirs {
                current = item.clone();
                break;
            }
        }
    }
    let keys: Vec<String> = current["params"][0]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    for key in keys {
        let mut smaller = current.clone();
        smaller["params"][0].as_object_mut().unwrap().remove(&key);
        let (ours, theirs) = both(canopy, node, &smaller).await;
        if ours != theirs {
            current = smaller;
        }
    }
    current
}

/// The kept regression cases (body, framing), their placeholders filled from `scene`.
fn regressions(scene: &Scene) -> Vec<(Value, bool)> {
    let proof_next = C::getMerkleProofCall {
        index: Uint::from(scene.next),
    }
    .abi_encode();
    let root = C::rootCall {}.abi_encode();
    include_str!("differential-regressions.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|line| {
            let line = line
                .replace("$CONTRACT_BARE", &format!("{:x}", scene.contract))
                .replace("$CONTRACT", &format!("{:#x}", scene.contract))
                .replace("$HEAD_HASH_BARE", &format!("{:x}", scene.head_hash))
                .replace("$HEAD_HASH", &format!("{:#x}", scene.head_hash))
                .replace(
                    "$ORPHANED",
                    &format!("{:#x}", scene.orphaned.unwrap_or(scene.head_hash)),
                )
                .replace("$HEAD", &format!("{:#x}", scene.head))
                .replace("$PROOF_NEXT", &hex(&proof_next))
                .replace("$ROOT", &hex(&root));
            let case: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            (case["body"].clone(), case["framing"] == json!(true))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canopy_answers_as_the_node_under_fuzzing() {
    let total = env_u64("CANOPY_DIFF_REQUESTS", 5_000);
    let seed = env_u64("CANOPY_DIFF_SEED", 38);
    let chain = LocalChain::start().await.unwrap();
    let contract = chain.deploy_membership_proxy(false).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let node = chain.url().port().unwrap();
    let (_dir, _server, canopy) = follow_and_serve(chain.url(), contract, "max_batch = 200\n");
    let direct = follower::ChainClient::new(
        chain.url().clone(),
        contract,
        follower::RetryConfig::default(),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut workload = Workload::new(seed + 1);
    let mut sent = Sent::default();
    let mut tally = Tally::default();
    let rounds = 10u64;
    let (mut compared, mut next_id, mut orphaned) = (0u64, 0u64, None);
    for round in 0..rounds {
        for _ in 0..3 {
            workload.block(&chain, contract, &mut sent).await.unwrap();
        }
        if round == 3 {
            chain.upgrade_membership(contract, true).await.unwrap();
            tally.add("chain", "upgrade");
        }
        if round == 6 {
            // A reorg: the head is replaced by a block at the same height (and one more).
            let head = chain.block_number().await.unwrap();
            let saved = workload.clone();
            let snapshot = chain.snapshot().await.unwrap();
            workload.block(&chain, contract, &mut sent).await.unwrap();
            until_applied(canopy, head + 1).await;
            orphaned = Some(direct.block(head + 1).await.unwrap().hash);
            chain.revert(snapshot).await.unwrap();
            workload = saved;
            workload.reseed(seed + 2);
            for _ in 0..2 {
                workload.block(&chain, contract, &mut sent).await.unwrap();
            }
            tally.add("chain", "reorg");
        }
        let head = chain.block_number().await.unwrap();
        until_applied(canopy, head).await;
        let at = direct.block(head).await.unwrap();
        let scene = Scene {
            contract,
            head,
            head_hash: at.hash,
            orphaned,
            next: direct.next_free_index(at).await.unwrap(),
            members: workload.member_ids().to_vec(),
            registered: workload.registered_ids().to_vec(),
        };
        let mut bodies = regressions(&scene);
        tally.add("regression cases", "sent");
        let share = total / rounds + u64::from(round < total % rounds);
        for _ in 0..share {
            bodies.push(body(&mut rng, &scene, &mut next_id, &mut tally));
        }
        for (i, (request, framing)) in bodies.iter().enumerate() {
            let (ours, theirs) = both(canopy, node, request).await;
            if !agree(&ours, &theirs, *framing) {
                let minimal = minimise(canopy, node, request).await;
                let (ours, theirs) = both(canopy, node, &minimal).await;
                panic!(
                    "round {round} (block {head}), request {i}: Canopy and the node differ.\n\
                     minimised request (keep it in differential-regressions.jsonl):\n{minimal}\n\
                     Canopy: {ours:?}\nnode:   {theirs:?}\nfull request: {request}"
                );
            }
            compared += 1;
        }
    }
    // The comparison means something only if the mirror answered much of it itself.
    let (_, scrape) = common::blocking(move || common::http(canopy, "GET", "/metrics", None)).await;
    let local = common::counter(&scrape, eth_endpoint::REQUESTS, "source=\"local\"");
    let forwarded = common::counter(&scrape, eth_endpoint::REQUESTS, "source=\"forwarded\"");
    println!(
        "{compared} request bodies, 0 differences; seed {seed}; items answered locally {local}, forwarded {forwarded} (minimising included); {sent:?}"
    );
    assert!(local > compared as f64 / 4.0, "{local} local answers only");
    for (name, count) in &tally.0 {
        println!("  {name}: {count}");
    }
    assert!(compared >= total);
    integration_tests::report::record(
        "chain",
        "differential",
        &[("differential_requests", compared), ("mismatches", 0)],
        &[],
    );
}
