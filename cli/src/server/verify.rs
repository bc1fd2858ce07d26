//! `POST /verify`: one RLN proof or a batch, checked against the root window on the verifier
//! threads, a bounded number at once.

use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use rln_glue::verifier::Verdict;
use serde_json::{json, Value};

use super::tree::acceptable_roots;
use super::{error, AppState};
use crate::telemetry::HTTP_REJECTED;

/// `POST /verify`: one RLN proof (an object: `{"valid", "reason"?}` back) or a batch (an array of
/// at most `max_verify_batch` objects: one `{"verdict", "reason"?}` each, in order, and counts),
/// checked against the root window with one batch check. A malformed item is answered alone.
pub(super) async fn verify(
    State(app): State<AppState>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(body)) => body,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let (items, single) = match body {
        Value::Array(values) => {
            if values.len() > app.config.max_verify_batch {
                return error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "{} proofs in one request: at most {} (server.max_verify_batch)",
                        values.len(),
                        app.config.max_verify_batch
                    ),
                );
            }
            (
                values
                    .into_iter()
                    .map(crate::verify::parse_value)
                    .collect::<Vec<_>>(),
                false,
            )
        }
        // A single proof that does not parse is the request's fault: 400, as before batches.
        value => match crate::verify::parse_value(value) {
            Ok(item) => (vec![Ok(item)], true),
            Err(message) => return error(StatusCode::BAD_REQUEST, message),
        },
    };
    // Pairings take milliseconds of CPU: a bounded number run at once on low-priority threads.
    // The rest wait their turn a little and are then refused: waiting (an idle connection costs
    // nothing) rather than refusing at once is what keeps a flood's request rate down to the
    // verifier's pace, so it cannot crowd `/proof` out of the HTTP threads either.
    let wait = Duration::from_millis(app.config.verify_wait_ms);
    let acquired = tokio::time::timeout(wait, app.verify.permits.clone().acquire_owned()).await;
    let Ok(Ok(permit)) = acquired else {
        metrics::counter!(HTTP_REJECTED, "reason" => "verify_busy").increment(1);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            Json(json!({"error": "verifier busy: retry later"})),
        )
            .into_response();
    };
    let roots = match app.tree.read(acceptable_roots) {
        Ok(roots) => roots,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let pool = app.verify.clone();
    // The batch runs on the verifier threads: its Miller loops spread over them, no further.
    let result = app
        .verify
        .run(move || {
            let _permit = permit;
            let verifier = pool.verifier()?;
            Ok::<_, String>(crate::verify::verdicts(verifier, &items, &roots))
        })
        .await;
    let verdicts = match result {
        Ok(Ok(verdicts)) => verdicts,
        Ok(Err(message)) => return error(StatusCode::SERVICE_UNAVAILABLE, message),
        Err(message) => return error(StatusCode::INTERNAL_SERVER_ERROR, message),
    };
    if single {
        return match verdicts.first() {
            Some((Verdict::Valid, _)) => Json(json!({"valid": true})).into_response(),
            // A lone proof that does not decode is a bad request, as any unparsable field.
            Some((Verdict::Malformed, _)) => error(
                StatusCode::BAD_REQUEST,
                "malformed proof: not 128 bytes of canonical points on the curve, B in G2".into(),
            ),
            Some((verdict, _)) => {
                Json(json!({"valid": false, "reason": verdict.as_str()})).into_response()
            }
            None => error(StatusCode::INTERNAL_SERVER_ERROR, "no verdict".into()),
        };
    }
    Json(json!({
        "verdicts": verdicts.iter().map(|(v, r)| crate::verify::verdict_json(*v, r.as_deref())).collect::<Vec<_>>(),
        "counts": crate::verify::tally(&verdicts),
    }))
    .into_response()
}
