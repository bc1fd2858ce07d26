//! The node, as the follower asks it: typed views and logs over alloy, from one provider or
//! several. One room per concept:
//! - `provider`: one upstream ([`ProviderHealth`] for `/health`);
//! - `failover`: one request, failed over between providers and retried with capped
//!   exponential backoff and jitter once every provider failed; permanent failures are not
//!   retried in a loop (one classification, in `failure`, the error kinds);
//! - `quorum`: block hashes and roots taken only when a quorum of providers agree, and which
//!   providers served the data a disowned root came from;
//! - `chain`: the chain id, the head, headers and logs;
//! - `views`: the contract's views, pinned to a block's hash (EIP-1898, or by number with the
//!   hash checked around the call where a node lacks it);
//! - `forward`: a client's JSON-RPC request passed to the node as it is.

mod chain;
mod failover;
mod failure;
mod forward;
mod provider;
mod quorum;
mod views;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::{Address, B256};
use alloy::providers::RootProvider;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

pub(crate) use failure::Failure;
pub use forward::{ErrorAnswer, ForwardPolicy};
use provider::Provider;
pub use provider::ProviderHealth;

use crate::FollowError;

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

/// A block by number and hash: views at it read exactly its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    /// Its number.
    pub number: u64,
    /// Its hash.
    pub hash: B256,
}

/// What every clone of a [`ChainClient`] shares: the providers, the failover and quorum state,
/// the settings and the counters.
#[derive(Debug)]
struct ClientState {
    providers: Vec<Provider>,
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
    shared: Arc<ClientState>,
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
        let providers = urls
            .into_iter()
            .map(|url| Provider::new(url, timeout))
            .collect::<Result<Vec<_>, _>>()?;
        let distrusted = providers.iter().map(|_| AtomicBool::new(false)).collect();
        Ok(Self {
            shared: Arc::new(ClientState {
                providers,
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
        &self.shared.providers[0].alloy
    }

    /// How many providers must agree on a block's hash and the contract's root.
    #[must_use]
    pub fn quorum(&self) -> usize {
        self.shared.quorum
    }

    /// Every provider's health, in the order given.
    #[must_use]
    pub fn providers(&self) -> Vec<ProviderHealth> {
        self.shared.providers.iter().map(Provider::health).collect()
    }

    pub(crate) fn names(&self) -> String {
        let names: Vec<&str> = self
            .shared
            .providers
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        names.join(", ")
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
