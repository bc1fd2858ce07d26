//! Forwarding: a client's JSON-RPC request sent as it is to the providers, and the node's
//! answer (a result, or its error object) passed back as it came. Its own policy, apart from
//! the follower's reads: a deadline inside the server's timeout, few attempts, no retry of what
//! asking again cannot fix, and no second send of a transaction that may have reached a node.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use alloy::rpc::json_rpc::{ErrorPayload, Response, ResponsePayload};
use alloy::transports::{RpcError, TransportErrorKind};
use serde::{Deserialize, Serialize};

use super::failure::classify;
use super::{ChainClient, Failure};
use crate::{metrics, FollowError};

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

/// How a client's request is forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ForwardPolicy {
    /// Time one request may take upstream, every attempt included, in milliseconds; past it the
    /// request answers an error of its own. Keep it below the server's request timeout, so a
    /// slow item of a batch costs that item only.
    pub deadline_ms: u64,
    /// Requests sent for one forwarded request, over all providers (a transient failure moves on
    /// to the next provider). `eth_sendRawTransaction` is sent again only when no connection
    /// could be made: a transaction that may have reached a node is not sent twice.
    pub max_attempts: u32,
    /// Largest answer taken from a node, in bytes: the body is read up to it, and a larger one
    /// is refused (an error in the request's slot) without being held whole.
    pub max_answer_bytes: usize,
}

impl Default for ForwardPolicy {
    /// 8 s (inside the server's default 10 s), 3 attempts, answers up to 16 MiB.
    fn default() -> Self {
        Self {
            deadline_ms: 8_000,
            max_attempts: 3,
            max_answer_bytes: 16 << 20,
        }
    }
}

/// Methods whose request must not reach a node twice.
const SEND_ONCE: [&str; 1] = ["eth_sendRawTransaction"];

/// Whether the request certainly reached no node: no connection could be made.
fn never_sent(error: &RpcError<TransportErrorKind>) -> bool {
    match error {
        RpcError::Transport(TransportErrorKind::Custom(e)) => e
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_connect),
        _ => false,
    }
}

/// Why a forwarded request got no answer.
enum Sent {
    /// As alloy's HTTP transport says it (so the one classification applies).
    Failed(RpcError<TransportErrorKind>),
    /// The answer's body passed the cap (bytes).
    TooLarge(usize),
}

/// One JSON-RPC request to `provider`, its answer read up to `cap` bytes: the node's result
/// or error object, raw.
async fn post(
    provider: &super::provider::Provider,
    method: &str,
    params: &serde_json::value::RawValue,
    cap: usize,
) -> Result<Result<Box<serde_json::value::RawValue>, ErrorPayload>, Sent> {
    let failed = |e: reqwest::Error| Sent::Failed(TransportErrorKind::custom(e));
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params});
    let mut response = provider
        .http
        .post(provider.url.clone())
        .json(&body)
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if response
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > cap))
    {
        return Err(Sent::TooLarge(cap));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if bytes.len() + chunk.len() > cap {
            return Err(Sent::TooLarge(cap));
        }
        bytes.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let body = String::from_utf8_lossy(&bytes).into_owned();
        return Err(Sent::Failed(TransportErrorKind::http_error(
            status.as_u16(),
            body,
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    let answer: Response<Box<serde_json::value::RawValue>> = serde_json::from_slice(&bytes)
        .map_err(|e| Sent::Failed(RpcError::deser_err(e, text.as_ref())))?;
    Ok(match answer.payload {
        ResponsePayload::Success(result) => Ok(result),
        ResponsePayload::Failure(payload) => Err(payload),
    })
}

impl ChainClient {
    /// Sends a JSON-RPC request as it is (`method`, `params`) to the providers and returns the
    /// node's answer as it is: its `result`, or its error object (`code`, `message`, `data`),
    /// which is an answer to pass on, not a failure to retry. A transient transport failure (a
    /// provider down, HTTP 429/5xx, a malformed body) moves on to the next provider, within
    /// `policy`; a permanent one (HTTP 401/403/413, …) is not retried.
    ///
    /// # Errors
    /// The providers failed, or the deadline passed ([`FollowError::Unavailable`]); a provider
    /// refused the request ([`FollowError::Refused`]).
    pub async fn forward(
        &self,
        method: &str,
        params: &serde_json::value::RawValue,
        policy: &ForwardPolicy,
    ) -> Result<Result<Box<serde_json::value::RawValue>, ErrorAnswer>, FollowError> {
        let name = metrics::forwarded_method(method);
        let providers = &self.shared.providers;
        let deadline = Instant::now() + Duration::from_millis(policy.deadline_ms);
        let send_once = SEND_ONCE.contains(&method);
        let first = self.first(super::failover::Purpose::Any);
        let mut last = String::from("no attempt");
        let mut attempts = 0;
        while attempts < policy.max_attempts.max(1) {
            let i = (first + attempts as usize) % providers.len();
            attempts += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let request = post(&providers[i], method, params, policy.max_answer_bytes);
            // Atomic only so that the future stays `Send`: one task reads and writes it.
            let unsent = AtomicBool::new(false);
            let sent = self.send(name, i, async {
                match tokio::time::timeout(left, request).await {
                    Err(_) => Err(Failure::Transient("the deadline passed".into())),
                    Ok(Ok(Ok(result))) => Ok(Ok(result)),
                    Ok(Ok(Err(payload))) => Ok(Err(ErrorAnswer {
                        code: payload.code,
                        message: payload.message.into_owned(),
                        data: payload.data,
                    })),
                    Ok(Err(Sent::Failed(e))) => {
                        unsent.store(never_sent(&e), Ordering::Relaxed);
                        Err(classify(&e))
                    }
                    Ok(Err(Sent::TooLarge(limit))) => Err(Failure::Permanent {
                        code: None,
                        message: format!("the node's answer is larger than {limit} bytes"),
                    }),
                }
            });
            match sent.await {
                Ok(answer) => {
                    self.shared.preferred.store(i, Ordering::Relaxed);
                    return Ok(answer);
                }
                Err(Failure::Transient(message)) => {
                    last = message;
                    let may_have_landed = send_once && !unsent.load(Ordering::Relaxed);
                    if may_have_landed || Instant::now() >= deadline {
                        break;
                    }
                }
                Err(failure) => return Err(self.error(name, (failure, i))),
            }
        }
        Err(FollowError::Unavailable {
            method: name,
            providers: self.names(),
            attempts,
            message: last,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use alloy::primitives::Address;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::rpc::RetryConfig;

    /// An upstream that answers every request after `delay` with HTTP `status` and `body`,
    /// counting the requests it read.
    async fn upstream(
        status: u16,
        body: &'static str,
        delay: Duration,
    ) -> (url::Url, Arc<AtomicU64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let count = Arc::new(AtomicU64::new(0));
        let seen = count.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    // Headers, then the body its Content-Length announces.
                    loop {
                        let Ok(n) = socket.read(&mut buffer).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        request.extend_from_slice(&buffer[..n]);
                        let text = String::from_utf8_lossy(&request).to_lowercase();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if request.len() >= end + 4 + length {
                                break;
                            }
                        }
                    }
                    seen.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(delay).await;
                    let answer = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        (url, count)
    }

    fn client(urls: Vec<url::Url>) -> ChainClient {
        let retry = RetryConfig {
            initial_backoff_ms: 1,
            ..RetryConfig::default()
        };
        ChainClient::with_providers(urls, Address::ZERO, retry, 1).unwrap()
    }

    fn params() -> Box<serde_json::value::RawValue> {
        serde_json::value::RawValue::from_string("[\"0x00\"]".into()).unwrap()
    }

    /// HTTP 401, 403 and 413 are answers about the request or the key, not bad moments: sent
    /// once, never retried.
    #[tokio::test]
    async fn permanent_refusals_are_not_retried() {
        for status in [401, 403, 413] {
            let (url, count) = upstream(status, "{}", Duration::ZERO).await;
            let answer = client(vec![url])
                .forward("eth_getBalance", &params(), &ForwardPolicy::default())
                .await;
            assert!(
                matches!(answer, Err(FollowError::Refused { .. })),
                "{status}: {answer:?}"
            );
            assert_eq!(count.load(Ordering::Relaxed), 1, "{status}");
        }
    }

    /// The node's own error object is the answer, passed on unchanged and not retried.
    #[tokio::test]
    async fn upstream_errors_pass_through() {
        let body = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"nonce too low","data":"0x01"}}"#;
        let (url, count) = upstream(200, body, Duration::ZERO).await;
        let answer = client(vec![url])
            .forward(
                "eth_sendRawTransaction",
                &params(),
                &ForwardPolicy::default(),
            )
            .await
            .unwrap();
        let error = answer.unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (-32000, "nonce too low")
        );
        assert_eq!(
            error.data.map(|d| d.get().to_owned()).as_deref(),
            Some("\"0x01\"")
        );
        assert_eq!(count.load(Ordering::Relaxed), 1);
    }

    /// A slow upstream costs the deadline, not the server's timeout; a transaction that may
    /// have reached a node is not sent again, while a read moves on to the next provider.
    #[tokio::test]
    async fn the_deadline_holds_and_a_transaction_is_sent_once() {
        let policy = ForwardPolicy {
            deadline_ms: 300,
            max_attempts: 3,
            ..ForwardPolicy::default()
        };
        let (slow, slow_count) = upstream(200, "{}", Duration::from_secs(5)).await;
        let started = Instant::now();
        let answer = client(vec![slow.clone()])
            .forward("eth_getBalance", &params(), &policy)
            .await;
        assert!(
            matches!(answer, Err(FollowError::Unavailable { .. })),
            "{answer:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );

        let ok = r#"{"jsonrpc":"2.0","id":0,"result":"0x1"}"#;
        let (fast, fast_count) = upstream(200, ok, Duration::ZERO).await;
        let policy = ForwardPolicy {
            deadline_ms: 2_000,
            max_attempts: 3,
            ..ForwardPolicy::default()
        };
        // A timed-out attempt may have reached the node: a transaction stops there...
        let before = slow_count.load(Ordering::Relaxed);
        let short = ForwardPolicy {
            deadline_ms: 300,
            ..policy
        };
        let sent = client(vec![slow.clone(), fast.clone()])
            .forward("eth_sendRawTransaction", &params(), &short)
            .await;
        assert!(sent.is_err(), "{sent:?}");
        assert_eq!(slow_count.load(Ordering::Relaxed), before + 1);
        assert_eq!(fast_count.load(Ordering::Relaxed), 0);
        // ...while a refused connection reached no node: the next provider gets it.
        let dead: url::Url = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", listener.local_addr().unwrap())
                .parse()
                .unwrap()
        };
        let sent = client(vec![dead, fast.clone()])
            .forward("eth_sendRawTransaction", &params(), &policy)
            .await
            .unwrap();
        assert_eq!(sent.unwrap().get(), "\"0x1\"");
        assert_eq!(fast_count.load(Ordering::Relaxed), 1);
    }

    /// An answer past the cap is refused, whether its length is announced or not, and not
    /// asked again (another provider would send the same); one within it passes unchanged.
    #[tokio::test]
    async fn answers_past_the_cap_are_refused() {
        let big = r#"{"jsonrpc":"2.0","id":0,"result":"0x00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"}"#;
        let (url, count) = upstream(200, big, Duration::ZERO).await;
        let capped = ForwardPolicy {
            max_answer_bytes: 64,
            ..ForwardPolicy::default()
        };
        let answer = client(vec![url.clone()])
            .forward("eth_call", &params(), &capped)
            .await;
        match answer {
            Err(FollowError::Refused { message, .. }) => {
                assert!(message.contains("larger than 64 bytes"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(count.load(Ordering::Relaxed), 1);
        let roomy = ForwardPolicy {
            max_answer_bytes: big.len(),
            ..ForwardPolicy::default()
        };
        let answer = client(vec![url])
            .forward("eth_call", &params(), &roomy)
            .await
            .unwrap()
            .unwrap();
        assert!(answer.get().starts_with("\"0x0011"));
    }
}
