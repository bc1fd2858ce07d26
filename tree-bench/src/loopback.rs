//! Load on a `canopy` server over loopback, for the bench binaries: start the release binary,
//! plain HTTP/1.1 requests on fresh connections, concurrent clients with latency percentiles.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss,
    clippy::panic
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The value after `name` on the command line (`--requests 4000`), or `default`.
#[must_use]
pub fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running `canopy` (the release binary next to the bench's), killed on drop.
pub struct Canopy {
    child: std::process::Child,
    /// Where it listens.
    pub port: u16,
}

impl Drop for Canopy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `canopy` binary built next to this one (`cargo build --release -p canopy`).
#[must_use]
pub fn canopy_exe() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap().with_file_name("canopy");
    assert!(
        exe.exists(),
        "build it first: cargo build --release -p canopy"
    );
    exe
}

/// Starts `canopy <args>` with `env`, a command that prints `listening on http://ADDR` first.
#[must_use]
pub fn start(args: &[&str], env: &[(&str, &str)]) -> Canopy {
    start_exe(&canopy_exe(), args, env)
}

impl Canopy {
    /// Its peak resident memory so far (`VmHWM`), KiB; 0 where `/proc` does not say.
    #[must_use]
    pub fn peak_rss_kib(&self) -> u64 {
        peak_rss_kib(self.child.id())
    }
}

/// The peak resident memory so far (`VmHWM`) of process `pid`, KiB; 0 where `/proc` does not
/// say.
#[must_use]
pub fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `canopy follow --serve` (the binary at `exe`) of `contract` through `rpc` into a database at
/// `db`, with `env`.
#[must_use]
pub fn follow_and_serve(
    exe: &std::path::Path,
    rpc: &url::Url,
    contract: alloy::primitives::Address,
    db: &std::path::Path,
    env: &[(&str, &str)],
) -> Canopy {
    let contract = contract.to_string();
    start_exe(
        exe,
        &[
            "follow",
            "--rpc",
            rpc.as_str(),
            "--contract",
            &contract,
            "--db",
            db.to_str().unwrap(),
            "--serve",
            "127.0.0.1:0",
        ],
        env,
    )
}

/// Starts the `canopy` at `exe` like [`start`].
#[must_use]
pub fn start_exe(exe: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Canopy {
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port = line.trim().rsplit(':').next().unwrap().parse().unwrap();
    Canopy { child, port }
}

/// One request on a fresh connection: (status, whole response).
pub async fn request(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(
            format!(
                "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

/// `GET path`, which must answer 200: the whole response.
pub async fn get_ok(port: u16, path: &str) -> String {
    let (status, response) = request(port, "GET", path, "").await;
    assert_eq!(status, 200, "{response}");
    response
}

/// The `p` quantile of sorted latencies.
#[must_use]
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Latencies of a load run.
#[derive(Clone, Copy, Debug)]
pub struct LoadResult {
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Requests per second over the run.
    pub throughput: f64,
}

/// Runs `requests` calls of `call` from `clients` concurrent clients.
pub async fn load<F, Fut>(clients: u64, requests: u64, call: F) -> LoadResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..clients {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for i in (client..requests).step_by(usize::try_from(clients).unwrap()) {
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
    LoadResult {
        p50: percentile(&all, 0.5),
        p99: percentile(&all, 0.99),
        throughput: all.len() as f64 / wall.as_secs_f64(),
    }
}
