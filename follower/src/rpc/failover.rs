//! Failover: one request sent to one provider (its health and the counters kept), and a call
//! run until it succeeds: a transient failure fails over to the next provider at once, a round
//! in which every provider failed waits the backoff, a permanent one is tried once on each other
//! provider and then returned.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{ChainClient, Failure};
use crate::backoff::Backoff;
use crate::{metrics, FollowError};

/// Which providers a call may use first.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// Any: the preferred provider first.
    Any,
    /// Data the quorum does not vote on (logs, leaves): a provider whose data produced a root
    /// the quorum disowned is asked last, and the provider that answered is remembered.
    Data,
}

impl ChainClient {
    /// The provider a call of `purpose` starts with.
    pub(super) fn first(&self, purpose: Purpose) -> usize {
        let shared = &self.shared;
        let n = shared.providers.len();
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
    pub(super) async fn send<T, Fut>(
        &self,
        method: &'static str,
        i: usize,
        request: Fut,
    ) -> Result<T, Failure>
    where
        Fut: Future<Output = Result<T, Failure>>,
    {
        let provider = &self.shared.providers[i];
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
            Ok(_) => provider.record(method, took, None),
            Err(failure) => {
                metrics::rpc_error(method, failure.kind());
                if matches!(failure, Failure::Transient(_) | Failure::Permanent { .. }) {
                    provider.record(method, took, Some(&failure.message()));
                }
            }
        }
        result
    }

    /// Runs `op` (one request to the provider it is given) until it succeeds: a transient
    /// failure fails over to the next provider at once, and a round in which every provider
    /// failed waits the backoff; a permanent failure is tried once on each other provider (one
    /// may lack a method the others have), then returned. Returns the answer and who gave it.
    pub(super) async fn attempt<T, F, Fut>(
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
        let n = shared.providers.len();
        let mut backoff = Backoff::new(&shared.retry);
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
                            from = %shared.providers[i].name,
                            to = %shared.providers[next].name,
                            "RPC failed, failing over: {message}"
                        );
                    } else {
                        failed_in_round = 0;
                        let wait = backoff.next_wait_jittered();
                        tracing::warn!(
                            method,
                            attempt,
                            provider = %shared.providers[i].name,
                            backoff_ms = wait.as_millis(),
                            "RPC failed, retrying: {message}"
                        );
                        tokio::time::sleep(wait).await;
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

    pub(super) fn error(
        &self,
        method: &'static str,
        (failure, i): (Failure, usize),
    ) -> FollowError {
        let provider = self.shared.providers[i].name.clone();
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
}
