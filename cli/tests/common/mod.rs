//! Shared by the command's test files: spawned servers that never outlive a test, a plain HTTP
//! client on loopback, signals.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, Bytes};
use serde_json::Value;

/// A spawned `canopy` that is killed and reaped when dropped, so a failing assertion never
/// leaves a server running after the test.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `canopy <args>` (a command that serves HTTP and prints `listening on http://ADDR`
/// first on stdout) with `RUST_LOG=warn` and stderr to `log`; returns it and its port.
pub fn spawn_server(
    args: &[&str],
    env: &[(&str, &str)],
    log: &std::path::Path,
) -> (KillOnDrop, u16) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_canopy"));
    command
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = KillOnDrop(command.spawn().unwrap());
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no port in {line:?}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        });
    (child, port)
}

/// One HTTP/1.1 request over a fresh TCP connection: (status, body).
pub fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let body = body.unwrap_or("");
    exchange(port, method, path, body.len(), body)
}

/// A request that announces a `content_length`-byte body and sends none: what a server's body
/// limit answers from the header alone (413). Sending the body instead races the server, which
/// answers and closes before reading it: the client's write then fails with a broken pipe.
pub fn http_announcing(
    port: u16,
    method: &str,
    path: &str,
    content_length: usize,
) -> (u16, String) {
    exchange(port, method, path, content_length, "")
}

/// Writes a request announcing `content_length` bytes followed by `body`, reads the whole
/// response: (status, body).
fn exchange(
    port: u16,
    method: &str,
    path: &str,
    content_length: usize,
    body: &str,
) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n{body}"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

/// The verdict names of a `{"verdicts": [{"verdict": ...}, ...]}` answer (`canopy verify
/// --json`, a `POST /verify` batch), in order.
pub fn verdict_names(answer: &serde_json::Value) -> Vec<&str> {
    answer["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["verdict"].as_str().unwrap())
        .collect()
}

/// `GET path`: (status, JSON body or null).
pub fn get_json(port: u16, path: &str) -> (u16, serde_json::Value) {
    let (status, body) = http(port, "GET", path, None);
    (
        status,
        serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
    )
}

/// Sends `signal` (`TERM`, `INT`) to the child.
pub fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits up to `limit` for the child to exit.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

// The JSON-RPC endpoint's helpers (`follow --serve` against a local chain), shared by the
// jsonrpc and differential suites.

/// `f` on a blocking thread.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// `body` posted to `port` as it is: the HTTP status (0 when the connection closed without an
/// answer) and the body. HTTP/1.0, so that neither server answers in chunks.
pub async fn post(port: u16, body: String) -> (u16, String) {
    let text = blocking(move || {
        use std::io::{Read, Write};
        let mut stream = match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => stream,
            Err(e) => return format!("no connection to port {port}: {e}"),
        };
        write!(
            stream,
            "POST / HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap_or_else(|e| panic!("writing to port {port}: {e}"));
        let mut response = String::new();
        // A reset reads as what arrived before it (nothing: status 0).
        let _ = stream.read_to_string(&mut response);
        response
    })
    .await;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    // No status: the connection closed without an answer (0, for the caller to report).
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned())
}

/// The answer of `port` to `body` (a JSON-RPC request or batch), parsed; it must be a 200.
pub async fn ask(port: u16, body: Value) -> Value {
    let (status, text) = post(port, body.to_string()).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Waits until the follower behind `port` has applied `block`.
pub async fn until_applied(port: u16, block: u64) {
    let started = Instant::now();
    loop {
        let (_, health) = blocking(move || get_json(port, "/health")).await;
        if health["applied_block"] == block && health["status"] == "synced" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "block {block} never applied: {health}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calldata as `0x…` hex.
pub fn hex(data: &[u8]) -> String {
    format!("{}", Bytes::copy_from_slice(data))
}

/// The sum of the samples of metric `name` whose line holds `label`.
pub fn counter(scrape: &str, name: &str, label: &str) -> f64 {
    scrape
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `canopy follow --serve` of `contract` through `rpc`, replaying from the deployment, polling
/// every 50 ms, with the head watched every 50 ms and `latest` local while that head is under
/// 10 s old; `extra` is appended to the config file (more of its `[jsonrpc]` section first).
/// Returns its directory, the process and its port.
pub fn follow_and_serve(
    rpc: &url::Url,
    contract: Address,
    extra: &str,
) -> (tempfile::TempDir, KillOnDrop, u16) {
    follow_and_serve_with(
        rpc,
        contract,
        &format!(
            "[follower]\nsync = \"replay\"\npoll_interval_ms = 50\n[jsonrpc]\nlatest_max_age_ms = 10000\nhead_poll_ms = 50\n{extra}"
        ),
    )
}

/// `canopy follow --serve` of `contract` through `rpc` with the config file `config`, in a
/// directory of its own; returns the directory, the process and its port.
pub fn follow_and_serve_with(
    rpc: &url::Url,
    contract: Address,
    config: &str,
) -> (tempfile::TempDir, KillOnDrop, u16) {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("canopy.toml");
    std::fs::write(&config_path, config).unwrap();
    let db = dir.path().join("db");
    let (server, port) = spawn_server(
        &[
            "follow",
            "--config",
            config_path.to_str().unwrap(),
            "--rpc",
            rpc.as_str(),
            "--contract",
            &contract.to_string(),
            "--db",
            db.to_str().unwrap(),
            "--serve",
            "127.0.0.1:0",
        ],
        &[],
        &dir.path().join("follow.log"),
    );
    (dir, server, port)
}
