//! The node, as the follower asks it: typed views and logs over alloy, each call retried with
//! capped exponential backoff and jitter when the failure is transient.

use std::future::{Future, IntoFuture};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::{BlockId, BlockNumberOrTag, RpcBlockHash};
use alloy::primitives::{Address, Bytes, B256, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::client::RpcClient;
use alloy::rpc::types::{Filter, Log, TransactionRequest};
use alloy::sol_types::SolCall;
use alloy::transports::{RpcError, TransportErrorKind};
use hasher::Fr;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::profile::{canonical, IMembershipSet};
use crate::{metrics, FollowError};

/// How failed calls are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// First backoff, in milliseconds; doubled after each failure.
    pub initial_backoff_ms: u64,
    /// Backoff cap, in milliseconds.
    pub max_backoff_ms: u64,
    /// Attempts per call before [`FollowError::Unavailable`].
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

/// How a failed call is treated.
enum Failure {
    /// Retry after a backoff.
    Transient(String),
    /// Retrying cannot help.
    Refused(String),
    /// `eth_getLogs` asked for too much at once: ask for less.
    TooLarge(String),
}

impl Failure {
    /// The `kind` label of the failure in the metrics.
    fn kind(&self) -> &'static str {
        match self {
            Self::Transient(_) => "transient",
            Self::Refused(_) => "refused",
            Self::TooLarge(_) => "too_large",
        }
    }
}

fn classify(error: &RpcError<TransportErrorKind>) -> Failure {
    match error {
        RpcError::ErrorResp(payload) => {
            let message = payload.message.to_lowercase();
            let too_large = [
                "too many",
                "more than",
                "limit exceeded",
                "range",
                "response size",
                "too large",
            ];
            if too_large.iter().any(|m| message.contains(m)) {
                Failure::TooLarge(payload.to_string())
            } else if payload.code == 3 || message.contains("revert") {
                Failure::Refused(payload.to_string())
            } else {
                // Rate limits (-32005), "header not found" while a node catches up, internal
                // errors: all worth another try.
                Failure::Transient(payload.to_string())
            }
        }
        RpcError::UnsupportedFeature(_) | RpcError::LocalUsageError(_) | RpcError::SerError(_) => {
            Failure::Refused(error.to_string())
        }
        // Connection refused or reset, timeouts, HTTP 5xx/429, truncated or malformed JSON, null.
        _ => Failure::Transient(error.to_string()),
    }
}

/// What a page or range request could not do.
#[derive(Debug)]
pub enum RangeError {
    /// Ask for a smaller range.
    TooLarge,
    /// Any other failure.
    Failed(FollowError),
}

/// A node and a contract on it.
#[derive(Clone, Debug)]
pub struct ChainClient {
    provider: RootProvider,
    contract: Address,
    retry: RetryConfig,
    counters: Arc<RpcCounters>,
}

impl ChainClient {
    /// A client of the node at `url` (http or https) for `contract`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(url: url::Url, contract: Address, retry: RetryConfig) -> Result<Self, FollowError> {
        // TLS through rustls with ring; a provider installed earlier by the embedding process
        // stays (then this returns an error, ignored).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(retry.request_timeout_ms))
            .build()
            .map_err(|e| FollowError::Internal(format!("HTTP client: {e}")))?;
        let provider = RootProvider::new(RpcClient::new_http_with_client(http, url));
        Ok(Self {
            provider,
            contract,
            retry,
            counters: Arc::default(),
        })
    }

    /// The contract followed.
    #[must_use]
    pub fn contract(&self) -> Address {
        self.contract
    }

    /// The call counters.
    #[must_use]
    pub fn counters(&self) -> Arc<RpcCounters> {
        self.counters.clone()
    }

    /// The alloy provider underneath (for callers that need more than the follower's views).
    #[must_use]
    pub fn provider(&self) -> &RootProvider {
        &self.provider
    }

    async fn attempt<T, F, Fut>(&self, method: &'static str, mut call: F) -> Result<T, Failure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RpcError<TransportErrorKind>>>,
    {
        let mut backoff = self.retry.initial_backoff_ms.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            metrics::rpc_request(method);
            let started = Instant::now();
            let result = call().await;
            let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.counters.wait_us.fetch_add(waited, Ordering::Relaxed);
            let failure = match result {
                Ok(value) => return Ok(value),
                Err(e) => classify(&e),
            };
            metrics::rpc_error(method, failure.kind());
            let Failure::Transient(message) = failure else {
                return Err(failure);
            };
            if attempt >= self.retry.max_attempts {
                return Err(Failure::Transient(format!(
                    "{message} (after {attempt} attempts)"
                )));
            }
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            metrics::rpc_retry(method);
            let jitter = rand::thread_rng().gen_range(0..=backoff / 2);
            tracing::warn!(
                method,
                attempt,
                backoff_ms = backoff + jitter,
                "RPC failed, retrying: {message}"
            );
            tokio::time::sleep(Duration::from_millis(backoff + jitter)).await;
            backoff = (backoff * 2).min(self.retry.max_backoff_ms.max(1));
        }
    }

    async fn retried<T, F, Fut>(&self, method: &'static str, call: F) -> Result<T, FollowError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, RpcError<TransportErrorKind>>>,
    {
        self.attempt(method, call)
            .await
            .map_err(|failure| failure_error(method, self.retry.max_attempts, failure))
    }

    /// `eth_chainId`.
    ///
    /// # Errors
    /// The node is unavailable.
    pub async fn chain_id(&self) -> Result<u64, FollowError> {
        self.retried("eth_chainId", || self.provider.get_chain_id())
            .await
    }

    /// `eth_blockNumber`.
    ///
    /// # Errors
    /// The node is unavailable.
    pub async fn head(&self) -> Result<u64, FollowError> {
        self.retried("eth_blockNumber", || self.provider.get_block_number())
            .await
    }

    /// The hash and parent hash of block `number`, `None` when the node has no such block.
    ///
    /// # Errors
    /// The node is unavailable.
    pub async fn header(&self, number: u64) -> Result<Option<(B256, B256)>, FollowError> {
        let block = self
            .retried("eth_getBlockByNumber", || {
                self.provider
                    .get_block_by_number(BlockNumberOrTag::Number(number))
                    .into_future()
            })
            .await?;
        Ok(block.map(|b| (b.header.hash, b.header.inner.parent_hash)))
    }

    /// The contract's logs with these `topics` in blocks `from..=to`.
    ///
    /// # Errors
    /// [`RangeError::TooLarge`] when the node asks for a smaller range.
    pub async fn logs(&self, from: u64, to: u64, topics: &[B256]) -> Result<Vec<Log>, RangeError> {
        let filter = Filter::new()
            .address(self.contract)
            .event_signature(topics.to_vec())
            .from_block(from)
            .to_block(to);
        match self
            .attempt("eth_getLogs", || self.provider.get_logs(&filter))
            .await
        {
            Ok(logs) => Ok(logs),
            Err(Failure::TooLarge(_)) => Err(RangeError::TooLarge),
            Err(other) => Err(RangeError::Failed(failure_error(
                "eth_getLogs",
                self.retry.max_attempts,
                other,
            ))),
        }
    }

    async fn view<C: SolCall>(&self, call: C, at: BlockId) -> Result<C::Return, Failure> {
        let request = TransactionRequest::default().to(self.contract).input(
            alloy::rpc::types::TransactionInput::new(Bytes::from(call.abi_encode())),
        );
        let bytes = self
            .attempt("eth_call", || {
                self.provider.call(request.clone()).block(at).into_future()
            })
            .await?;
        C::abi_decode_returns_validate(&bytes)
            .map_err(|e| Failure::Refused(format!("undecodable eth_call result: {e}")))
    }

    async fn view_or_error<C: SolCall>(
        &self,
        call: C,
        at: BlockId,
    ) -> Result<C::Return, FollowError> {
        self.view(call, at)
            .await
            .map_err(|f| failure_error("eth_call", self.retry.max_attempts, f))
    }

    /// `root()` at `at`, as a field element.
    ///
    /// # Errors
    /// Unavailable node, refused call, a non-canonical root.
    pub async fn root(&self, at: BlockId) -> Result<Fr, FollowError> {
        let root = self.view_or_error(IMembershipSet::rootCall {}, at).await?;
        canonical(root, "root()").map_err(|reason| FollowError::Refused {
            method: "eth_call",
            message: reason,
        })
    }

    /// `nextFreeIndex()` at `at`.
    ///
    /// # Errors
    /// Unavailable node, refused call.
    pub async fn next_free_index(&self, at: BlockId) -> Result<u64, FollowError> {
        let n = self
            .view_or_error(IMembershipSet::nextFreeIndexCall {}, at)
            .await?;
        Ok(u64::from(n))
    }

    /// `deployedBlockNumber()` (latest state).
    ///
    /// # Errors
    /// Unavailable node, refused call.
    pub async fn deployed_block(&self) -> Result<u64, FollowError> {
        let n = self
            .view_or_error(
                IMembershipSet::deployedBlockNumberCall {},
                BlockId::Number(BlockNumberOrTag::Latest),
            )
            .await?;
        Ok(u64::from(n))
    }

    /// `getRateCommitmentsInRangeBoundsInclusive(start, end)` at `at`: the leaves, raw.
    ///
    /// # Errors
    /// [`RangeError::TooLarge`] when the call fails for a page of more than one leaf (gas or
    /// response limits): the caller asks for less.
    pub async fn leaves(&self, start: u32, end: u32, at: BlockId) -> Result<Vec<U256>, RangeError> {
        let call = IMembershipSet::getRateCommitmentsInRangeBoundsInclusiveCall {
            startIndex: start,
            endIndex: end,
        };
        match self.view(call, at).await {
            Ok(leaves) => Ok(leaves),
            Err(Failure::TooLarge(_) | Failure::Refused(_)) if end > start => {
                Err(RangeError::TooLarge)
            }
            Err(other) => Err(RangeError::Failed(failure_error(
                "eth_call",
                self.retry.max_attempts,
                other,
            ))),
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
        Ok(self.view_or_error(call, at).await?.to_vec())
    }
}

/// A view at exactly this block (EIP-1898, `requireCanonical`): a block reorged away is an error,
/// never another block's state.
#[must_use]
pub fn at_hash(hash: B256) -> BlockId {
    BlockId::Hash(RpcBlockHash::from_hash(hash, Some(true)))
}

fn failure_error(method: &'static str, attempts: u32, failure: Failure) -> FollowError {
    match failure {
        Failure::Transient(message) => FollowError::Unavailable {
            method,
            attempts,
            message,
        },
        Failure::Refused(message) | Failure::TooLarge(message) => {
            FollowError::Refused { method, message }
        }
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
