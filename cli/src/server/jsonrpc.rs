//! `POST /`: the Ethereum JSON-RPC endpoint, where `canopy follow --serve` serves one.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::{error, AppState};

/// `POST /`: Ethereum JSON-RPC 2.0, one request or a batch ([`eth_endpoint`]); 204 when every
/// request was a notification.
pub(super) async fn jsonrpc(State(app): State<AppState>, body: axum::body::Bytes) -> Response {
    let Some(endpoint) = app.jsonrpc.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no JSON-RPC endpoint: it is served by `canopy follow --serve`".into(),
        );
    };
    match endpoint.handle(&body).await {
        Some(answer) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            answer,
        )
            .into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}
