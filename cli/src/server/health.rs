//! `GET /health`, `/ready` and `/metrics`: how the server and its sync are doing.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use tree_core::MerkleTree;

use super::{error, AppState};
use crate::ops::last_block;
use crate::telemetry::DB_SIZE_BYTES;

pub(super) async fn health(State(app): State<AppState>) -> Response {
    let (members, last) = app.tree.read(|t| (t.next_index(), last_block(t)));
    let health = app.status.health(app.config.max_lag_blocks, members, last);
    let code = if health.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(health.body)).into_response()
}

pub(super) async fn ready(State(app): State<AppState>) -> Response {
    let last = app.tree.read(last_block);
    if app.status.ready(last) {
        (
            StatusCode::OK,
            Json(json!({"ready": true, "last_block": last})),
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ready": false, "last_block": last})),
        )
            .into_response()
    }
}

pub(super) async fn metrics_text(State(app): State<AppState>) -> Response {
    let Some(handle) = &app.metrics else {
        return error(StatusCode::NOT_FOUND, "metrics are not enabled".into());
    };
    // sled's own account of its files; a failed read leaves the last value.
    if let Ok(bytes) = app.tree.read(|t| t.size_on_disk()) {
        #[allow(clippy::cast_precision_loss)]
        metrics::gauge!(DB_SIZE_BYTES).set(bytes as f64);
    }
    #[allow(clippy::cast_precision_loss)]
    metrics::gauge!(follower::metrics::MEMBERS).set(app.tree.read(MerkleTree::next_index) as f64);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        handle.render(),
    )
        .into_response()
}
