//! Forwarding: a client's JSON-RPC request sent as it is to the providers, and the node's
//! answer (a result, or its error object) passed back as it came.

use alloy::providers::Provider as _;
use alloy::transports::RpcError;

use super::failover::Purpose;
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

impl ChainClient {
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
                let p = &self.shared.providers[i].alloy;
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
}
