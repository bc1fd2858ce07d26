//! The JSON-RPC endpoint under a flood: `canopy follow --serve` of a contract on a local
//! hardhat node that mines a block every two seconds, eight nwaku-like clients calling
//! `getMerkleProof(i)` at `latest` over keep-alive connections (alloy), first alone (idle),
//! then beside flood clients that send maximum-cost bodies without pause: as many full pages
//! (`getRateCommitmentsInRangeBoundsInclusive(0, members − 1)`) as one body's local budget and
//! the batch limit allow, every one answered locally. Measured: the nwaku-like clients'
//! latency idle and flooded, the follower's lag behind the node's head (sampled every 100 ms),
//! the flood's bodies and bytes, the server's peak RSS, and from its `/metrics` how many calls
//! were answered here and how many went to the node. Used by the `jsonrpc_flood` bench and by
//! `cli/tests/flood.rs` (smaller, with the invariants asserted).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::panic
)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, Uint};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::types::{TransactionInput, TransactionRequest};
use alloy::sol_types::SolCall;
use chain_harness::workload::{Sent, Workload};
use chain_harness::LocalChain;
use follower::profile::IMembershipSet as C;

use crate::loopback::{self, percentile};

/// The size of a run.
#[derive(Clone, Copy, Debug)]
pub struct FloodConfig {
    /// Members registered before the run (the pages' length).
    pub members: u64,
    /// Seconds of nwaku-like load alone.
    pub idle_secs: u64,
    /// Seconds of the same load beside the flood.
    pub flood_secs: u64,
    /// nwaku-like clients.
    pub nwaku_clients: u64,
    /// Flood clients.
    pub flood_clients: u64,
    /// A block (with one registration) every this many milliseconds.
    pub block_ms: u64,
}

impl Default for FloodConfig {
    /// The figures: 64 flood clients, 8 nwaku-like ones, a block every 2 s. 300
    /// members: hardhat's node grows by ~45 MB per registration it mines (it keeps every
    /// transaction's execution), 14 GB at 300 and killed for memory at ~650 on a 24 GB machine;
    /// a body is then 100 pages of 303 words (the batch limit), not the whole word budget.
    fn default() -> Self {
        Self {
            members: 300,
            idle_secs: 20,
            flood_secs: 30,
            nwaku_clients: 8,
            flood_clients: 64,
            block_ms: 2_000,
        }
    }
}

/// Latencies of the nwaku-like clients over one phase.
#[derive(Clone, Copy, Debug, Default)]
pub struct Latency {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Calls answered.
    pub calls: u64,
}

/// What a run measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct FloodReport {
    /// nwaku-like clients alone.
    pub idle: Latency,
    /// nwaku-like clients beside the flood.
    pub flooded: Latency,
    /// nwaku-like calls that failed or answered wrong (must be 0).
    pub nwaku_errors: u64,
    /// Flood bodies answered 200, and their bytes.
    pub flood_bodies: u64,
    /// Bytes of those answers.
    pub flood_bytes: u64,
    /// Flood bodies refused (429/503) or failed.
    pub flood_refused: u64,
    /// Items in one flood body, and the words it asks of the local budget.
    pub items_per_body: u64,
    /// Words per flood body.
    pub words_per_body: u64,
    /// Most blocks the follower was behind the node's head, over the run.
    pub max_lag_blocks: u64,
    /// Blocks mined during the run.
    pub blocks: u64,
    /// The server's peak resident memory (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// The node's peak resident memory, KiB.
    pub node_peak_rss_kib: u64,
    /// `eth_call`s answered here, over the whole run (from `/metrics`).
    pub calls_local: u64,
    /// `eth_call`s forwarded to the node.
    pub calls_forwarded: u64,
    /// Items answered `-32005` because forwarding was at its cap.
    pub forward_busy: u64,
    /// Items forwarded because their body's local budget was spent.
    pub over_budget: u64,
}

/// Runs the flood against the `canopy` binary at `canopy` (a path).
pub async fn run(config: FloodConfig, canopy: &std::path::Path) -> FloodReport {
    let chain = Arc::new(LocalChain::start().await.unwrap());
    let contract = chain.deploy_membership(false).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let mut workload = Workload::new(70);
    let mut sent = Sent::default();
    while (workload.members() as u64) < config.members {
        let left = config.members - workload.members() as u64;
        workload
            .register_block(
                &chain,
                contract,
                usize::try_from(left.min(20)).unwrap(),
                10,
                &mut sent,
            )
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let server = loopback::follow_and_serve(
        canopy,
        chain.url(),
        contract,
        &db,
        &[
            ("CANOPY_FOLLOWER__POLL_INTERVAL_MS", "100"),
            // Every client of this run comes from 127.0.0.1: the per-client cap would refuse
            // the flood before its cost is paid, which is what this run measures.
            ("CANOPY_SERVER__MAX_CONCURRENT_PER_CLIENT", "0"),
        ],
    );
    let port = server.port;
    let head = chain.block_number().await.unwrap();
    while applied(port).await < head {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let stop = Arc::new(AtomicBool::new(false));
    let max_lag = Arc::new(AtomicU64::new(0));
    let blocks = Arc::new(AtomicU64::new(0));
    let background = {
        let (chain, stop, max_lag, blocks) =
            (chain.clone(), stop.clone(), max_lag.clone(), blocks.clone());
        tokio::spawn(async move {
            let mut last_block = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                if last_block.elapsed() >= Duration::from_millis(config.block_ms) {
                    workload
                        .register_block(&chain, contract, 1, 1, &mut sent)
                        .await
                        .unwrap();
                    blocks.fetch_add(1, Ordering::Relaxed);
                    last_block = Instant::now();
                }
                let head = chain.block_number().await.unwrap();
                let lag = head.saturating_sub(applied(port).await);
                max_lag.fetch_max(lag, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let members = config.members;
    let errors = Arc::new(AtomicU64::new(0));
    let idle = nwaku_phase(port, contract, members, &config, config.idle_secs, &errors).await;

    let words_per_item = members + 3;
    let items = (65_536 / words_per_item).clamp(1, 100);
    let page = C::getRateCommitmentsInRangeBoundsInclusiveCall {
        startIndex: 0,
        endIndex: u32::try_from(members - 1).unwrap(),
    }
    .abi_encode();
    let body: Vec<serde_json::Value> = (0..items)
        .map(|i| {
            serde_json::json!({"jsonrpc": "2.0", "id": i, "method": "eth_call",
                "params": [{"to": contract, "data": alloy::primitives::Bytes::from(page.clone())}, "latest"]})
        })
        .collect();
    let body = Arc::new(serde_json::Value::Array(body).to_string());
    let flooding = Arc::new(AtomicBool::new(true));
    let (bodies, bytes, refused) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut flood = Vec::new();
    for _ in 0..config.flood_clients {
        let (body, flooding, bodies, bytes, refused) = (
            body.clone(),
            flooding.clone(),
            bodies.clone(),
            bytes.clone(),
            refused.clone(),
        );
        flood.push(tokio::spawn(async move {
            while flooding.load(Ordering::Relaxed) {
                let (status, response) = loopback::request(port, "POST", "/", &body).await;
                if status == 200 {
                    bodies.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(response.len() as u64, Ordering::Relaxed);
                } else {
                    refused.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }));
    }
    let flooded = nwaku_phase(port, contract, members, &config, config.flood_secs, &errors).await;
    flooding.store(false, Ordering::Relaxed);
    for task in flood {
        task.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    background.await.unwrap();
    let (_, scrape) = loopback::request(port, "GET", "/metrics", "").await;
    let metric = |name: &str, label: &str| -> u64 {
        scrape
            .lines()
            .filter(|l| l.starts_with(name) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let calls = "canopy_jsonrpc_requests_total{method=\"eth_call\"";
    FloodReport {
        node_peak_rss_kib: loopback::peak_rss_kib(chain.pid()),
        calls_local: metric(calls, "source=\"local\""),
        calls_forwarded: metric(calls, "source=\"forwarded\""),
        forward_busy: metric("canopy_jsonrpc_forward_busy_total", ""),
        over_budget: metric("canopy_jsonrpc_over_budget_total", ""),
        idle,
        flooded,
        nwaku_errors: errors.load(Ordering::Relaxed),
        flood_bodies: bodies.load(Ordering::Relaxed),
        flood_bytes: bytes.load(Ordering::Relaxed),
        flood_refused: refused.load(Ordering::Relaxed),
        items_per_body: items,
        words_per_body: items * words_per_item,
        max_lag_blocks: max_lag.load(Ordering::Relaxed),
        blocks: blocks.load(Ordering::Relaxed),
        peak_rss_kib: server.peak_rss_kib(),
    }
}

/// The follower's applied block, from `/health`.
async fn applied(port: u16) -> u64 {
    let (_, response) = loopback::request(port, "GET", "/health", "").await;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|health| health["applied_block"].as_u64())
        .unwrap_or(0)
}

/// The nwaku-like clients for `secs`: `getMerkleProof(i)` at `latest`, each answer a 20-word
/// proof; latencies of all of them.
async fn nwaku_phase(
    port: u16,
    contract: Address,
    members: u64,
    config: &FloodConfig,
    secs: u64,
    errors: &Arc<AtomicU64>,
) -> Latency {
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for client in 0..config.nwaku_clients {
        let errors = errors.clone();
        tasks.push(tokio::spawn(async move {
            let provider: RootProvider =
                RootProvider::new_http(format!("http://127.0.0.1:{port}").parse().unwrap());
            let mut latencies = Vec::new();
            let mut i = client;
            while Instant::now() < until {
                i = (i * 7919 + 13) % members;
                let data = C::getMerkleProofCall {
                    index: Uint::from(i),
                }
                .abi_encode();
                let request = TransactionRequest::default()
                    .to(contract)
                    .input(TransactionInput::new(data.into()));
                let started = Instant::now();
                let answer = provider
                    .call(request)
                    .block(alloy::eips::BlockId::latest())
                    .await;
                latencies.push(started.elapsed());
                let wrong = match answer {
                    Ok(bytes) => (bytes.len() != 20 * 32).then(|| format!("{} bytes", bytes.len())),
                    Err(e) => Some(e.to_string()),
                };
                if let Some(wrong) = wrong {
                    if errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        eprintln!("first nwaku-like error: {wrong}");
                    }
                }
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort();
    Latency {
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        calls: all.len() as u64,
    }
}

/// The report as the bench prints it: one markdown table.
#[must_use]
pub fn table(config: &FloodConfig, report: &FloodReport) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "| phase | nwaku-like p50 | p99 | calls | flood bodies/s | flood MB/s | follower lag (max) | peak RSS |\n\
         |---|---|---|---|---|---|---|---|\n\
         | idle ({} nwaku-like clients, {} s) | {:.2} ms | {:.2} ms | {} | – | – | – | |\n\
         | flood ({} clients, {} items = {} words a body, {} s) | {:.2} ms | {:.2} ms | {} | {:.1} | {:.1} | {} blocks | {:.0} MiB |\n\
         | flood / idle | {:.2}x | {:.2}x | | | | | |\n\n\
         blocks mined meanwhile: {} (one every {} ms); flood bodies refused: {}; nwaku-like errors: {}\n\n\
         eth_call items over the run: {} answered here, {} forwarded ({} of them -32005 at the forward cap, {} past a body's budget); the node's peak RSS {:.0} MiB",
        config.nwaku_clients,
        config.idle_secs,
        ms(report.idle.p50),
        ms(report.idle.p99),
        report.idle.calls,
        config.flood_clients,
        report.items_per_body,
        report.words_per_body,
        config.flood_secs,
        ms(report.flooded.p50),
        ms(report.flooded.p99),
        report.flooded.calls,
        report.flood_bodies as f64 / config.flood_secs as f64,
        report.flood_bytes as f64 / config.flood_secs as f64 / 1e6,
        report.max_lag_blocks,
        report.peak_rss_kib as f64 / 1024.0,
        ms(report.flooded.p50) / ms(report.idle.p50),
        ms(report.flooded.p99) / ms(report.idle.p99),
        report.blocks,
        config.block_ms,
        report.flood_refused,
        report.nwaku_errors,
        report.calls_local,
        report.calls_forwarded,
        report.forward_busy,
        report.over_budget,
        report.node_peak_rss_kib as f64 / 1024.0,
    )
}
