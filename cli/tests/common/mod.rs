//! Shared by the command's test files: spawned servers that never outlive a test, a plain HTTP
//! client on loopback, signals.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
