//! One provider of several: its alloy client, whether it takes EIP-1898 block-hash parameters,
//! and its health (requests, errors, latency, disagreements) for `/health` and `/metrics`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use alloy::providers::RootProvider;
use alloy::rpc::client::RpcClient;
use parking_lot::Mutex;
use serde::Serialize;

use crate::{metrics, FollowError};

/// A provider's health as `/health` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProviderHealth {
    /// The provider, as logged: scheme, host and port (paths and credentials often hold API
    /// keys, so they are left out).
    pub name: String,
    /// Requests sent to it.
    pub requests: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Failures since its last success: 0 means healthy.
    pub consecutive_errors: u64,
    /// Answers that differed from the agreed ones (a lying or broken provider).
    pub disagreements: u64,
    /// Moving average of its answer time, in milliseconds.
    pub latency_ms: f64,
    /// Whether it takes EIP-1898 `{blockHash}` parameters (else views are pinned by number
    /// with the block's hash checked around each call).
    pub eip1898: bool,
    /// Its last error or disagreement.
    pub last_error: Option<String>,
}

/// One provider.
#[derive(Debug)]
pub(crate) struct Provider {
    pub(crate) name: String,
    /// Its alloy client.
    pub(crate) alloy: RootProvider,
    /// The HTTP client and address under it, for forwarding with a cap on the answer's size.
    pub(crate) http: reqwest::Client,
    pub(crate) url: url::Url,
    eip1898: AtomicBool,
    requests: AtomicU64,
    errors: AtomicU64,
    consecutive_errors: AtomicU64,
    disagreements: AtomicU64,
    /// Moving average of the latency, in microseconds.
    latency_us: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Provider {
    /// A provider at `url`, its requests timing out after `timeout`.
    pub(crate) fn new(url: url::Url, timeout: Duration) -> Result<Self, FollowError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| FollowError::Internal(format!("HTTP client: {e}")))?;
        let name = display_name(&url);
        Ok(Self {
            name,
            alloy: RootProvider::new(RpcClient::new_http_with_client(http.clone(), url.clone())),
            http,
            url,
            eip1898: AtomicBool::new(true),
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            consecutive_errors: AtomicU64::new(0),
            disagreements: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
            last_error: Mutex::new(None),
        })
    }

    pub(crate) fn eip1898(&self) -> bool {
        self.eip1898.load(Ordering::Relaxed)
    }

    /// The provider refused a block-hash parameter: pin by number from now on.
    pub(crate) fn no_eip1898(&self, message: &str) {
        if self.eip1898.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                provider = %self.name,
                "the node refuses EIP-1898 block-hash parameters ({message}); views are called \
                 by block number with the block's hash checked before and after each call"
            );
        }
    }

    /// One answered or failed request that took `took`.
    pub(crate) fn record(&self, method: &'static str, took: Duration, error: Option<&str>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let old = self.latency_us.load(Ordering::Relaxed);
        let average = if old == 0 { us } else { (old * 7 + us) / 8 };
        self.latency_us.store(average, Ordering::Relaxed);
        metrics::provider_request(&self.name, method, took, error.is_some());
        match error {
            None => self.consecutive_errors.store(0, Ordering::Relaxed),
            Some(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.consecutive_errors.fetch_add(1, Ordering::Relaxed);
                *self.last_error.lock() = Some(format!("{method}: {e}"));
            }
        }
    }

    /// Its answer differed from the one the quorum agreed on.
    pub(crate) fn disagreed(&self, what: String) {
        self.disagreements.fetch_add(1, Ordering::Relaxed);
        metrics::provider_disagreement(&self.name);
        tracing::warn!(provider = %self.name, "provider disagrees with the quorum: {what}");
        *self.last_error.lock() = Some(format!("disagreed: {what}"));
    }

    pub(crate) fn health(&self) -> ProviderHealth {
        #[allow(clippy::cast_precision_loss)]
        let latency_ms = self.latency_us.load(Ordering::Relaxed) as f64 / 1000.0;
        ProviderHealth {
            name: self.name.clone(),
            requests: self.requests.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            consecutive_errors: self.consecutive_errors.load(Ordering::Relaxed),
            disagreements: self.disagreements.load(Ordering::Relaxed),
            latency_ms,
            eip1898: self.eip1898(),
            last_error: self.last_error.lock().clone(),
        }
    }
}

/// `scheme://host:port`, and `/…` when the URL has a path: provider URLs often carry an API
/// key in their path, query or user info, which must not reach logs or `/health`.
fn display_name(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("?");
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let rest = if url.path().len() > 1 || url.query().is_some() {
        "/…"
    } else {
        ""
    };
    format!("{}://{host}{port}{rest}", url.scheme())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_hide_keys() {
        let name = |u: &str| display_name(&u.parse().unwrap());
        assert_eq!(name("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
        assert_eq!(
            name("https://user:secret@mainnet.example/v3/KEY?x=1"),
            "https://mainnet.example/…"
        );
    }
}
