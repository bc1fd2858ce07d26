//! The node, as the follower asks it: typed views and logs over alloy, from one provider or
//! several. Each call fails over to the next provider on a transient failure and is retried with
//! capped exponential backoff and jitter once every provider failed; permanent failures are not
//! retried in a loop (one classification, in `failure`). Block hashes and roots can be required to agree among a
//! quorum of providers; views at a block are pinned to its hash (EIP-1898, or by number with the
//! hash checked around the call where a node lacks it).

mod endpoint;
mod failure;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::future::{Future, IntoFuture};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::{BlockId, BlockNumberOrTag, RpcBlockHash};
use alloy::primitives::{Address, Bytes, B256, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::types::{Filter, Log, TransactionRequest};
use alloy::sol_types::SolCall;
use alloy::transports::RpcError;
use hasher::Fr;
use parking_lot::Mutex;
use rand::Rng;
use serde::{Deserialize, Serialize};

use endpoint::Endpoint;
pub use endpoint::ProviderHealth;
use failure::classify;
pub(crate) use failure::Failure;

use crate::profile::{canonical, IMembershipSet};
use crate::roots::RootHistory;
use crate::{metrics, FollowError};

/// How failed calls are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// First backoff, in milliseconds; doubled after each round in which every provider failed.
    pub initial_backoff_ms: u64,
    /// Backoff cap, in milliseconds.
    pub max_backoff_ms: u64,
    /// Requests per call, over all providers, before [`FollowError::Unavailable`].
    pub max_attempts: u32,
    /// Per-request timeout, in milliseconds.
    pub request_timeout_ms: u64,
}

impl Default for RetryConfig {
    /// 100 ms doubling to 10 s, 12 attempts (about a minute), 30 s per request.
    fn default() -> Self {
        Self {
            initial_backoff_ms: 100,
            max_backoff_ms: 10_000,
            max_attempts: 12,
            request_timeout_ms: 30_000,
        }
    }
}

/// Counters of the calls made, shared with whoever reports them.
#[derive(Debug, Default)]
pub struct RpcCounters {
    /// Requests sent (retries included).
    pub requests: AtomicU64,
    /// Failed attempts that were retried.
    pub retries: AtomicU64,
    /// Time spent waiting on the node, in microseconds.
    pub wait_us: AtomicU64,
}

/// What a page or range request could not do.
#[derive(Debug)]
pub enum RangeError {
    /// Ask for a smaller range.
    TooLarge,
    /// Any other failure.
    Failed(FollowError),
}

/// A node's JSON-RPC error object, passed on as it came.
#[derive(Clone, Debug)]
pub struct ErrorAnswer {
    /// `code`.
    pub code: i64,
    /// `message`.
    pub message: String,
    /// `data`, raw (revert data, a node's details), if any.
    pub data: Option<Box<serde_json::value::RawValue>>,
}

/// A block by number and hash: views at it read exactly its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
}

/// Which providers a call may use first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// Any: the preferred provider first.
    Any,
    /// Data the quorum does not vote on (logs, leaves): a provider whose data produced a root
    /// the quorum disowned is asked last, and the provider that answered is remembered.
    Data,
}

#[derive(Debug)]
struct Shared {
    endpoints: Vec<Endpoint>,
    /// Where calls start: the last provider that answered.
    preferred: AtomicUsize,
    /// Providers whose logs or leaves produced a root the quorum disowned.
    distrusted: Vec<AtomicBool>,
    /// Providers that served data since [`ChainClient::begin_data`].
    data_sources: Mutex<BTreeSet<usize>>,
    contract: Address,
    retry: RetryConfig,
    quorum: usize,
    counters: Arc<RpcCounters>,
}

/// One or more providers of one chain, and a contract on it.
#[derive(Clone, Debug)]
pub struct ChainClient {
    shared: Arc<Shared>,
}

impl ChainClient {
    /// A client of the node at `url` (http or https) for `contract`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(url: url::Url, contract: Address, retry: RetryConfig) -> Result<Self, FollowError> {
        Self::with_providers(vec![url], contract, retry, 1)
    }

    /// A client of several providers of one chain: reads fail over between them, and a block's
    /// hash and the contract's root are taken only when `quorum` of them agree.
    ///
    /// # Errors
    /// No provider, a quorum of 0 or above the number of providers, an HTTP client that cannot
    /// be built.
    pub fn with_providers(
        urls: Vec<url::Url>,
        contract: Address,
        retry: RetryConfig,
        quorum: usize,
    ) -> Result<Self, FollowError> {
        if urls.is_empty() {
            return Err(FollowError::Config("no RPC provider given".into()));
        }
        if quorum == 0 || quorum > urls.len() {
            return Err(FollowError::Config(format!(
                "quorum {quorum} with {} provider(s): it must be between 1 and the number of providers",
                urls.len()
            )));
        }
        // TLS through rustls with ring; a provider installed earlier by the embedding process
        // stays (then this returns an error, ignored).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let timeout = Duration::from_millis(retry.request_timeout_ms);
        let endpoints = urls
            .into_iter()
            .map(|url| Endpoint::new(url, timeout))
            .collect::<Result<Vec<_>, _>>()?;
        let distrusted = endpoints.iter().map(|_| AtomicBool::new(false)).collect();
        Ok(Self {
            shared: Arc::new(Shared {
                endpoints,
                preferred: AtomicUsize::new(0),
                distrusted,
                data_sources: Mutex::default(),
                contract,
                retry,
                quorum,
                counters: Arc::default(),
            }),
        })
    }

    /// The contract followed.
    #[must_use]
    pub fn contract(&self) -> Address {
        self.shared.contract
    }

    /// The call counters.
    #[must_use]
    pub fn counters(&self) -> Arc<RpcCounters> {
        self.shared.counters.clone()
    }

    /// The first provider's alloy client (for callers that need more than the follower's views).
    #[must_use]
    pub fn provider(&self) -> &RootProvider {
        &self.shared.endpoints[0].provider
    }

    /// How many providers must agree on a block's hash and the contract's root.
    #[must_use]
    pub fn quorum(&self) -> usize {
        self.shared.quorum
    }

    /// Every provider's health, in the order given.
    #[must_use]
    pub fn providers(&self) -> Vec<ProviderHealth> {
        self.shared.endpoints.iter().map(Endpoint::health).collect()
    }

    pub(crate) fn names(&self) -> String {
        let names: Vec<&str> = self
            .shared
            .endpoints
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        names.join(", ")
    }

    /// Forgets which providers served data: a step calls this before it reads a range.
    pub(crate) fn begin_data(&self) {
        self.shared.data_sources.lock().clear();
    }

    /// The quorum disowned the root that the data read since [`begin_data`](Self::begin_data)
    /// produced: the providers that served it are reported and asked last from now on.
    /// Returns whether another provider is left to read the data from again (never with a
    /// quorum of one: one provider's root says nothing about another's logs).
    pub(crate) fn distrust_data_sources(&self, what: &str) -> bool {
        let shared = &self.shared;
        if shared.quorum < 2 {
            return false;
        }
        let sources: Vec<usize> = shared.data_sources.lock().iter().copied().collect();
        for &i in &sources {
            shared.endpoints[i].disagreed(what.to_owned());
            shared.distrusted[i].store(true, Ordering::Relaxed);
        }
        let left = shared.distrusted.iter().any(|d| !d.load(Ordering::Relaxed));
        if !left {
            // Every provider's data has been disowned once: start over rather than refuse all.
            for d in &shared.distrusted {
                d.store(false, Ordering::Relaxed);
            }
        }
        left && !sources.is_empty()
    }

    /// The provider a call of `purpose` starts with.
    fn first(&self, purpose: Purpose) -> usize {
        let shared = &self.shared;
        let n = shared.endpoints.len();
        let preferred = shared.preferred.load(Ordering::Relaxed) % n;
        if purpose == Purpose::Data {
            if let Some(i) = (0..n)
                .map(|k| (preferred + k) % n)
                .find(|&i| !shared.distrusted[i].load(Ordering::Relaxed))
            {
                return i;
            }
        }
        preferred
    }

    /// Sends one request to provider `i` and keeps its health and the counters.
    async fn send<T, Fut>(&self, method: &'static str, i: usize, request: Fut) -> Result<T, Failure>
    where
        Fut: Future<Output = Result<T, Failure>>,
    {
        let endpoint = &self.shared.endpoints[i];
        self.shared
            .counters
            .requests
            .fetch_add(1, Ordering::Relaxed);
        metrics::rpc_request(method);
        let started = Instant::now();
        let result = request.await;
        let took = started.elapsed();
        let waited = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.shared
            .counters
            .wait_us
            .fetch_add(waited, Ordering::Relaxed);
        match &result {
            Ok(_) => endpoint.record(method, took, None),
            Err(failure) => {
                metrics::rpc_error(method, failure.kind());
                if matches!(failure, Failure::Transient(_) | Failure::Permanent { .. }) {
                    endpoint.record(method, took, Some(&failure.message()));
                }
            }
        }
        result
    }

    /// Runs `op` (one request to the provider it is given) until it succeeds: a transient
    /// failure fails over to the next provider at once, and a round in which every provider
    /// failed waits the backoff; a permanent failure is tried once on each other provider (one
    /// may lack a method the others have), then returned. Returns the answer and who gave it.
    async fn attempt<T, F, Fut>(
        &self,
        method: &'static str,
        purpose: Purpose,
        mut op: F,
    ) -> Result<(T, usize), (Failure, usize)>
    where
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let shared = &self.shared;
        let n = shared.endpoints.len();
        let mut backoff = shared.retry.initial_backoff_ms.max(1);
        let (mut attempt, mut failed_in_round, mut refusals) = (0u32, 0usize, 0usize);
        let mut i = self.first(purpose);
        loop {
            attempt += 1;
            let failure = match self.send(method, i, op(i)).await {
                Ok(value) => {
                    if purpose == Purpose::Data {
                        shared.data_sources.lock().insert(i);
                    }
                    shared.preferred.store(i, Ordering::Relaxed);
                    return Ok((value, i));
                }
                Err(failure) => failure,
            };
            match &failure {
                Failure::Transient(message) => {
                    if attempt >= shared.retry.max_attempts {
                        return Err((
                            Failure::Transient(format!("{message} (after {attempt} attempts)")),
                            i,
                        ));
                    }
                    shared.counters.retries.fetch_add(1, Ordering::Relaxed);
                    metrics::rpc_retry(method);
                    failed_in_round += 1;
                    let next = (i + 1) % n;
                    if failed_in_round < n {
                        tracing::warn!(
                            method,
                            from = %shared.endpoints[i].name,
                            to = %shared.endpoints[next].name,
                            "RPC failed, failing over: {message}"
                        );
                    } else {
                        failed_in_round = 0;
                        let jitter = rand::thread_rng().gen_range(0..=backoff / 2);
                        tracing::warn!(
                            method,
                            attempt,
                            provider = %shared.endpoints[i].name,
                            backoff_ms = backoff + jitter,
                            "RPC failed, retrying: {message}"
                        );
                        tokio::time::sleep(Duration::from_millis(backoff + jitter)).await;
                        backoff = (backoff * 2).min(shared.retry.max_backoff_ms.max(1));
                    }
                    i = next;
                }
                Failure::Permanent { .. } if refusals + 1 < n => {
                    refusals += 1;
                    i = (i + 1) % n;
                }
                _ => return Err((failure, i)),
            }
        }
    }

    /// The answer `quorum` providers agree on. Providers are asked in turn until one answer has
    /// that many votes; those that answered otherwise are reported. When every provider has
    /// answered and none agree, the call fails as transient (the block waits); `None` (the
    /// provider has no such block: it lags or reorged) counts as no vote, not as a lie.
    async fn agreed<T, F, Fut>(
        &self,
        method: &'static str,
        what: &str,
        mut op: F,
    ) -> Result<Option<T>, (Failure, usize)>
    where
        T: PartialEq + Debug,
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Result<Option<T>, Failure>>,
    {
        let shared = &self.shared;
        if shared.quorum < 2 {
            return self.attempt(method, Purpose::Any, op).await.map(|(v, _)| v);
        }
        let n = shared.endpoints.len();
        let mut backoff = shared.retry.initial_backoff_ms.max(1);
        let mut rounds = 0u32;
        loop {
            rounds += 1;
            let start = self.first(Purpose::Any);
            let mut answers: Vec<(usize, Option<T>)> = Vec::with_capacity(n);
            let mut last_failure = None;
            for k in 0..n {
                let i = (start + k) % n;
                match self.send(method, i, op(i)).await {
                    Ok(answer) => answers.push((i, answer)),
                    Err(Failure::Reorged) => answers.push((i, None)),
                    Err(failure) => {
                        last_failure = Some((failure, i));
                        continue;
                    }
                }
                let Some((_, candidate)) = answers.last() else {
                    continue;
                };
                let votes = answers.iter().filter(|(_, a)| a == candidate).count();
                if votes >= shared.quorum {
                    for (j, answer) in &answers {
                        if answer != candidate && answer.is_some() {
                            shared.endpoints[*j].disagreed(format!(
                                "{what}: answered {answer:?}, {votes} providers agree on {candidate:?}"
                            ));
                            // Asked last from now on, for votes and for data.
                            shared.distrusted[*j].store(true, Ordering::Relaxed);
                            shared.preferred.store(i, Ordering::Relaxed);
                        }
                    }
                    let (_, agreed) = answers.swap_remove(answers.len() - 1);
                    return Ok(agreed);
                }
            }
            let distinct: Vec<&Option<T>> = answers.iter().fold(Vec::new(), |mut seen, (_, a)| {
                if !seen.contains(&a) {
                    seen.push(a);
                }
                seen
            });
            if answers.len() == n || (distinct.len() > 1 && last_failure.is_none()) {
                let listed: Vec<String> = answers
                    .iter()
                    .map(|(j, a)| format!("{} says {a:?}", shared.endpoints[*j].name))
                    .collect();
                let message = format!(
                    "no {} providers agree on {what}: {}",
                    shared.quorum,
                    listed.join("; ")
                );
                tracing::warn!("{message}; the block waits");
                metrics::no_quorum();
                return Err((Failure::Transient(message), start));
            }
            if rounds >= shared.retry.max_attempts {
                return Err(last_failure
                    .unwrap_or((Failure::Transient(format!("no quorum on {what}")), start)));
            }
            tokio::time::sleep(Duration::from_millis(backoff)).await;
            backoff = (backoff * 2).min(shared.retry.max_backoff_ms.max(1));
        }
    }

    fn error(&self, method: &'static str, (failure, i): (Failure, usize)) -> FollowError {
        let provider = self.shared.endpoints[i].name.clone();
        match failure {
            Failure::Transient(message) => FollowError::Unavailable {
                method,
                providers: self.names(),
                attempts: self.shared.retry.max_attempts,
                message,
            },
            Failure::Permanent { message, .. } | Failure::TooLarge(message) => {
                FollowError::Refused {
                    method,
                    provider,
                    message,
                }
            }
            Failure::Reorged => {
                FollowError::Internal(format!("{method}: a reorg reported outside a pinned call"))
            }
        }
    }

    /// `eth_chainId`, which every provider must agree on.
    ///
    /// # Errors
    /// A provider is unavailable; providers of different chains.
    pub async fn chain_id(&self) -> Result<u64, FollowError> {
        let mut first: Option<(u64, String)> = None;
        for (i, endpoint) in self.shared.endpoints.iter().enumerate() {
            let id = self
                .send("eth_chainId", i, async {
                    endpoint
                        .provider
                        .get_chain_id()
                        .await
                        .map_err(|e| classify(&e))
                })
                .await;
            let id = match id {
                Ok(id) => id,
                // A provider down now is the failover's business; the others decide.
                Err(Failure::Transient(_)) if self.shared.endpoints.len() > 1 => continue,
                Err(failure) => return Err(self.error("eth_chainId", (failure, i))),
            };
            match &first {
                Some((chain, name)) if *chain != id => {
                    return Err(FollowError::Config(format!(
                        "the providers serve different chains: {name} chain {chain}, {} chain {id}",
                        endpoint.name
                    )))
                }
                Some(_) => {}
                None => first = Some((id, endpoint.name.clone())),
            }
        }
        match first {
            Some((id, _)) => Ok(id),
            None => self
                .attempt("eth_chainId", Purpose::Any, |i| async move {
                    let p = &self.shared.endpoints[i].provider;
                    p.get_chain_id().await.map_err(|e| classify(&e))
                })
                .await
                .map(|(id, _)| id)
                .map_err(|f| self.error("eth_chainId", f)),
        }
    }

    /// `eth_blockNumber` of the preferred provider.
    ///
    /// # Errors
    /// Every provider is unavailable.
    pub async fn head(&self) -> Result<u64, FollowError> {
        self.attempt("eth_blockNumber", Purpose::Any, |i| async move {
            let p = &self.shared.endpoints[i].provider;
            p.get_block_number().await.map_err(|e| classify(&e))
        })
        .await
        .map(|(n, _)| n)
        .map_err(|f| self.error("eth_blockNumber", f))
    }

    /// One provider's hash and parent hash of block `number`, in one request.
    async fn header_from(&self, i: usize, number: u64) -> Result<Option<(B256, B256)>, Failure> {
        let p = &self.shared.endpoints[i].provider;
        let block = p
            .get_block_by_number(BlockNumberOrTag::Number(number))
            .into_future()
            .await
            .map_err(|e| classify(&e))?;
        Ok(block.map(|b| (b.header.hash, b.header.inner.parent_hash)))
    }

    /// The hash and parent hash of block `number` (agreed by the quorum), `None` when the node
    /// has no such block.
    ///
    /// # Errors
    /// The providers are unavailable or do not agree.
    pub async fn header(&self, number: u64) -> Result<Option<(B256, B256)>, FollowError> {
        self.agreed(
            "eth_getBlockByNumber",
            &format!("the hash of block {number}"),
            |i| self.header_from(i, number),
        )
        .await
        .map_err(|f| self.error("eth_getBlockByNumber", f))
    }

    /// Block `number` as the node has it now, to pin views at.
    ///
    /// # Errors
    /// As [`header`](Self::header); [`FollowError::ReorgInProgress`] when the node has no such
    /// block.
    pub async fn block(&self, number: u64) -> Result<BlockRef, FollowError> {
        match self.header(number).await? {
            Some((hash, _)) => Ok(BlockRef { number, hash }),
            None => Err(FollowError::ReorgInProgress { block: number }),
        }
    }

    /// Sends a JSON-RPC request as it is (`method`, `params`) to the providers and returns the
    /// node's answer as it is: its `result`, or its error object (`code`, `message`, `data`),
    /// which is an answer to pass on, not a failure to retry. Transport failures (a provider
    /// down, HTTP 429/5xx, a malformed body) fail over and back off as every call does.
    ///
    /// # Errors
    /// Every provider failed ([`FollowError::Unavailable`]).
    pub async fn forward(
        &self,
        method: &str,
        params: &serde_json::value::RawValue,
    ) -> Result<Result<Box<serde_json::value::RawValue>, ErrorAnswer>, FollowError> {
        let method_owned = method.to_owned();
        let name = metrics::forwarded_method(method);
        self.attempt(name, Purpose::Any, |i| {
            let method = method_owned.clone();
            async move {
                let p = &self.shared.endpoints[i].provider;
                match p.raw_request_dyn(method.into(), params).await {
                    Ok(result) => Ok(Ok(result)),
                    Err(RpcError::ErrorResp(payload)) => Ok(Err(ErrorAnswer {
                        code: payload.code,
                        message: payload.message.into_owned(),
                        data: payload.data,
                    })),
                    Err(e) => match classify(&e) {
                        Failure::Permanent {
                            code: None,
                            message,
                        } => Err(Failure::Transient(message)),
                        failure => Err(failure),
                    },
                }
            }
        })
        .await
        .map(|(answer, _)| answer)
        .map_err(|f| self.error(name, f))
    }

    /// The contract's logs with these `topics` in blocks `from..=to`.
    ///
    /// # Errors
    /// [`RangeError::TooLarge`] when the node asks for a smaller range.
    pub async fn logs(&self, from: u64, to: u64, topics: &[B256]) -> Result<Vec<Log>, RangeError> {
        let filter = Filter::new()
            .address(self.shared.contract)
            .event_signature(topics.to_vec())
            .from_block(from)
            .to_block(to);
        let filter = &filter;
        match self
            .attempt("eth_getLogs", Purpose::Data, |i| async move {
                let p = &self.shared.endpoints[i].provider;
                p.get_logs(filter).await.map_err(|e| classify(&e))
            })
            .await
        {
            Ok((logs, _)) => Ok(logs),
            Err((Failure::TooLarge(_), _)) => Err(RangeError::TooLarge),
            Err(other) => Err(RangeError::Failed(self.error("eth_getLogs", other))),
        }
    }

    /// One provider's `eth_call` of `call` at `at`, decoded.
    async fn call_from<C: SolCall>(
        &self,
        i: usize,
        call: &C,
        at: BlockId,
    ) -> Result<C::Return, Failure> {
        let request = TransactionRequest::default()
            .to(self.shared.contract)
            .input(alloy::rpc::types::TransactionInput::new(Bytes::from(
                call.abi_encode(),
            )));
        let p = &self.shared.endpoints[i].provider;
        let bytes = p
            .call(request)
            .block(at)
            .into_future()
            .await
            .map_err(|e| classify(&e))?;
        C::abi_decode_returns_validate(&bytes).map_err(|e| Failure::Permanent {
            code: None,
            message: format!(
                "undecodable {} result: {e} (is {} the membership contract?)",
                C::SIGNATURE,
                self.shared.contract
            ),
        })
    }

    /// A view at `at` (any block id, not pinned), from the preferred provider.
    async fn view<C: SolCall>(&self, call: C, at: BlockId) -> Result<C::Return, FollowError> {
        let call = &call;
        self.attempt("eth_call", Purpose::Any, |i| self.call_from(i, call, at))
            .await
            .map(|(value, _)| value)
            .map_err(|f| self.error("eth_call", f))
    }

    /// Fails with [`Failure::Reorged`] unless provider `i` still has `block` at its number.
    async fn still_there(&self, i: usize, block: BlockRef) -> Result<(), Failure> {
        match self.header_from(i, block.number).await? {
            Some((hash, _)) if hash == block.hash => Ok(()),
            _ => Err(Failure::Reorged),
        }
    }

    /// One provider's `eth_call` of `call` in exactly `block`'s state: by hash (EIP-1898,
    /// `requireCanonical`), or — on a node that refuses that form — by number with the hash
    /// checked before and after the call, so a reorg between them is seen.
    async fn pinned_from<C: SolCall>(
        &self,
        i: usize,
        call: &C,
        block: BlockRef,
    ) -> Result<C::Return, Failure> {
        let endpoint = &self.shared.endpoints[i];
        if endpoint.eip1898() {
            let at = BlockId::Hash(RpcBlockHash::from_hash(block.hash, Some(true)));
            match self.call_from(i, call, at).await {
                Ok(value) => return Ok(value),
                Err(failure) if failure.is_malformed_request() => {
                    endpoint.no_eip1898(&failure.message());
                }
                Err(Failure::Transient(message)) => {
                    // A node answers a hash it no longer has with some error; tell a reorg
                    // from a bad moment.
                    self.still_there(i, block).await?;
                    return Err(Failure::Transient(message));
                }
                Err(failure) => return Err(failure),
            }
        }
        self.still_there(i, block).await?;
        let value = self
            .call_from(i, call, BlockId::Number(block.number.into()))
            .await?;
        self.still_there(i, block).await?;
        Ok(value)
    }

    /// A view at `block`, from the preferred provider (`Purpose::Data`: remembered as a source).
    async fn pinned<C: SolCall>(
        &self,
        call: C,
        block: BlockRef,
        purpose: Purpose,
    ) -> Result<C::Return, (Failure, usize)> {
        let call = &call;
        self.attempt("eth_call", purpose, |i| self.pinned_from(i, call, block))
            .await
            .map(|(v, _)| v)
    }

    fn pinned_error(&self, block: BlockRef, failure: (Failure, usize)) -> FollowError {
        match failure {
            (Failure::Reorged, _) => FollowError::ReorgInProgress {
                block: block.number,
            },
            other => self.error("eth_call", other),
        }
    }

    /// `root()` in `block`'s state, agreed by the quorum.
    ///
    /// # Errors
    /// Unavailable or disagreeing providers, a refused call, a non-canonical root,
    /// [`FollowError::ReorgInProgress`] when the block left the chain.
    pub async fn root_at(&self, block: BlockRef) -> Result<Fr, FollowError> {
        let call = &IMembershipSet::rootCall {};
        let root = self
            .agreed(
                "eth_call",
                &format!("root() at block {}", block.number),
                |i| async move { self.pinned_from(i, call, block).await.map(Some) },
            )
            .await
            .map_err(|f| self.pinned_error(block, f))?
            .ok_or(FollowError::ReorgInProgress {
                block: block.number,
            })?;
        canonical(root, "root()").map_err(|reason| FollowError::BadData {
            block: block.number,
            reason,
        })
    }

    /// `root()` at `at` (any block id; the preferred provider), for callers that check by hand.
    ///
    /// # Errors
    /// Unavailable node, refused call, a non-canonical root.
    pub async fn root(&self, at: BlockId) -> Result<Fr, FollowError> {
        let root = self.view(IMembershipSet::rootCall {}, at).await?;
        canonical(root, "root()").map_err(|reason| FollowError::Refused {
            method: "eth_call",
            provider: self.names(),
            message: reason,
        })
    }

    /// `nextFreeIndex()` in `block`'s state.
    ///
    /// # Errors
    /// Unavailable node, refused call, the block left the chain.
    pub async fn next_free_index(&self, block: BlockRef) -> Result<u64, FollowError> {
        let n = self
            .pinned(IMembershipSet::nextFreeIndexCall {}, block, Purpose::Data)
            .await
            .map_err(|f| self.pinned_error(block, f))?;
        Ok(u64::from(n))
    }

    /// Whether the contract keeps a root history at `block`: `HISTORY_SIZE()` answers (true)
    /// or reverts (false: a contract without one).
    ///
    /// # Errors
    /// Unavailable node, refused call, the block left the chain, a `HISTORY_SIZE` other than
    /// [`HISTORY_SIZE`](crate::roots::HISTORY_SIZE).
    pub async fn has_root_history(&self, block: BlockRef) -> Result<bool, FollowError> {
        let size = match self
            .pinned(IMembershipSet::HISTORY_SIZECall {}, block, Purpose::Any)
            .await
        {
            Ok(size) => size,
            Err((failure, _)) if failure.is_revert() => return Ok(false),
            Err(other) => return Err(self.pinned_error(block, other)),
        };
        if usize::from(size) != crate::roots::HISTORY_SIZE {
            return Err(FollowError::Refused {
                method: "eth_call",
                provider: self.names(),
                message: format!(
                    "HISTORY_SIZE() is {size}; Canopy follows root histories of {}",
                    crate::roots::HISTORY_SIZE
                ),
            });
        }
        Ok(true)
    }

    /// The contract's root history at `block`, from `getRecentRoots()` (newest first,
    /// zero-padded); `None` when the call reverts (no history at that block yet).
    ///
    /// # Errors
    /// Unavailable node, refused call, the block left the chain, a non-canonical root.
    pub async fn recent_roots(&self, block: BlockRef) -> Result<Option<RootHistory>, FollowError> {
        let words = match self
            .pinned(IMembershipSet::getRecentRootsCall {}, block, Purpose::Any)
            .await
        {
            Ok(words) => words,
            Err((failure, _)) if failure.is_revert() => return Ok(None),
            Err(other) => return Err(self.pinned_error(block, other)),
        };
        let mut roots = [Fr::from(0u64); crate::roots::HISTORY_SIZE];
        for (slot, word) in roots.iter_mut().zip(words) {
            *slot = canonical(word, "getRecentRoots()").map_err(|reason| FollowError::BadData {
                block: block.number,
                reason,
            })?;
        }
        Ok(Some(RootHistory::from_recent_roots(&roots)))
    }

    /// `deployedBlockNumber()` (latest state).
    ///
    /// # Errors
    /// Unavailable node, refused call.
    pub async fn deployed_block(&self) -> Result<u64, FollowError> {
        let at = BlockId::Number(BlockNumberOrTag::Latest);
        let n = self
            .view(IMembershipSet::deployedBlockNumberCall {}, at)
            .await?;
        Ok(u64::from(n))
    }

    /// `getRateCommitmentsInRangeBoundsInclusive(start, end)` in `block`'s state: the leaves,
    /// raw.
    ///
    /// # Errors
    /// [`RangeError::TooLarge`] when the call fails for a page of more than one leaf (gas or
    /// response limits): the caller asks for less.
    pub async fn leaves(
        &self,
        start: u32,
        end: u32,
        block: BlockRef,
    ) -> Result<Vec<U256>, RangeError> {
        let call = IMembershipSet::getRateCommitmentsInRangeBoundsInclusiveCall {
            startIndex: start,
            endIndex: end,
        };
        match self.pinned(call, block, Purpose::Data).await {
            Ok(leaves) => Ok(leaves),
            Err((Failure::TooLarge(_) | Failure::Permanent { .. }, _)) if end > start => {
                Err(RangeError::TooLarge)
            }
            Err(other) => Err(RangeError::Failed(self.pinned_error(block, other))),
        }
    }

    /// `getMerkleProof(index)` at `at`: the sibling path, leaf level first.
    ///
    /// # Errors
    /// Unavailable node, refused call.
    pub async fn merkle_proof(&self, index: u64, at: BlockId) -> Result<Vec<U256>, FollowError> {
        let call = IMembershipSet::getMerkleProofCall {
            index: alloy::primitives::Uint::<40, 1>::from(index),
        };
        Ok(self.view(call, at).await?.to_vec())
    }

    /// The contract's `getMembershipInfo(id)` at `at`: (rate limit, index, rate commitment),
    /// zeros for a non-member.
    ///
    /// # Errors
    /// RPC failures after retries, a revert.
    pub async fn membership_info(
        &self,
        id: U256,
        at: BlockId,
    ) -> Result<(u32, u32, U256), FollowError> {
        let call = IMembershipSet::getMembershipInfoCall { idCommitment: id };
        let answer = self.view(call, at).await?;
        Ok((answer._0, answer._1, answer._2))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// https works through the ring provider: the client builds, and a TLS handshake with a
    /// server that is not speaking TLS fails as a transport error (no missing-provider panic).
    #[tokio::test]
    async fn https_goes_through_rustls_with_ring() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\n\r\nnot tls").await;
            }
        });
        let retry = RetryConfig {
            max_attempts: 1,
            ..RetryConfig::default()
        };
        let url = format!("https://127.0.0.1:{port}").parse().unwrap();
        let client = ChainClient::new(url, Address::ZERO, retry).unwrap();
        let e = client.head().await.unwrap_err();
        assert!(matches!(e, FollowError::Unavailable { .. }), "{e}");
    }
}
