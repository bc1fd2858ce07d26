//! What a failed JSON-RPC call means for the caller: try again, ask for less, give up, or
//! re-read the chain. One rule for every call and every provider.

use alloy::transports::{RpcError, TransportErrorKind};

/// How a failed call is treated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The node or the network had a bad moment (connection refused or reset, timeout, HTTP
    /// 429/5xx, a rate-limit code such as `-32005`, a malformed or empty answer, "header not
    /// found" while a backend catches up): retry after a backoff, or ask another provider.
    Transient(String),
    /// Asking again cannot help: a parse error, an invalid request or invalid params, a method
    /// the node does not have, a revert, an HTTP status such as 401, 403 or 404.
    Permanent {
        /// The JSON-RPC error code, when the node gave one.
        code: Option<i64>,
        /// What the node said.
        message: String,
    },
    /// `eth_getLogs` or a paged view asked for too much at once: ask for less.
    TooLarge(String),
    /// The block the call was pinned to is no longer on the node's chain.
    Reorged,
}

/// JSON-RPC 2.0's own codes for a request the server cannot take as it is (parse error,
/// invalid request, method not found, invalid params), and hardhat's "method not supported".
const MALFORMED_REQUEST: [i64; 5] = [-32700, -32600, -32601, -32602, -32004];

/// Words with which nodes and providers say that a log range or a response is too large.
const TOO_LARGE: [&str; 6] = [
    "too many",
    "more than",
    "limit exceeded",
    "range",
    "response size",
    "too large",
];

impl Failure {
    /// The `kind` label of the failure in the metrics.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Transient(_) => "transient",
            Self::Permanent { .. } => "permanent",
            Self::TooLarge(_) => "too_large",
            Self::Reorged => "reorged",
        }
    }

    /// Whether the node refused the *form* of the request (not its content): a node without
    /// EIP-1898 block-hash parameters answers this way (ganache: `-32700`; others `-32602`).
    pub(crate) fn is_malformed_request(&self) -> bool {
        matches!(self, Self::Permanent { code: Some(code), .. } if MALFORMED_REQUEST.contains(code))
    }

    /// Whether the call reverted (a view that does not exist reverts too).
    pub(crate) fn is_revert(&self) -> bool {
        matches!(self, Self::Permanent { code, message }
            if *code == Some(3) || message.to_lowercase().contains("revert"))
    }

    /// The failure's text, for errors and logs.
    pub(crate) fn message(&self) -> String {
        match self {
            Self::Transient(m) | Self::TooLarge(m) | Self::Permanent { message: m, .. } => {
                m.clone()
            }
            Self::Reorged => "the block is no longer on the node's chain".into(),
        }
    }
}

/// Classifies an alloy error.
pub(crate) fn classify(error: &RpcError<TransportErrorKind>) -> Failure {
    match error {
        RpcError::ErrorResp(payload) => {
            let message = payload.message.to_lowercase();
            // A revert first: its reason may read like a size ("Out of range").
            let reverted = payload.code == 3 || message.contains("revert");
            if !reverted && TOO_LARGE.iter().any(|m| message.contains(m)) {
                Failure::TooLarge(payload.to_string())
            } else if reverted || MALFORMED_REQUEST.contains(&payload.code) {
                Failure::Permanent {
                    code: Some(payload.code),
                    message: payload.to_string(),
                }
            } else {
                // Rate limits (-32005), "header not found" while a node catches up, internal
                // errors (-32603), -32000 for nearly everything else: all worth another try.
                Failure::Transient(payload.to_string())
            }
        }
        RpcError::Transport(TransportErrorKind::HttpError(http)) => {
            if http.status == 429 || http.status == 408 || http.status >= 500 {
                Failure::Transient(error.to_string())
            } else {
                // 401/403 (a key the provider refuses), 404 (a wrong path), 405, 413, …
                Failure::Permanent {
                    code: None,
                    message: error.to_string(),
                }
            }
        }
        RpcError::UnsupportedFeature(_) | RpcError::LocalUsageError(_) | RpcError::SerError(_) => {
            Failure::Permanent {
                code: None,
                message: error.to_string(),
            }
        }
        // Connection refused or reset, timeouts, truncated or malformed JSON, null.
        _ => Failure::Transient(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use alloy::rpc::json_rpc::ErrorPayload;

    fn response(code: i64, message: &str) -> RpcError<TransportErrorKind> {
        RpcError::ErrorResp(ErrorPayload {
            code,
            message: message.to_owned().into(),
            data: None,
        })
    }

    #[test]
    fn errors_are_classified_by_kind() {
        let transient = [
            response(-32005, "project ID request rate exceeded"),
            response(-32000, "header not found"),
            response(-32603, "internal error"),
            TransportErrorKind::http_error(429, String::new()),
            TransportErrorKind::http_error(503, "busy".into()),
            RpcError::NullResp,
        ];
        for e in &transient {
            assert!(matches!(classify(e), Failure::Transient(_)), "{e}");
        }
        let permanent = [
            response(-32700, "Cannot wrap a \"object\" as a json-rpc type"),
            response(-32600, "invalid request"),
            response(-32601, "the method eth_foo does not exist"),
            response(-32602, "invalid argument 1"),
            response(3, "execution reverted: Out of range"),
            response(-32000, "execution reverted"),
            TransportErrorKind::http_error(401, "unauthorized".into()),
            TransportErrorKind::http_error(404, String::new()),
        ];
        for e in &permanent {
            assert!(matches!(classify(e), Failure::Permanent { .. }), "{e}");
        }
        assert!(classify(&permanent[0]).is_malformed_request());
        assert!(!classify(&permanent[4]).is_malformed_request());
        let too_large = response(-32005, "query returned more than 10000 results");
        assert!(matches!(classify(&too_large), Failure::TooLarge(_)));
    }
}
