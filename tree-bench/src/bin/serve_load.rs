//! `GET /proof/{i}` latency of `canopy serve` when idle, while a client floods `POST /verify`
//! (real RLN proofs, a Groth16 pairing check each), and while many slow connections hold
//! sockets open with half-sent headers. The limits of the server (verifier threads, concurrency
//! limit, load shedding) are what keep `/proof`'s p99 near idle; two more setups show what the
//! defaults buy: the verifier on both cores, and `/verify` refused at once instead of waiting.
//!
//! `cargo build --release -p canopy && cargo run --release -p tree-bench --bin serve_load`
//! (`-- --members M --requests R --flooders F --slow S`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::cast_precision_loss)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tree_bench::loopback::{self, canopy_exe, load, request, start, LoadResult};

/// Clients that POST `/verify` in a loop until stopped: statuses counted.
struct Flood {
    running: Arc<AtomicBool>,
    statuses: Arc<Mutex<BTreeMap<u16, u64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Flood {
    fn start(port: u16, flooders: u64, body: Arc<String>) -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let statuses = Arc::new(Mutex::new(BTreeMap::new()));
        let tasks = (0..flooders)
            .map(|_| {
                let (running, statuses, body) = (running.clone(), statuses.clone(), body.clone());
                tokio::spawn(async move {
                    while running.load(Ordering::Relaxed) {
                        let (status, _) = request(port, "POST", "/verify", &body).await;
                        *statuses.lock().entry(status).or_default() += 1;
                    }
                })
            })
            .collect();
        Self {
            running,
            statuses,
            tasks,
        }
    }

    async fn stop(self) -> BTreeMap<u16, u64> {
        self.running.store(false, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        self.statuses.lock().clone()
    }
}

async fn proofs(port: u16, requests: u64, members: u64) -> LoadResult {
    load(8, requests, move |i| async move {
        // The demo removes some members: their index answers 404 "erased", also a full answer.
        let path = format!("/proof/{}", (i * 7919) % members);
        let (status, response) = request(port, "GET", &path, "").await;
        assert!(status == 200 || response.contains("erased"), "{response}");
    })
    .await
}

/// A server setup: its label, its settings (environment), and whether the slow-connection row
/// runs against it.
type Setup = (&'static str, &'static [(&'static str, &'static str)], bool);

fn row(name: &str, result: LoadResult, idle: LoadResult, other: &str) {
    println!(
        "| {name} | {:.0} µs | {:.0} µs | {:.0} | {:.2}x | {other} |",
        result.p50.as_secs_f64() * 1e6,
        result.p99.as_secs_f64() * 1e6,
        result.throughput,
        result.p99.as_secs_f64() / idle.p99.as_secs_f64()
    );
}

fn statuses(counts: &BTreeMap<u16, u64>) -> String {
    counts
        .iter()
        .map(|(status, n)| format!("{n}× {status}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let members = loopback::arg("--members", 10_000);
    let requests = loopback::arg("--requests", 8_000);
    let flooders = loopback::arg("--flooders", 16);
    let slow = loopback::arg("--slow", 1_000);

    // A database with `members` members and a real RLN proof against its root.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap().to_owned();
    let out = std::process::Command::new(canopy_exe())
        .args([
            "--json",
            "demo",
            "--db",
            &db_s,
            "--members",
            &members.to_string(),
            "--blocks",
            "10",
        ])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let demo: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let body = Arc::new(demo["verify_request"].to_string());

    let setups: [Setup; 3] = [
        (
            "defaults: 1 verifier thread, /verify waits ≤ 1 s for it",
            &[],
            true,
        ),
        (
            "2 verifier threads",
            &[("CANOPY_SERVER__MAX_CONCURRENT_VERIFICATIONS", "2")],
            false,
        ),
        (
            "/verify refused at once when busy",
            &[("CANOPY_SERVER__VERIFY_WAIT_MS", "0")],
            false,
        ),
    ];
    let mut results = Vec::new();
    for (label, env, with_slow) in setups {
        let server = start(&["serve", "--db", &db_s, "--listen", "127.0.0.1:0"], env);
        let port = server.port;
        // Warm up: the verifying key loads on the first /verify; a valid proof is valid.
        let (status, response) = request(port, "POST", "/verify", &body).await;
        assert!(
            status == 200 && response.contains("\"valid\":true"),
            "{response}"
        );
        proofs(port, 500, members).await;

        let idle = proofs(port, requests, members).await;
        let flood = Flood::start(port, flooders, body.clone());
        tokio::time::sleep(Duration::from_millis(200)).await;
        let flooded = proofs(port, requests, members).await;
        let flood_statuses = flood.stop().await;

        let slow_result = if with_slow {
            // Slow clients: connections that send half a request and then nothing.
            let mut held = Vec::new();
            for _ in 0..slow {
                let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .unwrap();
                stream
                    .write_all(b"GET /proof/1 HTTP/1.1\r\nHost: localhost\r\n")
                    .await
                    .unwrap();
                held.push(stream);
            }
            let result = proofs(port, requests, members).await;
            drop(held);
            Some(result)
        } else {
            None
        };
        results.push((label, idle, flooded, flood_statuses, slow_result));
        drop(server);
    }

    println!(
        "\n## `GET /proof/{{i}}` of {members} members, 8 clients, {requests} requests per row \
         (new connection each)\n"
    );
    println!("| load | p50 | p99 | proofs/s | p99 / idle p99 | other traffic |");
    println!("|---|---|---|---|---|---|");
    for (label, idle, flooded, flood_statuses, slow_result) in results {
        row(&format!("idle ({label})"), idle, idle, "none");
        row(
            &format!("{flooders} clients flooding `POST /verify` ({label})"),
            flooded,
            idle,
            &format!("/verify answers: {}", statuses(&flood_statuses)),
        );
        if let Some(slow_result) = slow_result {
            row(
                &format!("{slow} slow connections held open ({label})"),
                slow_result,
                idle,
                &format!("{slow} half-sent requests"),
            );
        }
    }
}
