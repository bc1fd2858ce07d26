//! Figures of `canopy follow` against a local hardhat node (chain-harness):
//! 1. sync of ≥ 10^4 registrations over ≥ 1,000 blocks, by event replay and by state sync: wall
//!    time, blocks/s, members/s, and the split between waiting on the node, decoding, applying;
//! 2. proofs: `GET /proof/{i}` from `canopy follow --serve` against the contract's
//!    `getMerkleProof(i)` by `eth_call` on the same node, 8 concurrent clients, same run;
//! 3. the JSON-RPC endpoint: `eth_call` of `getMerkleProof(i)`, `root()`, `getRecentRoots()`
//!    and `isInMembershipSet(id)` through Canopy and straight to the node with alloy's provider
//!    (8 keep-alive clients), `eth_chainId` (the floor of a local answer), and what Canopy adds
//!    to a forwarded call (`eth_blockNumber`).
//!
//! `cargo build --release -p canopy && cargo run --release -p tree-bench --bin follow_sync`
//! (`-- --blocks B --per-block N --requests R`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::cast_precision_loss)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::BlockId;
use chain_harness::workload::{Sent, Workload};
use chain_harness::LocalChain;
use follower::{ChainClient, Follower, FollowerConfig, RootCheck, SyncMode};
use tree_bench::loopback::{self, get_ok, load};
use tree_core::{Depth, MerkleTree};
use tree_engines::{DbConfig, DbTree, SharedDbTree};

fn follower(
    url: &url::Url,
    contract: alloy::primitives::Address,
    config: FollowerConfig,
) -> Follower {
    let tree = DbTree::open(&DbConfig::default(), Depth::new(20).unwrap()).unwrap();
    let client = ChainClient::new(url.clone(), contract, config.retry).unwrap();
    Follower::new(client, config, Arc::new(SharedDbTree::new(tree))).unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let blocks = loopback::arg("--blocks", 1_000);
    let per_block = loopback::arg("--per-block", 10);
    let requests = loopback::arg("--requests", 2_000);
    let chain = LocalChain::start().await.unwrap();
    let contract = chain.deploy_membership(false).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let mut workload = Workload::new(1);
    let mut sent = Sent::default();
    let started = Instant::now();
    for b in 0..blocks {
        workload
            .register_block(
                &chain,
                contract,
                usize::try_from(per_block).unwrap(),
                10,
                &mut sent,
            )
            .await
            .unwrap();
        if b % 100 == 99 {
            eprintln!(
                "mined {} blocks ({} registrations)",
                b + 1,
                sent.registrations
            );
        }
    }
    let head = chain.block_number().await.unwrap();
    eprintln!(
        "chain ready in {:.1} s: {} registrations in {blocks} blocks",
        started.elapsed().as_secs_f64(),
        sent.registrations
    );

    println!(
        "## Sync from the local node: {} registrations in {blocks} blocks (depth 20)\n",
        sent.registrations
    );
    println!("| mode | wall | blocks/s | members/s | waiting on the node | decoding | hashing + commit | requests |");
    println!("|---|---|---|---|---|---|---|---|");
    // The contract keeps a root history (RootStored per call); without `root_history` the
    // follower reads it as an older contract and checks `root()` by `eth_call`.
    let modes = [
        (
            "event replay, `root()` by eth_call every block (no root history)",
            SyncMode::Replay,
            RootCheck::EveryBlock,
            false,
        ),
        (
            "event replay, `root()` by eth_call every range (no root history)",
            SyncMode::Replay,
            RootCheck::EveryRange,
            false,
        ),
        (
            "event replay, every call's `RootStored` checked (+ `root()` per range)",
            SyncMode::Replay,
            RootCheck::EveryBlock,
            true,
        ),
        (
            "state sync at the head",
            SyncMode::State,
            RootCheck::EveryBlock,
            true,
        ),
    ];
    let mut synced = None;
    for (label, sync, root_check, root_history) in modes {
        let config = FollowerConfig {
            sync,
            root_check,
            profile: follower::ContractProfile {
                root_history,
                ..follower::ContractProfile::default()
            },
            ..FollowerConfig::default()
        };
        let mut f = follower(chain.url(), contract, config);
        let t = Instant::now();
        let outcome = f.sync_to_head().await.unwrap();
        let wall = t.elapsed();
        assert_eq!(outcome.block, head);
        let stats = f.stats();
        let members = f.tree().read(MerkleTree::next_index);
        let blocks_covered = if sync == SyncMode::State { 1 } else { blocks };
        println!(
            "| {label} | {:.2} s | {:.0} | {:.0} | {:.2} s | {:.1} ms | {:.2} s | {} |",
            wall.as_secs_f64(),
            blocks_covered as f64 / wall.as_secs_f64(),
            members as f64 / wall.as_secs_f64(),
            stats.rpc_wait.as_secs_f64(),
            stats.decode.as_secs_f64() * 1e3,
            stats.apply.as_secs_f64(),
            stats.requests,
        );
        synced = Some(f);
    }
    let synced = synced.unwrap();
    let members = synced.tree().read(MerkleTree::next_index);

    // canopy follow --serve on a database of its own.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let server =
        loopback::follow_and_serve(&loopback::canopy_exe(), chain.url(), contract, &db, &[]);
    let port = server.port;
    // Wait until it has synced, its member index included.
    let first_member = format!("/member/{:#x}", workload.member_ids()[0]);
    loop {
        let root = get_ok(port, "/root").await;
        let (status, _) = loopback::request(port, "GET", &first_member, "").await;
        if root.contains(&format!("\"last_block\":{head}")) && status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ours = load(8, requests, move |i| async move {
        get_ok(port, &format!("/proof/{}", (i * 7919) % members)).await;
    })
    .await;
    let client =
        Arc::new(ChainClient::new(chain.url().clone(), contract, Default::default()).unwrap());
    let at = BlockId::Number(head.into());
    let theirs = load(8, requests, move |i| {
        let client = client.clone();
        async move {
            client.merkle_proof((i * 7919) % members, at).await.unwrap();
        }
    })
    .await;
    println!(
        "\n## Proofs of {members} members, 8 concurrent clients, {requests} requests each way\n"
    );
    println!("| source | p50 | p99 | proofs/s |");
    println!("|---|---|---|---|");
    println!(
        "| `GET /proof/{{i}}` from `canopy follow --serve` | {:.0} µs | {:.0} µs | {:.0} |",
        ours.p50.as_secs_f64() * 1e6,
        ours.p99.as_secs_f64() * 1e6,
        ours.throughput
    );
    println!(
        "| `getMerkleProof(i)` by `eth_call` (hardhat node) | {:.0} µs | {:.0} µs | {:.0} |",
        theirs.p50.as_secs_f64() * 1e6,
        theirs.p99.as_secs_f64() * 1e6,
        theirs.throughput
    );
    println!(
        "| eth_call / canopy | {:.1}x | {:.1}x | {:.1}x |",
        theirs.p50.as_secs_f64() / ours.p50.as_secs_f64(),
        theirs.p99.as_secs_f64() / ours.p99.as_secs_f64(),
        ours.throughput / theirs.throughput
    );
    let ids = Arc::new(workload.member_ids().to_vec());
    jsonrpc_figures(port, chain.url(), contract, (members, ids), requests).await;
    let (_, scrape) = loopback::request(port, "GET", "/metrics", "").await;
    let local: f64 = scrape
        .lines()
        .filter(|l| {
            l.starts_with("canopy_jsonrpc_requests_total") && l.contains("source=\"local\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        local >= (5 * requests) as f64,
        "only {local} calls answered locally"
    );
    drop(server);
}

/// `eth_call`s through Canopy's JSON-RPC endpoint and straight to the node, side by side;
/// prints the table.
async fn jsonrpc_figures(
    port: u16,
    node: &url::Url,
    contract: alloy::primitives::Address,
    (members, ids): (u64, Arc<Vec<alloy::primitives::U256>>),
    requests: u64,
) {
    use alloy::providers::{Provider, RootProvider};
    use alloy::rpc::types::{TransactionInput, TransactionRequest};
    use alloy::sol_types::SolCall;
    use follower::profile::IMembershipSet as C;

    let via: RootProvider =
        RootProvider::new_http(format!("http://127.0.0.1:{port}").parse().unwrap());
    let direct: RootProvider = RootProvider::new_http(node.clone());
    let call = move |i: u64, view: &str| {
        let data = match view {
            "getMerkleProof(i)" => C::getMerkleProofCall {
                index: alloy::primitives::Uint::from((i * 7919) % members),
            }
            .abi_encode(),
            "getRecentRoots()" => C::getRecentRootsCall {}.abi_encode(),
            "isInMembershipSet(id)" => C::isInMembershipSetCall {
                idCommitment: ids[usize::try_from(i).unwrap() * 7919 % ids.len()],
            }
            .abi_encode(),
            _ => C::rootCall {}.abi_encode(),
        };
        TransactionRequest::default()
            .to(contract)
            .input(TransactionInput::new(data.into()))
    };
    println!("\n## eth_call through Canopy's JSON-RPC endpoint and straight to the node, 8 keep-alive clients (alloy), {requests} calls each way\n");
    println!("| call | Canopy p50 | Canopy p99 | Canopy calls/s | node p50 | node p99 | node calls/s | p50 ratio | calls/s ratio |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for label in [
        "getMerkleProof(i)",
        "root()",
        "getRecentRoots()",
        "isInMembershipSet(id)",
    ] {
        let call = call.clone();
        let mut rows = Vec::new();
        for provider in [via.clone(), direct.clone()] {
            let call = call.clone();
            rows.push(
                load(8, requests, move |i| {
                    let provider = provider.clone();
                    let request = call(i, label);
                    async move {
                        // `latest`, as nwaku asks (alloy's default is `pending`, which the
                        // node answers).
                        provider
                            .call(request)
                            .block(alloy::eips::BlockId::latest())
                            .await
                            .unwrap();
                    }
                })
                .await,
            );
        }
        println!(
            "{}",
            side_by_side(&format!("`{label}`"), rows[0], rows[1], false)
        );
    }
    // The floor of any local answer: eth_chainId does no tree work, so its p50 is what the
    // HTTP and JSON-RPC layers alone cost under this load.
    let mut floor = Vec::new();
    for provider in [via.clone(), direct.clone()] {
        floor.push(
            load(8, requests, move |_| {
                let provider = provider.clone();
                async move {
                    provider.get_chain_id().await.unwrap();
                }
            })
            .await,
        );
    }
    println!(
        "{}",
        side_by_side(
            "`eth_chainId` (local, no tree work: the floor)",
            floor[0],
            floor[1],
            false
        )
    );
    let mut rows = Vec::new();
    for provider in [via, direct] {
        rows.push(
            load(8, requests, move |_| {
                let provider = provider.clone();
                async move {
                    provider.get_block_number().await.unwrap();
                }
            })
            .await,
        );
    }
    println!(
        "{}",
        side_by_side("`eth_blockNumber` (forwarded)", rows[0], rows[1], true)
    );
}

/// One table row: Canopy's and the node's p50, p99 and calls/s, then the ratios, or (for a
/// forwarded call, `added`) the latency Canopy adds at p50.
fn side_by_side(
    label: &str,
    ours: loopback::LoadResult,
    theirs: loopback::LoadResult,
    added: bool,
) -> String {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let tail = if added {
        format!("added at p50: {:.0} µs | ", us(ours.p50) - us(theirs.p50))
    } else {
        format!(
            "{:.1}x | {:.1}x",
            us(theirs.p50) / us(ours.p50),
            ours.throughput / theirs.throughput
        )
    };
    format!(
        "| {label} | {:.0} µs | {:.0} µs | {:.0} | {:.0} µs | {:.0} µs | {:.0} | {tail} |",
        us(ours.p50),
        us(ours.p99),
        ours.throughput,
        us(theirs.p50),
        us(theirs.p99),
        theirs.throughput,
    )
}
