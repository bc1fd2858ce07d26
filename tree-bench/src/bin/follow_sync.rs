//! Figures of `canopy follow` against a local hardhat node (chain-harness):
//! 1. sync of ≥ 10^4 registrations over ≥ 1,000 blocks, by event replay and by state sync: wall
//!    time, blocks/s, members/s, and the split between waiting on the node, decoding, applying;
//! 2. proofs: `GET /proof/{i}` from `canopy follow --serve` against the contract's
//!    `getMerkleProof(i)` by `eth_call` on the same node, 8 concurrent clients, same run.
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tree_core::{Depth, MerkleTree};
use tree_sled::{SharedTree, SledConfig, SledMerkleTree};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn follower(
    url: &url::Url,
    contract: alloy::primitives::Address,
    config: FollowerConfig,
) -> Follower {
    let tree = SledMerkleTree::open(&SledConfig::temporary(), Depth::new(20).unwrap()).unwrap();
    let client = ChainClient::new(url.clone(), contract, config.retry).unwrap();
    Follower::new(client, config, Arc::new(SharedTree::new(tree))).unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn http_get(port: u16, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

/// Runs `requests` calls of `call` from 8 concurrent clients: (p50, p99, requests/s).
async fn load<F, Fut>(requests: u64, call: F) -> (Duration, Duration, f64)
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..8u64 {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for i in (client..requests).step_by(8) {
                let t = Instant::now();
                call(i).await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let wall = started.elapsed();
    all.sort();
    (
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.len() as f64 / wall.as_secs_f64(),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let blocks = arg("--blocks", 1_000);
    let per_block = arg("--per-block", 10);
    let requests = arg("--requests", 2_000);
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
    let modes = [
        (
            "event replay, root checked every block",
            SyncMode::Replay,
            RootCheck::EveryBlock,
        ),
        (
            "event replay, root checked every range",
            SyncMode::Replay,
            RootCheck::EveryRange,
        ),
        (
            "state sync at the head",
            SyncMode::State,
            RootCheck::EveryBlock,
        ),
    ];
    let mut synced = None;
    for (label, sync, root_check) in modes {
        let config = FollowerConfig {
            sync,
            root_check,
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
    let exe = std::env::current_exe().unwrap().with_file_name("canopy");
    assert!(
        exe.exists(),
        "build it first: cargo build --release -p canopy"
    );
    let mut server = std::process::Command::new(&exe)
        .args([
            "follow",
            "--rpc",
            chain.url().as_str(),
            "--contract",
            &contract.to_string(),
            "--db",
            db.to_str().unwrap(),
            "--serve",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line.trim().rsplit(':').next().unwrap().parse().unwrap();
    // Wait until it has synced.
    loop {
        let root = http_get(port, "/root").await;
        if root.contains(&format!("\"last_block\":{head}")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ours = load(requests, move |i| async move {
        http_get(port, &format!("/proof/{}", (i * 7919) % members)).await;
    })
    .await;
    let client =
        Arc::new(ChainClient::new(chain.url().clone(), contract, Default::default()).unwrap());
    let at = BlockId::Number(head.into());
    let theirs = load(requests, move |i| {
        let client = client.clone();
        async move {
            client.merkle_proof((i * 7919) % members, at).await.unwrap();
        }
    })
    .await;
    let _ = server.kill();
    let _ = server.wait();
    println!(
        "\n## Proofs of {members} members, 8 concurrent clients, {requests} requests each way\n"
    );
    println!("| source | p50 | p99 | proofs/s |");
    println!("|---|---|---|---|");
    println!(
        "| `GET /proof/{{i}}` from `canopy follow --serve` | {:.0} µs | {:.0} µs | {:.0} |",
        ours.0.as_secs_f64() * 1e6,
        ours.1.as_secs_f64() * 1e6,
        ours.2
    );
    println!(
        "| `getMerkleProof(i)` by `eth_call` (hardhat node) | {:.0} µs | {:.0} µs | {:.0} |",
        theirs.0.as_secs_f64() * 1e6,
        theirs.1.as_secs_f64() * 1e6,
        theirs.2
    );
    println!(
        "| eth_call / canopy | {:.1}x | {:.1}x | {:.1}x |",
        theirs.0.as_secs_f64() / ours.0.as_secs_f64(),
        theirs.1.as_secs_f64() / ours.1.as_secs_f64(),
        ours.2 / theirs.2
    );
}
