//! Operating `canopy` as a service: `/health` and `/ready` while a follower syncs, Prometheus
//! metrics scraped and parsed, SIGTERM during a sync, two replicas against one node, the HTTP
//! limits (body size, timeout, concurrency, verifier threads), `POST /verify` with a real RLN
//! proof, and configuration from a file and the environment. The chain is hardhat's node
//! (started and stopped here); the contract's `root()` is the oracle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::BlockId;
use alloy::primitives::Address;
use chain_harness::workload::{Sent, Workload};
use chain_harness::LocalChain;
use common::{get_json, http, signal, spawn_server, verdict_names, wait_exit, KillOnDrop};
use follower::{BlockMeta, ChainClient, RetryConfig};
use integration_tests::proxy::FaultProxy;
use tree_core::{History, MerkleTree};
use tree_engines::{DbConfig, DbTree};

/// A node with the test contract and `blocks` blocks of random membership changes.
async fn chain_with_blocks(blocks: usize, seed: u64) -> (Arc<LocalChain>, Address, ChainClient) {
    let chain = Arc::new(LocalChain::start().await.unwrap());
    let contract = chain.deploy_membership(false).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let mut workload = Workload::new(seed);
    let mut sent = Sent::default();
    for _ in 0..blocks {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    let client = ChainClient::new(chain.url().clone(), contract, RetryConfig::default()).unwrap();
    (chain, contract, client)
}

/// A config file that makes a replay take many calls (one block per `eth_getLogs`, a root
/// check each), so that behind [`SlowSync`]'s latency a test can watch and interrupt a sync.
fn slow_replay_config(dir: &Path) -> String {
    let file = dir.join("canopy.toml");
    std::fs::write(
        &file,
        r#"
[log]
summary_interval_secs = 1

[follower]
sync = "replay"
poll_interval_ms = 200

[follower.log_ranges]
initial = 1
max = 1

[server]
max_lag_blocks = 2
shutdown_timeout_ms = 15000
"#,
    )
    .unwrap();
    file.to_str().unwrap().to_owned()
}

/// Each call the follower makes waits this long in [`SlowSync`]'s proxy: a sync of 100 blocks
/// (two calls or more a block) then lasts seconds on any machine, not a race with the test.
const SLOW_NODE_LATENCY_MS: u64 = 20;

/// A node with `blocks` blocks and a follower set up to replay them slowly into `db`, through
/// a proxy that holds every call [`SLOW_NODE_LATENCY_MS`].
struct SlowSync {
    chain: Arc<LocalChain>,
    contract: Address,
    client: ChainClient,
    proxy: FaultProxy,
    dir: tempfile::TempDir,
    db: std::path::PathBuf,
    config: String,
}

impl SlowSync {
    async fn new(blocks: usize, seed: u64) -> Self {
        let (chain, contract, client) = chain_with_blocks(blocks, seed).await;
        let proxy = FaultProxy::start(chain.url(), seed).await;
        proxy.mode.lock().latency_ms = SLOW_NODE_LATENCY_MS;
        let dir = tempfile::tempdir().unwrap();
        let config = slow_replay_config(dir.path());
        let db = dir.path().join("db");
        Self {
            chain,
            contract,
            client,
            proxy,
            dir,
            db,
            config,
        }
    }

    /// Calls the proxy has answered so far.
    fn calls(&self) -> u64 {
        self.proxy.counts.forwarded.load(Ordering::Relaxed)
    }

    /// Waits until the proxy has answered `more` calls beyond the `calls()` seen before.
    async fn until_calls(&self, more: u64) {
        let target = self.calls() + more;
        let started = Instant::now();
        while self.calls() < target {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the follower made {} calls of {target}",
                self.calls()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `follow --config … --rpc … --contract … --db …` and `extra`.
    fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = [
            "follow",
            "--config",
            &self.config,
            "--rpc",
            self.proxy.url.as_str(),
            "--contract",
            &self.contract.to_string(),
            "--db",
            self.db.to_str().unwrap(),
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        args.extend(extra.iter().map(ToString::to_string));
        args
    }
}

fn open_db(db: &Path) -> DbTree<hasher::PoseidonHasher> {
    DbTree::open_existing(&DbConfig::new(db)).unwrap()
}

/// The last committed block of a follower database and whether its root is the contract's
/// root at that block.
async fn last_block_matches(db: &Path, client: &ChainClient) -> (u64, bool) {
    let tree = open_db(db);
    let checkpoints = tree.checkpoints().unwrap();
    let meta = BlockMeta::decode(&checkpoints.last().unwrap().metadata)
        .unwrap()
        .unwrap();
    let theirs = client
        .root(BlockId::Number(meta.number.into()))
        .await
        .unwrap();
    (meta.number, tree.root() == theirs)
}

/// Polls `/health` until the follower has applied `block`.
async fn wait_applied(port: u16, block: u64) -> serde_json::Value {
    let started = Instant::now();
    loop {
        let (_, body) = blocking(move || get_json(port, "/health")).await;
        if body["applied_block"] == block {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never applied block {block}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// A metric's value in a parsed scrape: a counter, gauge or untyped sample with these labels.
fn metric(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .find_map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => Some(v),
            _ => None,
        })
}

/// The total count of a histogram with these labels (its `+Inf` bucket).
fn histogram_count(
    scrape: &prometheus_parse::Scrape,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .find_map(|s| match &s.value {
            prometheus_parse::Value::Histogram(buckets) => buckets
                .iter()
                .find(|b| b.less_than.is_infinite())
                .map(|b| b.count),
            _ => None,
        })
}

fn scrape(port: u16) -> prometheus_parse::Scrape {
    let (status, text) = http(port, "GET", "/metrics", None);
    assert_eq!(status, 200, "{text}");
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// A follower that replays a long history: `/health` is 503 `syncing` (with the lag) until it
/// is within `max_lag_blocks`, then 200 `synced`; `/metrics` scraped and parsed agrees with
/// the chain; JSON logs parse; SIGTERM exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_sync_and_metrics_agree_with_the_chain() {
    let sync = SlowSync::new(120, 31).await;
    let (chain, contract, client, db) = (&sync.chain, sync.contract, &sync.client, &sync.db);
    let log = sync.dir.path().join("follow.log");
    let args = sync.args(&["--serve", "127.0.0.1:0", "--log-format", "json"]);
    let (mut child, port) = spawn_server(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("RUST_LOG", "info")],
        &log,
    );

    // 503 while behind, then 200 once within the lag.
    let mut seen_syncing = 0;
    let started = Instant::now();
    loop {
        let (status, body) = blocking(move || get_json(port, "/health")).await;
        match body["status"].as_str().unwrap() {
            "starting" => assert_eq!(status, 503),
            "syncing" => {
                assert_eq!(status, 503, "{body}");
                assert!(body["blocks_behind"].as_u64().unwrap() > 2, "{body}");
                seen_syncing += 1;
            }
            "synced" => {
                assert_eq!(status, 200, "{body}");
                assert!(body["blocks_behind"].as_u64().unwrap() <= 2, "{body}");
                break;
            }
            other => panic!("unexpected status {other}: {body}"),
        }
        assert!(started.elapsed() < Duration::from_secs(180), "never synced");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(seen_syncing > 0, "the sync was never seen in progress");
    assert_eq!(blocking(move || get_json(port, "/ready")).await.0, 200);
    let head = chain.block_number().await.unwrap();
    let health = wait_applied(port, head).await;
    assert_eq!(health["head_block"], head);
    // The provider's health: what it answered, and no disagreement.
    let provider = &health["providers"][0];
    assert!(provider["requests"].as_u64().unwrap() > 0, "{health}");
    assert_eq!(provider["disagreements"], 0, "{health}");
    assert_eq!(health["quorum"], 1, "{health}");

    // Proofs, then a scrape that agrees with the chain and with what was asked.
    let members = client
        .next_free_index(client.block(head).await.unwrap())
        .await
        .unwrap();
    let proofs = 20u64;
    blocking(move || {
        for i in 0..proofs {
            let (status, _) = http(
                port,
                "GET",
                &format!("/proof/{}", i * members / proofs),
                None,
            );
            assert!(status == 200 || status == 404);
        }
    })
    .await;
    let metrics = blocking(move || scrape(port)).await;
    // The whole scrape, for whoever runs this with --nocapture.
    println!(
        "{}",
        blocking(move || http(port, "GET", "/metrics", None).1).await
    );
    #[allow(clippy::cast_precision_loss)]
    let (head_f, members_f) = (head as f64, members as f64);
    assert_eq!(
        metric(&metrics, "canopy_chain_head_block", &[]),
        Some(head_f)
    );
    assert_eq!(metric(&metrics, "canopy_applied_block", &[]), Some(head_f));
    assert_eq!(metric(&metrics, "canopy_blocks_behind", &[]), Some(0.0));
    assert_eq!(metric(&metrics, "canopy_members", &[]), Some(members_f));
    let committed = metric(&metrics, "canopy_blocks_committed_total", &[]).unwrap();
    let tree_blocks = head - client.deployed_block().await.unwrap() + 1;
    #[allow(clippy::cast_precision_loss)]
    let tree_blocks_f = tree_blocks as f64;
    assert!(
        committed >= 100.0 && committed <= tree_blocks_f,
        "{committed}"
    );
    assert!(metric(&metrics, "canopy_events_total", &[]).unwrap() > 0.0);
    for method in ["eth_blockNumber", "eth_getLogs", "eth_getBlockByNumber"] {
        assert!(
            metric(&metrics, "canopy_rpc_requests_total", &[("method", method)]).unwrap() > 0.0,
            "{method}"
        );
        let per_provider = [("method", method), ("outcome", "ok")];
        assert!(
            metric(
                &metrics,
                "canopy_rpc_provider_requests_total",
                &per_provider
            )
            .unwrap()
                > 0.0,
            "{method}"
        );
    }
    assert!(histogram_count(&metrics, "canopy_rpc_provider_request_seconds", &[]).unwrap() > 0.0);
    assert_eq!(
        histogram_count(&metrics, "canopy_block_apply_seconds", &[]),
        Some(committed)
    );
    let proof_requests = histogram_count(
        &metrics,
        "canopy_http_request_seconds",
        &[("route", "/proof/:index"), ("status", "200")],
    )
    .unwrap_or(0.0)
        + histogram_count(
            &metrics,
            "canopy_http_request_seconds",
            &[("route", "/proof/:index"), ("status", "404")],
        )
        .unwrap_or(0.0);
    #[allow(clippy::cast_precision_loss)]
    let proofs_f = proofs as f64;
    assert_eq!(proof_requests, proofs_f);
    assert!(metric(&metrics, "canopy_db_size_bytes", &[]).unwrap() > 0.0);

    // It keeps following; SIGTERM stops it with status 0 and the lock released.
    let mut workload = Workload::new(32);
    let mut sent = Sent::default();
    for _ in 0..3 {
        workload.block(chain, contract, &mut sent).await.unwrap();
    }
    let head = chain.block_number().await.unwrap();
    wait_applied(port, head).await;
    signal(&child.0, "TERM");
    let status = blocking(move || {
        let status = wait_exit(&mut child.0, Duration::from_secs(20));
        (status, child)
    })
    .await
    .0
    .expect("no exit within 20 s of SIGTERM");
    assert!(
        status.success(),
        "{status}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let (block, matches) = last_block_matches(db, client).await;
    assert_eq!(block, head);
    assert!(matches);

    // Every log line is one JSON object; the summary, stop and the per-block metrics say so.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str())
        .collect();
    for expected in ["syncing", "synced", "stopped"] {
        assert!(messages.contains(&expected), "{expected} in {messages:?}");
    }
    assert!(messages.iter().any(|m| m.starts_with("stopping")));
}

/// SIGTERM in the middle of a replay: exit status 0 within the deadline, the lock released,
/// the last committed block holds the contract's root; a restart continues without applying
/// any block twice. Two signals in a row exit at once and still leave a consistent database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_sync_stops_cleanly_and_the_restart_resumes() {
    let sync = SlowSync::new(100, 33).await;
    let (chain, contract, client, db) = (&sync.chain, sync.contract, &sync.client, &sync.db);
    let follow = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .args(sync.args(extra))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let head = chain.block_number().await.unwrap();

    // Signalled once the replay is well under way: 30 calls answered is some blocks applied,
    // and at least 150 more are to come, each held by the proxy.
    let mut child = KillOnDrop(follow(&[]));
    sync.until_calls(30).await;
    signal(&child.0, "TERM");
    let stopped_at = Instant::now();
    let status = blocking(move || wait_exit(&mut child.0, Duration::from_secs(20)))
        .await
        .expect("no exit after SIGTERM");
    assert!(status.success(), "{status}");
    let (block, matches) = last_block_matches(db, client).await;
    println!(
        "stopped {:?} after SIGTERM at block {block} of {head}",
        stopped_at.elapsed()
    );
    assert!(
        block < head,
        "the sync had already finished: not a mid-sync stop"
    );
    assert!(matches, "root at block {block}");
    let (commits_before, checkpoints_before) = {
        let tree = open_db(db);
        (tree.commits(), tree.checkpoints().unwrap().len() as u64)
    };

    // The restart continues from there: each further commit is one new checkpoint. No need to
    // be slow now.
    sync.proxy.mode.lock().latency_ms = 0;
    let mut once = Command::new(env!("CARGO_BIN_EXE_canopy"));
    once.args(sync.args(&["--once"])).env("RUST_LOG", "warn");
    let out = blocking(move || once.output()).await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (block, matches) = last_block_matches(db, client).await;
    assert_eq!(block, head);
    assert!(matches);
    {
        let tree = open_db(db);
        let checkpoints = tree.checkpoints().unwrap().len() as u64;
        assert!(checkpoints < tree_core::HistoryConfig::default().max_checkpoints as u64);
        assert_eq!(
            tree.commits() - commits_before,
            checkpoints - checkpoints_before,
            "a block was committed twice"
        );
    }

    // Two signals in a row: out at once, consistent on disk.
    let mut workload = Workload::new(34);
    let mut sent = Sent::default();
    for _ in 0..30 {
        workload.block(chain, contract, &mut sent).await.unwrap();
    }
    sync.proxy.mode.lock().latency_ms = SLOW_NODE_LATENCY_MS;
    let mut child = KillOnDrop(follow(&[]));
    sync.until_calls(10).await;
    signal(&child.0, "INT");
    signal(&child.0, "INT");
    let status = blocking(move || wait_exit(&mut child.0, Duration::from_secs(5)))
        .await
        .expect("no exit after 2 signals");
    assert!(matches!(status.code(), Some(0 | 130)), "{status}");
    let (_, matches) = last_block_matches(db, client).await;
    assert!(matches);
}

/// Replicas share nothing: two followers of one node serve the same roots and proofs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_serve_identical_roots_and_proofs() {
    let (chain, contract, client) = chain_with_blocks(30, 35).await;
    let dir = tempfile::tempdir().unwrap();
    let url = chain.url().to_string();
    let contract_s = contract.to_string();
    // Settings from the environment this time.
    let env = [
        ("CANOPY_RPC", url.as_str()),
        ("CANOPY_CONTRACT", contract_s.as_str()),
        ("CANOPY_FOLLOWER__POLL_INTERVAL_MS", "200"),
        ("CANOPY_LISTEN", "127.0.0.1:0"),
    ];
    let replicas: Vec<(KillOnDrop, u16)> = (0..2)
        .map(|i| {
            let db = dir.path().join(format!("replica-{i}"));
            spawn_server(
                &["follow", "--db", db.to_str().unwrap()],
                &env,
                &dir.path().join(format!("replica-{i}.log")),
            )
        })
        .collect();
    let mut workload = Workload::new(36);
    let mut sent = Sent::default();
    for round in 0..2 {
        if round == 1 {
            for _ in 0..5 {
                workload.block(&chain, contract, &mut sent).await.unwrap();
            }
        }
        let head = chain.block_number().await.unwrap();
        for (_, port) in &replicas {
            let health = wait_applied(*port, head).await;
            assert_eq!(health["status"], "synced");
        }
        let members = client
            .next_free_index(client.block(head).await.unwrap())
            .await
            .unwrap();
        let theirs = client.root(BlockId::Number(head.into())).await.unwrap();
        let ports: Vec<u16> = replicas.iter().map(|r| r.1).collect();
        let answers = blocking(move || {
            ports
                .iter()
                .map(|&port| {
                    let mut bodies = vec![http(port, "GET", "/root", None).1];
                    bodies.push(http(port, "GET", "/roots", None).1);
                    for i in [0, members / 3, members / 2, members - 1] {
                        bodies.push(http(port, "GET", &format!("/proof/{i}"), None).1);
                    }
                    bodies
                })
                .collect::<Vec<_>>()
        })
        .await;
        assert_eq!(answers[0], answers[1], "replicas differ at block {head}");
        let root: serde_json::Value = serde_json::from_str(&answers[0][0]).unwrap();
        assert_eq!(root["root"], follower::block::fr_hex(&theirs));
        assert_eq!(root["last_block"], head);
    }
    drop(replicas);
}

/// The limits of a public endpoint, and `POST /verify` with a real RLN proof.
#[test]
fn verify_and_the_limits_of_a_public_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    let demo = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args([
            "--json",
            "demo",
            "--db",
            db_s,
            "--members",
            "200",
            "--blocks",
            "4",
        ])
        .output()
        .unwrap();
    assert!(
        demo.status.success(),
        "{}",
        String::from_utf8_lossy(&demo.stderr)
    );
    let demo: serde_json::Value = serde_json::from_slice(&demo.stdout).unwrap();
    let request = demo["verify_request"].clone();
    assert!(request.is_object(), "{demo}");
    let config = dir.path().join("limits.toml");
    std::fs::write(
        &config,
        "[server]\nmax_body_bytes = 4096\nmax_verify_body_bytes = 8192\nmax_verify_batch = 4\nmax_concurrent_verifications = 1\nverify_wait_ms = 0\nmax_concurrent_requests = 4\n",
    )
    .unwrap();
    let (server, port) = spawn_server(
        &[
            "serve",
            "--db",
            db_s,
            "--listen",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
        &dir.path().join("serve.log"),
    );
    let post = |body: &serde_json::Value| {
        let (status, text) = http(port, "POST", "/verify", Some(&body.to_string()));
        (
            status,
            serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default(),
        )
    };

    // The real proof is valid against the window; altered, it is refused with the reason.
    let (status, body) = post(&request);
    assert_eq!(
        (status, body["valid"].clone()),
        (200, true.into()),
        "{body}"
    );
    let mut other_x = request.clone();
    other_x["x"] = "0x01".into();
    let (status, body) = post(&other_x);
    assert_eq!(status, 200);
    assert_eq!(body["valid"], false);
    assert_eq!(body["reason"], "bad_proof", "{body}");
    let mut other_root = request.clone();
    other_root["root"] = "0x02".into();
    let (_, body) = post(&other_root);
    assert_eq!(body["reason"], "unknown_root", "{body}");
    // The message's signal must hash to the proof's x.
    let mut other_signal = request.clone();
    other_signal["signal"] = "0x00ff".into();
    let (_, body) = post(&other_signal);
    assert_eq!(body["reason"], "signal_mismatch", "{body}");

    // A batch: one verdict per item, in order, malformed items answered alone.
    let batch = serde_json::json!([request, other_x, {"proof": "0x00"}, other_root]);
    let (status, body) = post(&batch);
    assert_eq!(status, 200, "{body}");
    let verdicts = verdict_names(&body);
    assert_eq!(
        verdicts,
        ["valid", "bad_proof", "malformed", "unknown_root"],
        "{body}"
    );
    assert!(body["verdicts"][2]["reason"]
        .as_str()
        .unwrap()
        .contains("missing field"));
    assert_eq!(body["counts"]["valid"], 1, "{body}");
    // More items than max_verify_batch, or a body over max_verify_body_bytes: 413.
    let five = serde_json::json!([request, request, request, request, request]);
    let (status, body) = post(&five);
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("max_verify_batch"),
        "{body}"
    );

    // Bad requests: 4xx with a JSON error, never a panic.
    let mut short = request.clone();
    short["proof"] = "0x00".into();
    let (status, body) = post(&short);
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("malformed proof"),
        "{body}"
    );
    let mut not_field = request.clone();
    not_field["y"] = "0xzz".into();
    assert_eq!(post(&not_field).0, 400);
    let (status, _) = http(port, "POST", "/verify", Some("{not json"));
    assert_eq!(status, 400);
    let big = serde_json::json!({"proof": "00".repeat(4096)});
    assert_eq!(post(&big).0, 413);

    // A flood of /verify: refused at once with 429 (verifier busy) or 503 (at capacity), with
    // Retry-After, while the rest are answered; /proof still answers.
    let mut refused = 0u64;
    for _ in 0..10 {
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let body = request.to_string();
                std::thread::spawn(move || http(port, "POST", "/verify", Some(&body)))
            })
            .collect();
        for thread in threads {
            let (status, text) = thread.join().unwrap();
            match status {
                200 => assert!(text.contains("\"valid\":true"), "{text}"),
                429 | 503 => {
                    assert!(text.contains("retry later"), "{text}");
                    refused += 1;
                }
                other => panic!("status {other}: {text}"),
            }
        }
        if refused > 0 {
            break;
        }
    }
    assert!(refused > 0, "a flood of 12 was never refused");
    assert_eq!(get_json(port, "/proof/0").0, 200);
    let metrics = scrape(port);
    let counted = metric(
        &metrics,
        "canopy_http_rejected_total",
        &[("reason", "verify_busy")],
    )
    .unwrap_or(0.0)
        + metric(
            &metrics,
            "canopy_http_rejected_total",
            &[("reason", "overloaded")],
        )
        .unwrap_or(0.0);
    #[allow(clippy::cast_precision_loss)]
    let refused_f = refused as f64;
    assert_eq!(counted, refused_f);
    drop(server);

    // A per-request timeout answers 503 in words.
    let (_server, port) = spawn_server(
        &["serve", "--db", db_s, "--listen", "127.0.0.1:0"],
        &[("CANOPY_SERVER__REQUEST_TIMEOUT_MS", "1")],
        &dir.path().join("serve-timeout.log"),
    );
    let (status, text) = http(port, "POST", "/verify", Some(&request.to_string()));
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("timed out"), "{text}");
}

/// Unknown keys and bad values are errors naming the key and where it came from.
#[test]
fn bad_configuration_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("canopy.toml");
    std::fs::write(&file, "[server]\nmax_lag_block = 3\n").unwrap();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_canopy"));
        command.args(args);
        for (k, v) in env {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = run(&["follow", "--config", file.to_str().unwrap()], &[]);
    assert!(
        e.contains("max_lag_block") && e.contains("canopy.toml"),
        "{e}"
    );
    let e = run(&["serve"], &[("CANOPY_SERVER__MAX_LAG_BLOCKS", "lots")]);
    assert!(e.contains("MAX_LAG_BLOCKS") && e.contains("CANOPY_"), "{e}");
    let e = run(
        &["follow", "--db", dir.path().join("x").to_str().unwrap()],
        &[],
    );
    assert!(e.contains("`rpc` is not set"), "{e}");
    let e = run(&["follow", "--rpc", "not a url", "--contract", "0x00"], &[]);
    assert!(e.contains("rpc"), "{e}");
    // The printed default is a valid config file.
    let out = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(["config", "--print-default"])
        .output()
        .unwrap();
    std::fs::write(&file, &out.stdout).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(["--json", "config", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `follow --once` exits 0 only when it reached its target; otherwise a status that says why,
/// with the reason on stderr: 3 when the node stays unreachable past `--once-timeout`, 4 when a
/// signal comes first, 1 for a permanent error (not retried in a loop), 2 for settings that
/// cannot work. Two providers, the first one down, still reach the head (failover). Logs to a
/// pipe carry no ANSI escapes unless asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_once_exit_statuses_say_why_it_stopped() {
    let sync = SlowSync::new(60, 36).await;
    let (chain, client, db) = (&sync.chain, &sync.client, &sync.db);
    let head = chain.block_number().await.unwrap();
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let run = |args: Vec<String>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_canopy"));
        command.args(args).env("RUST_LOG", "info");
        async move {
            let started = Instant::now();
            let out = blocking(move || command.output().unwrap()).await;
            (out, started.elapsed())
        }
    };
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();

    // Node down: retried until the deadline, then status 3.
    let mut args = sync.args(&["--once", "--once-timeout", "3"]);
    let rpc = args.iter().position(|a| a == "--rpc").unwrap() + 1;
    args[rpc].clone_from(&dead);
    let (out, took) = run(args).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--once: 3 s passed"),
        "{}",
        stderr(&out)
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(!stderr(&out).contains('\u{1b}'), "ANSI escapes in a pipe");

    // A signal before the target: status 4, and what was committed is the contract's.
    let mut child = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_canopy"))
            .args(sync.args(&["--once"]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    sync.until_calls(20).await;
    signal(&child.0, "TERM");
    let status = blocking(move || wait_exit(&mut child.0, Duration::from_secs(20)))
        .await
        .expect("no exit after SIGTERM");
    assert_eq!(status.code(), Some(4), "{status}");
    let (block, matches) = last_block_matches(db, client).await;
    assert!(block < head && matches, "block {block} of {head}");

    // A permanent error: status 1 at once, naming the method and the node.
    sync.proxy.mode.lock().latency_ms = 0;
    sync.proxy.mode.lock().refuse = Some(integration_tests::proxy::Refusal::Method(
        "eth_getLogs",
        -32601,
    ));
    let refused_before = sync.proxy.counts.refused.load(Ordering::Relaxed);
    let (out, took) = run(sync.args(&["--once"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("eth_getLogs"), "{}", stderr(&out));
    assert_eq!(
        sync.proxy.counts.refused.load(Ordering::Relaxed) - refused_before,
        1,
        "a permanent error was retried"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    sync.proxy.mode.lock().refuse = None;

    // Settings that cannot work: status 2.
    let (out, _) = run(sync.args(&["--once", "--quorum", "2"])).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("quorum"), "{}", stderr(&out));

    // Two providers, the first one down: the head, status 0, colours when asked for.
    let mut args = sync.args(&["--once", "--json", "--color", "always"]);
    args.splice(rpc..rpc, [dead.clone(), "--rpc".to_owned()]);
    let (out, _) = run(args).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (block, matches) = last_block_matches(db, client).await;
    assert_eq!(block, head);
    assert!(matches);
    assert!(stderr(&out).contains('\u{1b}'), "--color always");
    assert!(stderr(&out).contains("failing over"), "{}", stderr(&out));
}
