//! A JSON-RPC proxy on loopback between a follower and a node that injects faults (dropped
//! connections, delays, HTTP 500 and 429, truncated bodies), tampers with answers (`eth_getLogs`
//! logs, or — a lying provider — `root()`, block hashes, leaves), refuses a method with a
//! permanent JSON-RPC error, holds every request as a distant node would, or holds the answers
//! of `eth_getLogs` until released (so the chain can reorg while a range is read), for the
//! follower's fault, bad-data, reorg-race, provider and shutdown tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the first log of an `eth_getLogs` answer is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tamper {
    /// One topic more.
    ExtraTopic,
    /// The data one word short.
    ShortData,
    /// The index word set to 2^20 (past a depth-20 tree).
    IndexPastCapacity,
    /// The index word raised by 5 (a gap).
    IndexGap,
    /// The first word set to the BN254 scalar modulus.
    NonCanonical,
    /// Another emitting address.
    OtherAddress,
    /// A lying provider: `root()` answers another root.
    Root,
    /// A lying provider: every block's hash is another.
    BlockHash,
    /// A lying provider: the first leaf of `getRateCommitmentsInRangeBoundsInclusive` is
    /// another.
    Leaf,
    /// The first `RootStored` log of an `eth_getLogs` answer carries another root.
    StoredRoot,
}

/// A permanent JSON-RPC error the proxy answers instead of forwarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every request of this method gets this code ("method not found" is -32601).
    Method(&'static str, i64),
    /// `eth_call` with an EIP-1898 block object gets ganache 7.9.2's answer: `-32700 Cannot
    /// wrap a "object" as a json-rpc type`.
    BlockObjects,
}

/// What the proxy does to each request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mode {
    /// Probability that a request meets a fault.
    pub fault_rate: f64,
    /// Damage to `eth_getLogs` answers.
    pub tamper: Option<Tamper>,
    /// Every request is held this long before it is forwarded: a node far away, so that a
    /// sync lasts long enough to be interrupted whatever the machine's speed.
    pub latency_ms: u64,
    /// Requests answered with a permanent error instead.
    pub refuse: Option<Refusal>,
    /// The proxy is down: every connection is closed unanswered.
    pub down: bool,
}

/// Counts of what the proxy did.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests forwarded untouched.
    pub forwarded: AtomicU64,
    /// Faults injected.
    pub faults: AtomicU64,
    /// Answers tampered with.
    pub tampered: AtomicU64,
    /// Requests refused with a permanent error.
    pub refused: AtomicU64,
    /// `eth_getLogs` answers held by [`FaultProxy::hold_logs`].
    pub held: AtomicU64,
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    /// `http://127.0.0.1:port`.
    pub url: url::Url,
    /// What it does now.
    pub mode: Arc<Mutex<Mode>>,
    /// What it did.
    pub counts: Arc<Counts>,
    hold: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// From now on `eth_getLogs` is forwarded at once but its answer is held (counted in
    /// [`Counts::held`]) until [`release_logs`](Self::release_logs): the logs are the chain's as
    /// it was when asked, and whatever the node does meanwhile comes after them.
    pub fn hold_logs(&self) {
        self.hold.send_replace(true);
    }

    /// Lets the held `eth_getLogs` answers go, and every later one.
    pub fn release_logs(&self) {
        self.hold.send_replace(false);
    }

    /// Waits until `n` `eth_getLogs` answers are held.
    ///
    /// # Panics
    /// When none is within 60 s (a test's failure).
    pub async fn until_held(&self, n: u64) {
        for _ in 0..6000 {
            if self.counts.held.load(Ordering::Relaxed) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no eth_getLogs request was held within 60 s");
    }

    /// Starts a proxy to the node at `node` (`http://host:port`).
    ///
    /// # Panics
    /// When it cannot bind loopback or `node` has no host and port (a test's setup).
    pub async fn start(node: &url::Url, seed: u64) -> Self {
        let upstream = match (node.host_str(), node.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            _ => panic!("{node} has no host and port"),
        };
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        let mode = Arc::new(Mutex::new(Mode::default()));
        let counts = Arc::new(Counts::default());
        let rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
        let (hold, held) = tokio::sync::watch::channel(false);
        let task = {
            let (mode, counts) = (mode.clone(), counts.clone());
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (mode, counts, rng, upstream, held) = (
                        *mode.lock(),
                        counts.clone(),
                        rng.clone(),
                        upstream.clone(),
                        held.clone(),
                    );
                    tokio::spawn(async move {
                        let _ = serve(stream, &upstream, mode, &counts, &rng, held).await;
                    });
                }
            })
        };
        Self {
            url: format!("http://127.0.0.1:{port}")
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
            mode,
            counts,
            hold,
            task,
        }
    }
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Ok(buf[end + 4..end + 4 + length].to_vec());
            }
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn forward(upstream: &str, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect(upstream).await?;
    let head = format!(
        "POST / HTTP/1.0\r\nHost: {upstream}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let start = find(&response, b"\r\n\r\n").map_or(0, |i| i + 4);
    Ok(response[start..].to_vec())
}

async fn reply(
    stream: &mut TcpStream,
    status: &str,
    body: &[u8],
    claimed: usize,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
}

async fn serve(
    mut stream: TcpStream,
    upstream: &str,
    mode: Mode,
    counts: &Counts,
    rng: &Mutex<StdRng>,
    mut held: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let request = read_request(&mut stream).await?;
    if mode.down {
        return Ok(());
    }
    if let Some(answer) = mode.refuse.and_then(|r| refusal(&request, r)) {
        counts.refused.fetch_add(1, Ordering::Relaxed);
        let len = answer.len();
        return reply(&mut stream, "200 OK", &answer, len).await;
    }
    if mode.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(mode.latency_ms)).await;
    }
    let (faulty, kind, delay) = {
        let mut rng = rng.lock();
        (
            rng.gen_bool(mode.fault_rate),
            rng.gen_range(0..5),
            rng.gen_range(50..400),
        )
    };
    if faulty {
        counts.faults.fetch_add(1, Ordering::Relaxed);
        match kind {
            0 => return Ok(()), // dropped: closed without an answer
            1 => tokio::time::sleep(Duration::from_millis(delay)).await,
            2 => return reply(&mut stream, "500 Internal Server Error", b"oops", 4).await,
            3 => return reply(&mut stream, "429 Too Many Requests", b"{}", 2).await,
            _ => {
                let body = forward(upstream, &request).await?;
                let half = &body[..body.len() / 2];
                return reply(&mut stream, "200 OK", half, half.len()).await;
            }
        }
    }
    let mut body = forward(upstream, &request).await?;
    if *held.borrow() && method_of(&request).as_deref() == Some("eth_getLogs") {
        counts.held.fetch_add(1, Ordering::Relaxed);
        let _ = held.wait_for(|hold| !*hold).await;
    }
    if let Some(tamper) = mode.tamper {
        if let Some(changed) = tamper_answer(&request, &body, tamper) {
            counts.tampered.fetch_add(1, Ordering::Relaxed);
            body = changed;
        }
    }
    counts.forwarded.fetch_add(1, Ordering::Relaxed);
    let len = body.len();
    reply(&mut stream, "200 OK", &body, len).await
}

fn method_of(request: &[u8]) -> Option<String> {
    let request: serde_json::Value = serde_json::from_slice(request).ok()?;
    request["method"].as_str().map(str::to_owned)
}

/// The error answer of a refused request, if `refusal` applies to it.
fn refusal(request: &[u8], refusal: Refusal) -> Option<Vec<u8>> {
    let request: serde_json::Value = serde_json::from_slice(request).ok()?;
    let (code, message) = match refusal {
        Refusal::Method(method, code) if request["method"] == method => (
            code,
            format!("the method {method} does not exist/is not available"),
        ),
        Refusal::BlockObjects
            if request["method"] == "eth_call" && request["params"][1].is_object() =>
        {
            (
                -32700,
                "Cannot wrap a \"object\" as a json-rpc type".to_owned(),
            )
        }
        _ => return None,
    };
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": request["id"],
        "error": {"code": code, "message": message},
    });
    serde_json::to_vec(&answer).ok()
}

/// `answer` tampered with, when `tamper` applies to `request`.
fn tamper_answer(request: &[u8], body: &[u8], tamper: Tamper) -> Option<Vec<u8>> {
    let request: serde_json::Value = serde_json::from_slice(request).ok()?;
    let mut answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    let calldata = request["params"][0]["input"]
        .as_str()
        .or_else(|| request["params"][0]["data"].as_str())
        .unwrap_or_default()
        .to_owned();
    let selector = |sel: [u8; 4]| {
        let hex: String = sel.iter().map(|b| format!("{b:02x}")).collect();
        request["method"] == "eth_call" && calldata.starts_with(&format!("0x{hex}"))
    };
    use alloy::sol_types::SolCall;
    use follower::profile::IMembershipSet as C;
    match tamper {
        Tamper::Root if selector(C::rootCall::SELECTOR) => {
            answer["result"] = serde_json::json!(format!("0x{}", "0".repeat(63) + "7"));
            return serde_json::to_vec(&answer).ok();
        }
        Tamper::BlockHash if request["method"] == "eth_getBlockByNumber" => {
            let block = answer["result"].as_object_mut()?;
            block.insert(
                "hash".into(),
                serde_json::json!(format!("0x{}", "ab".repeat(32))),
            );
            return serde_json::to_vec(&answer).ok();
        }
        Tamper::Leaf if selector(C::getRateCommitmentsInRangeBoundsInclusiveCall::SELECTOR) => {
            // ABI: offset, length, then the leaves; the first leaf is the third word.
            let result = answer["result"]
                .as_str()?
                .trim_start_matches("0x")
                .to_owned();
            if result.len() < 3 * 64 {
                return None;
            }
            let mut changed = result.clone();
            changed.replace_range(2 * 64..3 * 64, &format!("{:0>64}", "5"));
            answer["result"] = serde_json::json!(format!("0x{changed}"));
            return serde_json::to_vec(&answer).ok();
        }
        _ => {}
    }
    if request["method"] != "eth_getLogs" {
        return None;
    }
    if tamper == Tamper::StoredRoot {
        let log = answer["result"]
            .as_array_mut()?
            .iter_mut()
            .find(|l| l["data"].as_str().is_some_and(|d| d.len() == 2 + 64))?;
        log["data"] = serde_json::json!(format!("0x{}", "0".repeat(63) + "7"));
        return serde_json::to_vec(&answer).ok();
    }
    // The first membership event (96 bytes of data; a `RootStored` before it has 32).
    let log = answer["result"]
        .as_array_mut()?
        .iter_mut()
        .find(|l| l["data"].as_str().is_some_and(|d| d.len() == 2 + 192))?;
    let data = log["data"].as_str()?.trim_start_matches("0x").to_owned();
    let word = |i: usize, hex: String| -> String {
        let mut d = data.clone();
        d.replace_range(64 * i..64 * (i + 1), &format!("{hex:0>64}"));
        format!("0x{d}")
    };
    match tamper {
        Tamper::ExtraTopic => {
            log["topics"]
                .as_array_mut()?
                .push(serde_json::json!(format!("0x{}", "11".repeat(32))));
        }
        Tamper::ShortData => log["data"] = serde_json::json!(format!("0x{}", &data[..128])),
        Tamper::IndexPastCapacity => log["data"] = serde_json::json!(word(2, "100000".into())),
        Tamper::IndexGap => {
            let index = u64::from_str_radix(&data[128..192], 16).ok()?;
            log["data"] = serde_json::json!(word(2, format!("{:x}", index + 5)));
        }
        Tamper::NonCanonical => {
            log["data"] = serde_json::json!(word(
                0,
                "30644e72e131a029b85045b68181585d2833e84879b9709143e1f593f0000001".into()
            ));
        }
        Tamper::OtherAddress => {
            log["address"] = serde_json::json!(format!("0x{}", "22".repeat(20)));
        }
        Tamper::Root | Tamper::BlockHash | Tamper::Leaf | Tamper::StoredRoot => return None,
    }
    serde_json::to_vec(&answer).ok()
}
