//! Canopy as an Ethereum JSON-RPC endpoint. RLN clients (nwaku, js-waku) keep no tree: they
//! read the membership contract's root and proofs by `eth_call` through an RPC provider. Point
//! them at Canopy instead and the contract's views are answered from the mirror in
//! microseconds, with the node's exact bytes, while every other request goes to the node.
//!
//! The rule, decided here and nowhere else: **answer locally only what is provably the node's
//! answer; forward everything else.**
//!
//! - **Answered here**: `eth_chainId` (the database's chain), and `eth_call` to the followed
//!   contract whose calldata is exactly one of the views in [`views`], at a block whose state
//!   the tree holds ([`block_holds`]): its block number or hash unless the node's head replaced
//!   it at its height, or `latest` while that block (number and hash) was the node's head less
//!   than [`EndpointConfig::latest_max_age_ms`] ago (see [`HeadView`], [`watch_head`]). Calls
//!   that would revert, and call objects with any field a node could refuse or that could
//!   change the answer ([`call`]), go to the node, so their answers are the node's own.
//! - **Forwarded** unchanged (method, params; the id is kept): the methods of
//!   [`EndpointConfig::forward`], through the follower's providers with their failover.
//!   Anything else is refused with `-32601`: never an open proxy for `admin_`, `debug_` or
//!   `personal_` methods.
//! - JSON-RPC 2.0: single requests and batches (in order, local and forwarded items mixed),
//!   notifications (a valid request without an `id`) get no answer; what is no request object
//!   gets `-32600` with `id: null` in its slot.
//! - **Bounded cost**: a local answer is metered in 32-byte words before any work
//!   ([`views::words`]); one request body (a batch's items together) gets at most
//!   [`EndpointConfig::local_words_per_body`] here and its other items go to the node. An
//!   answer of more than [`EndpointConfig::heavy_answer_words`] is computed and hex-encoded on
//!   a bounded blocking pool ([`EndpointConfig::heavy_workers`] threads), never on the async
//!   workers that answer nwaku's proofs, and the tree's read lock is held for the reading only,
//!   not the encoding. Forwarded answers are read up to
//!   [`EndpointConfig::forward_max_answer_bytes`], and at most
//!   [`EndpointConfig::max_forwarded_in_flight`] requests are at the node at once (the others
//!   wait their turn up to the forwarding deadline, then answer `-32005`).
//!
//! ```no_run
//! # async fn example(tree: std::sync::Arc<follower::FollowedTree>, client: follower::ChainClient) {
//! use std::sync::Arc;
//! use eth_endpoint::{Endpoint, EndpointConfig, HeadView};
//! let head = Arc::new(HeadView::default());
//! tokio::spawn(eth_endpoint::watch_head(client.clone(), head.clone(), std::time::Duration::from_millis(250)));
//! let endpoint = Endpoint::new(tree, Some(client), head, EndpointConfig::default());
//! let answer = endpoint
//!     .handle(br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#)
//!     .await;
//! println!("{}", String::from_utf8_lossy(&answer.unwrap_or_default()));
//! # }
//! ```

pub mod call;
pub mod head;
pub mod views;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::Bytes;
use follower::{BlockMeta, ChainClient, FollowedTree, ForwardPolicy};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::call::local_call;
pub use crate::call::BlockTag;
pub use crate::head::{block_holds, watch_head, HeadView};

/// What the endpoint answers and forwards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointConfig {
    /// Methods forwarded to the node; every other method the mirror does not answer gets
    /// `-32601`.
    pub forward: Vec<String>,
    /// Most requests in one batch; a larger batch is refused whole (`-32600`).
    pub max_batch: usize,
    /// `latest` is the tree's block while it was the node's head less than this many
    /// milliseconds ago; otherwise `latest` calls are forwarded.
    pub latest_max_age_ms: u64,
    /// How often the node's head is asked (`eth_getBlockByNumber("latest")`) while serving.
    pub head_poll_ms: u64,
    /// A `latest` call that finds the node's head at another block than the tree's (a block
    /// the follower is applying) waits up to this many milliseconds for the tree to reach it
    /// and is then answered here; past it, it is forwarded. Without the wait, every `latest`
    /// call in the moments after each block goes to the node, a flood's too.
    pub latest_wait_ms: u64,
    /// Time one forwarded request may take upstream, every attempt included, in milliseconds:
    /// past it the request answers `-32603` in its own slot. Below the server's request
    /// timeout, so one slow item costs that item only.
    pub forward_deadline_ms: u64,
    /// Requests sent upstream for one forwarded request, over the providers (transient failures
    /// only; `eth_sendRawTransaction` again only when no connection could be made).
    pub forward_attempts: u32,
    /// Largest answer taken from the node for one forwarded request, in bytes: read up to it, a
    /// larger one answers `-32603` in its slot.
    pub forward_max_answer_bytes: usize,
    /// Most leaves one `getRateCommitmentsInRangeBoundsInclusive` answered here returns; a
    /// larger page goes to the node, whose gas limit decides.
    pub max_local_page: u64,
    /// 32-byte words answered here for one request body, a batch's items together; the items
    /// past it go to the node.
    pub local_words_per_body: u64,
    /// An answer of more words, or any answer of a body that has asked for more, is computed
    /// on the blocking pool, not on the async workers.
    pub heavy_answer_words: u64,
    /// Threads computing heavy answers at once; more wait their turn.
    pub heavy_workers: usize,
    /// Requests forwarded to the node at once, from all clients; one more waits for a place
    /// at most `forward_deadline_ms`, then answers `-32005` in its slot, so the endpoint never
    /// multiplies a flood onto the node it shares with the follower.
    pub max_forwarded_in_flight: usize,
}

impl EndpointConfig {
    /// The forwarding policy these settings describe.
    #[must_use]
    pub fn forward_policy(&self) -> ForwardPolicy {
        ForwardPolicy {
            deadline_ms: self.forward_deadline_ms,
            max_attempts: self.forward_attempts,
            max_answer_bytes: self.forward_max_answer_bytes,
        }
    }
}

impl Default for EndpointConfig {
    /// The read methods RLN clients use, registration's transaction methods, and no more.
    fn default() -> Self {
        let forward = [
            "eth_blockNumber",
            "eth_call",
            "eth_chainId",
            "eth_estimateGas",
            "eth_feeHistory",
            "eth_gasPrice",
            "eth_getBalance",
            "eth_getBlockByHash",
            "eth_getBlockByNumber",
            "eth_getCode",
            "eth_getLogs",
            "eth_getTransactionByHash",
            "eth_getTransactionCount",
            "eth_getTransactionReceipt",
            "eth_maxPriorityFeePerGas",
            "eth_sendRawTransaction",
            "eth_syncing",
            "net_version",
            "web3_clientVersion",
        ];
        Self {
            forward: forward.iter().map(|m| (*m).to_owned()).collect(),
            max_batch: 100,
            latest_max_age_ms: 1_500,
            head_poll_ms: 250,
            latest_wait_ms: 1_000,
            forward_deadline_ms: ForwardPolicy::default().deadline_ms,
            forward_attempts: ForwardPolicy::default().max_attempts,
            forward_max_answer_bytes: ForwardPolicy::default().max_answer_bytes,
            max_local_page: views::MAX_LOCAL_PAGE,
            // Two full pages of 10,000 leaves and then some: 2 MiB of words, 4 MiB of hex.
            local_words_per_body: 65_536,
            heavy_answer_words: 256,
            heavy_workers: 1,
            max_forwarded_in_flight: 32,
        }
    }
}

/// Who answered a request, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The mirror.
    Local,
    /// The node.
    Forwarded,
    /// Refused here (not allowed, malformed).
    Refused,
}

/// The endpoint: the tree, the providers to forward to, and what `latest` is.
pub struct Endpoint {
    tree: Arc<FollowedTree>,
    client: Option<ChainClient>,
    head: Arc<HeadView>,
    config: EndpointConfig,
    /// Permits of the blocking pool for heavy answers.
    heavy: Arc<tokio::sync::Semaphore>,
    /// Permits of requests forwarded at once.
    forwarding: tokio::sync::Semaphore,
}

/// The words one request body may still have answered here.
struct Budget(AtomicU64);

impl Budget {
    /// Takes `words` if they are left.
    fn take(&self, words: u64) -> bool {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(words)
            })
            .is_ok()
    }

    /// Returns `words` taken for an answer that was not given here after all.
    fn give_back(&self, words: u64) {
        self.0.fetch_add(words, Ordering::Relaxed);
    }

    /// The words taken so far out of `whole`.
    fn spent(&self, whole: u64) -> u64 {
        whole.saturating_sub(self.0.load(Ordering::Relaxed))
    }
}

/// Name of the counter of JSON-RPC requests, by method and source (`local`, `forwarded`,
/// `refused`).
pub const REQUESTS: &str = "canopy_jsonrpc_requests_total";
/// Name of the latency histogram of JSON-RPC requests, by method and source.
pub const SECONDS: &str = "canopy_jsonrpc_request_seconds";
/// Name of the counter of calls forwarded because their request body's local budget was spent.
pub const OVER_BUDGET: &str = "canopy_jsonrpc_over_budget_total";
/// Name of the counter of requests answered `-32005` because forwarding was at its cap.
pub const FORWARD_BUSY: &str = "canopy_jsonrpc_forward_busy_total";

impl Endpoint {
    /// An endpoint over `tree` (a follower's database) forwarding to `client`'s providers.
    #[must_use]
    pub fn new(
        tree: Arc<FollowedTree>,
        client: Option<ChainClient>,
        head: Arc<HeadView>,
        config: EndpointConfig,
    ) -> Self {
        metrics::describe_counter!(REQUESTS, "JSON-RPC requests by method and source");
        metrics::describe_histogram!(
            SECONDS,
            metrics::Unit::Seconds,
            "JSON-RPC request latency by method and source"
        );
        metrics::describe_counter!(
            OVER_BUDGET,
            "eth_calls forwarded because their request body's local budget was spent"
        );
        let heavy = Arc::new(tokio::sync::Semaphore::new(config.heavy_workers.max(1)));
        let forwarding = tokio::sync::Semaphore::new(config.max_forwarded_in_flight.max(1));
        Self {
            tree,
            client,
            head,
            config,
            heavy,
            forwarding,
        }
    }

    /// Answers a request body: one request or a batch. `None` when nothing is to be sent back
    /// (only notifications).
    pub async fn handle(&self, body: &[u8]) -> Option<Vec<u8>> {
        let budget = Budget(AtomicU64::new(self.config.local_words_per_body));
        let request: Value = match serde_json::from_slice(body) {
            Ok(value) => value,
            Err(e) => {
                return Some(encode(&error(
                    &Value::Null,
                    -32700,
                    &format!("parse error: {e}"),
                )))
            }
        };
        let answer = match request {
            Value::Array(items) if items.is_empty() => error(&Value::Null, -32600, "empty batch"),
            Value::Array(items) if items.len() > self.config.max_batch => error(
                &Value::Null,
                -32600,
                &format!(
                    "batch of {} requests; at most {} are taken",
                    items.len(),
                    self.config.max_batch
                ),
            ),
            Value::Array(items) => {
                let answers = futures::future::join_all(
                    items.iter().map(|item| self.answer_item(item, &budget)),
                )
                .await;
                let answers: Vec<Value> = answers.into_iter().flatten().collect();
                if answers.is_empty() {
                    return None;
                }
                Value::Array(answers)
            }
            single => self.answer_item(&single, &budget).await?,
        };
        let spent = budget.spent(self.config.local_words_per_body);
        if spent <= self.config.heavy_answer_words {
            return Some(encode(&answer));
        }
        // Megabytes of hex: encoded on the blocking pool too.
        let permit = self.heavy.clone().acquire_owned().await.ok()?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            encode(&answer)
        })
        .await
        .ok()
    }

    /// One request's answer (`None` for a notification: a valid request without an id).
    async fn answer_item(&self, request: &Value, budget: &Budget) -> Option<Value> {
        let started = Instant::now();
        let id = request_id(request);
        let called = request
            .get("method")
            .and_then(Value::as_str)
            .filter(|_| request.get("jsonrpc") == Some(&json!("2.0")));
        let (answer, method, source) = match (id, called) {
            (Some(id), Some(called)) => self.dispatch(request, called, &id, budget).await,
            // No request object: JSON-RPC 2.0 answers it, notification or not, with the id
            // `null` ("if there was an error in detecting the id in the Request object (e.g.
            // Invalid Request), it MUST be Null"), as hardhat does; geth echoes a readable id,
            // so nodes differ and the specification decides.
            _ => (
                invalid_request(&Value::Null),
                String::new(),
                Source::Refused,
            ),
        };
        let answered = called.is_none() || request.get("id").is_some();
        let method = follower::metrics::forwarded_method(&method);
        let source_label = match source {
            Source::Local => "local",
            Source::Forwarded => "forwarded",
            Source::Refused => "refused",
        };
        metrics::counter!(REQUESTS, "method" => method, "source" => source_label).increment(1);
        metrics::histogram!(SECONDS, "method" => method, "source" => source_label)
            .record(started.elapsed().as_secs_f64());
        answered.then_some(answer)
    }

    /// The answer to a request object calling `method`, whose id is `id`.
    async fn dispatch(
        &self,
        request: &Value,
        method: &str,
        id: &Value,
        budget: &Budget,
    ) -> (Value, String, Source) {
        let id = id.clone();
        let params = request
            .get("params")
            .cloned()
            .unwrap_or(Value::Array(Vec::new()));
        if !(params.is_array() || params.is_object()) {
            let e = error(&id, -32602, "invalid params: an array or an object");
            return (e, method.to_owned(), Source::Refused);
        }
        if let Some(result) = self.local_answer(method, &params, budget).await {
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            return (answer, method.to_owned(), Source::Local);
        }
        if !self.config.forward.iter().any(|m| m == method) {
            return (
                method_not_found(&id, method),
                method.to_owned(),
                Source::Refused,
            );
        }
        (
            self.forward(&id, method, &params).await,
            method.to_owned(),
            Source::Forwarded,
        )
    }

    /// The mirror's own answer, when it has one and `budget` covers it.
    async fn local_answer(&self, method: &str, params: &Value, budget: &Budget) -> Option<Value> {
        match method {
            "eth_chainId" => {
                let chain = self
                    .tree
                    .read(|t| block_of(t).and_then(|m| m.binding))?
                    .chain_id;
                Some(json!(format!("{chain:#x}")))
            }
            "eth_call" => self.local_call(params, budget).await,
            _ => None,
        }
    }

    /// An `eth_call` of a view answered from the tree, when the call's block is the tree's and
    /// `budget` covers it. A `latest` call that finds the node's head past the tree waits for
    /// the follower (at most [`EndpointConfig::latest_wait_ms`], again if a block landed
    /// while it waited its turn on the blocking pool); past the wait it is forwarded.
    async fn local_call(&self, params: &Value, budget: &Budget) -> Option<Value> {
        let binding = self.tree.read(|t| block_of(t).and_then(|m| m.binding))?;
        let call = local_call(params, binding.contract, binding.chain_id)?;
        let words = views::words(&call.data);
        if !budget.take(words) {
            metrics::counter!(OVER_BUDGET).increment(1);
            return None;
        }
        let wait = Duration::from_millis(self.config.latest_wait_ms);
        let max_age = Duration::from_millis(self.config.latest_max_age_ms);
        let max_page = self.config.max_local_page;
        let latest = call.block == BlockTag::Latest;
        if latest {
            self.until_tree_at_head(tokio::time::Instant::now() + wait)
                .await;
        }
        let (tree, head) = (self.tree.clone(), self.head.clone());
        // The block, its binding, the node's head and the view read under one lock, the head
        // as it is now (not before a wait for the blocking pool): a block landing meanwhile
        // cannot mix two states. The hex is made after the lock.
        let compute = move || -> Computed {
            tree.read(|t| {
                let Some(meta) = block_of(t) else {
                    return Computed::No;
                };
                let (Some(hash), Some(bound)) = (meta.hash, meta.binding) else {
                    return Computed::No;
                };
                let head = head.fresh(max_age);
                if bound != binding {
                    Computed::No
                } else if block_holds(call.block, meta.number, hash, head) {
                    views::answer(t, &meta, &call.data, max_page).map_or(Computed::No, Computed::At)
                } else if latest && head.is_some_and(|(number, _)| number > meta.number) {
                    Computed::Behind
                } else {
                    Computed::No
                }
            })
        };
        // Light work runs here, on the async worker: a small call, in a body that has asked
        // little so far. A batch of many small calls is heavy work too (the flood bench's
        // 100 pages of 103 words each held up the nwaku-like clients 200-fold when they ran
        // here), so past the body's first `heavy_answer_words` its calls go to the pool.
        let heavy = self.config.heavy_answer_words;
        let light = words <= heavy && budget.spent(self.config.local_words_per_body) <= heavy;
        let answer = if light {
            let mut computed = compute();
            if matches!(computed, Computed::Behind) {
                self.until_tree_at_head(tokio::time::Instant::now() + wait)
                    .await;
                computed = compute();
            }
            computed.answer()
        } else {
            // The permit goes with the work: a request dropped meanwhile does not free it
            // before the thread is done. A block that lands while the call waited its turn
            // is waited for with the permit held: the follower's commit is moments away, and
            // the call neither goes to the back of the queue nor to the node.
            let Ok(permit) = self.heavy.clone().acquire_owned().await else {
                budget.give_back(words);
                return None;
            };
            let compute = Arc::new(compute);
            let mut computed = blocking(compute.clone()).await;
            if matches!(computed, Computed::Behind) {
                self.until_tree_at_head(tokio::time::Instant::now() + wait)
                    .await;
                computed = blocking(compute).await;
            }
            drop(permit);
            computed.answer()
        };
        if answer.is_none() {
            budget.give_back(words);
        }
        answer
    }

    /// Waits while the node's head is known and the tree is at another height (the follower
    /// applying a new block), until `until`. Woken by the follower's commits and the head
    /// watcher, not by polling: a flood of waiting calls costs nothing meanwhile.
    async fn until_tree_at_head(&self, until: tokio::time::Instant) {
        let max_age = Duration::from_millis(self.config.latest_max_age_ms);
        loop {
            let moved = self.head.next_move();
            tokio::pin!(moved);
            moved.as_mut().enable();
            let (Some((number, _)), Some(meta)) =
                (self.head.fresh(max_age), self.tree.read(block_of))
            else {
                return;
            };
            // At the head, or a block the node replaced at the tree's height (a rewind, not a
            // wait): the caller decides under the lock.
            if meta.number == number || tokio::time::timeout_at(until, moved).await.is_err() {
                return;
            }
        }
    }

    async fn forward(&self, id: &Value, method: &str, params: &Value) -> Value {
        let Some(client) = &self.client else {
            return method_not_found(id, method);
        };
        // A place at the node, waited for at most the forwarding deadline: a batch of many
        // forwarded items goes through a few at a time, a flood gets `-32005` past the wait.
        let policy = self.config.forward_policy();
        let deadline = Duration::from_millis(policy.deadline_ms);
        let waiting = tokio::time::Instant::now();
        let Ok(Ok(_forwarding)) = tokio::time::timeout(deadline, self.forwarding.acquire()).await
        else {
            metrics::counter!(FORWARD_BUSY).increment(1);
            return error(
                id,
                -32005,
                "too many requests forwarded to the node at once: retry later",
            );
        };
        let raw = match RawValue::from_string(params.to_string()) {
            Ok(raw) => raw,
            Err(e) => return error(id, -32602, &format!("invalid params: {e}")),
        };
        // The wait for a place comes out of the deadline: the whole item stays within it.
        let waited = u64::try_from(waiting.elapsed().as_millis()).unwrap_or(u64::MAX);
        let policy = ForwardPolicy {
            deadline_ms: policy.deadline_ms.saturating_sub(waited).max(1),
            ..policy
        };
        match client.forward(method, &raw, &policy).await {
            Ok(Ok(result)) => {
                let result: Value = serde_json::from_str(result.get()).unwrap_or(Value::Null);
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            }
            Ok(Err(e)) => {
                let mut error = json!({"code": e.code, "message": e.message});
                if let Some(data) = e.data {
                    error["data"] = serde_json::from_str(data.get()).unwrap_or(Value::Null);
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
            // -32603 (internal error) says the fault is on the way, not in the request.
            Err(e) => error(id, -32603, &format!("no provider answered: {e}")),
        }
    }
}

/// What the tree says of a local call.
enum Computed {
    /// The view's answer at the tree's block.
    At(Bytes),
    /// A `latest` call while the node's head is past the tree's block.
    Behind,
    /// Not answered here (another block, another binding, a view it does not answer).
    No,
}

impl Computed {
    /// The JSON result, when answered here.
    fn answer(self) -> Option<Value> {
        match self {
            Self::At(bytes) => Some(json!(bytes)),
            Self::Behind | Self::No => None,
        }
    }
}

/// Runs `compute` on the blocking pool; a panicked task is no answer.
async fn blocking(compute: Arc<impl Fn() -> Computed + Send + Sync + 'static>) -> Computed {
    tokio::task::spawn_blocking(move || compute())
        .await
        .unwrap_or(Computed::No)
}

/// The block the tree holds; unreadable metadata is no block, so nothing is answered locally.
fn block_of(tree: &tree_engines::DbTree<hasher::PoseidonHasher>) -> Option<BlockMeta> {
    follower::read_block(tree).ok().flatten()
}

/// The id of a request object: its `id` (a string, a number or `null`; `null` when absent), or
/// `None` for a value that is no request object (not an object, an id of another type).
fn request_id(request: &Value) -> Option<Value> {
    let object = request.as_object()?;
    match object.get("id") {
        None => Some(Value::Null),
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id.clone()),
        Some(_) => None,
    }
}

/// `-32600`: not a JSON-RPC 2.0 request (no `"jsonrpc": "2.0"`, a method that is no string).
fn invalid_request(id: &Value) -> Value {
    error(
        id,
        -32600,
        "invalid request: jsonrpc \"2.0\" and a method are required",
    )
}

/// `-32601`, in geth's words: what a method the endpoint neither answers nor forwards gets.
fn method_not_found(id: &Value, method: &str) -> Value {
    error(
        id,
        -32601,
        &format!("the method {method} does not exist/is not available"),
    )
}

fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn encode(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An upstream that holds every request for a second before answering `0x1`.
    async fn slow_upstream() -> url::Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buffer = [0u8; 4096];
                    let _ = socket.read(&mut buffer).await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let body = r#"{"jsonrpc":"2.0","id":0,"result":"0x1"}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        url
    }

    /// With one place at a node that takes a second per request and a deadline of 1.5 s, a
    /// batch of three forwarded requests gets the first answer; the others wait their turn, and
    /// the wait counts within the deadline: each answers an error in its own slot (`-32603`
    /// past the deadline, or `-32005` when its wait for a place used it up), and the batch is
    /// answered at the deadline, not a second after it (the second request once got a whole
    /// deadline of its own after waiting).
    #[tokio::test]
    async fn forwarding_past_its_cap_is_refused_in_its_slot() {
        let dir = tempfile::tempdir().unwrap();
        let tree = tree_engines::DbTree::<hasher::PoseidonHasher>::open(
            &tree_engines::DbConfig::new(dir.path()),
            tree_core::Depth::new(20).unwrap(),
        )
        .unwrap();
        let client = ChainClient::new(
            slow_upstream().await,
            alloy::primitives::Address::ZERO,
            follower::RetryConfig::default(),
        )
        .unwrap();
        let config = EndpointConfig {
            max_forwarded_in_flight: 1,
            forward_deadline_ms: 1_500,
            ..EndpointConfig::default()
        };
        let endpoint = Endpoint::new(
            Arc::new(FollowedTree::new(tree)),
            Some(client),
            Arc::new(HeadView::default()),
            config,
        );
        let batch: Vec<Value> = (0..3)
            .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "eth_blockNumber", "params": []}))
            .collect();
        let started = Instant::now();
        let answer = endpoint
            .handle(Value::Array(batch).to_string().as_bytes())
            .await
            .unwrap();
        let elapsed = started.elapsed();
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        let items = answer.as_array().unwrap();
        let refused = items
            .iter()
            .filter(|a| [json!(-32005), json!(-32603)].contains(&a["error"]["code"]))
            .count();
        let results = items.iter().filter(|a| a["result"] == json!("0x1")).count();
        assert_eq!((results, refused), (1, 2), "{answer}");
        assert!(elapsed < Duration::from_millis(1_900), "{elapsed:?}");
    }
}
