//! The tree's routes: `GET /root`, `/roots` (the roots a proof may be made against),
//! `/proof/{index}` and `/member/{id}`; each answer read from one state of the tree.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hasher::fr_to_le_bytes;
use serde_json::{json, Value};
use tree_core::{History, MerkleTree};

use super::{error, AppState};
use crate::events::fr_hex;
use crate::ops::{self, last_block, not_a_member};

pub(super) async fn root(State(app): State<AppState>) -> Json<Value> {
    let tree = &app.tree;
    Json(tree.read(|t| {
        json!({"root": fr_hex(&t.root()), "next_index": t.next_index(), "last_block": last_block(t)})
    }))
}

/// The roots a proof may be made against: the tree's window (one root per retained block) and,
/// for a contract with a root history, the roots it keeps (one per tree-changing call), so every
/// root a verifier seeded from `getRecentRoots()` accepts is accepted here too.
pub(super) fn acceptable_roots(
    tree: &ops::Tree,
) -> Result<Vec<hasher::Fr>, tree_engines::DbTreeError> {
    let mut roots = tree.roots()?;
    let history = follower::read_block(tree)
        .ok()
        .flatten()
        .and_then(|meta| meta.roots);
    for root in history.iter().flat_map(|h| h.roots()) {
        if !roots.contains(root) {
            roots.push(*root);
        }
    }
    Ok(roots)
}

pub(super) async fn roots(State(app): State<AppState>) -> Response {
    match app.tree.read(acceptable_roots) {
        Ok(roots) => {
            Json(json!({"roots": roots.iter().map(fr_hex).collect::<Vec<_>>()})).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

pub(super) async fn proof(State(app): State<AppState>, Path(index): Path<String>) -> Response {
    let Ok(index) = index.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("{index:?} is not a member index"),
        );
    };
    // One read: the root and the proof come from the same state.
    match app.tree.read(|t| proof_json(t, index)) {
        Ok(body) => Json(body).into_response(),
        Err((status, message)) => error(status, message),
    }
}

/// The proof of member `index` with the root and leaf it holds for, as `/proof` and `/member`
/// answer it.
fn proof_json(t: &ops::Tree, index: u64) -> Result<Value, (StatusCode, String)> {
    let internal = |e: &dyn std::fmt::Display| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    match not_a_member(t, index) {
        Ok(Some(reason)) => return Err((StatusCode::NOT_FOUND, reason)),
        Ok(None) => {}
        Err(e) => return Err(internal(&e)),
    }
    let leaf = t.get(index).map_err(|e| internal(&e))?;
    let proof = t.proof(index).map_err(|e| internal(&e))?;
    let zerokit: String = proof
        .path_elements()
        .iter()
        .flat_map(fr_to_le_bytes)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(json!({
        "index": index,
        "root": fr_hex(&t.root()),
        "leaf": fr_hex(&leaf),
        "path_elements": proof.path_elements().iter().map(fr_hex).collect::<Vec<_>>(),
        "identity_path_index": proof.path_index(),
        "zerokit_path_elements_le": zerokit,
    }))
}

/// `GET /member/{id}`: for a client that knows its id commitment (decimal or `0x` hex), not
/// its index: the member's index, rate limit and proof, from the member index; 404 for a
/// non-member, 503 while the index is not complete (being built after a state sync, or a
/// contract whose events carry no rate limit).
pub(super) async fn member(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let parsed = id
        .parse::<alloy::primitives::U256>()
        .ok()
        .and_then(|word| follower::profile::canonical(word, "id").ok());
    let Some(fr) = parsed else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("{id:?} is not an id commitment (a field element, decimal or 0x hex)"),
        );
    };
    let result = app.tree.read(|t| {
        let internal = |e: &dyn std::fmt::Display| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
        let meta = follower::read_block(t).map_err(|e| internal(&e))?;
        if meta.and_then(|m| m.members_from).is_none() {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "the member index is not complete (being built from the contract's logs, or not kept for this contract)".to_owned(),
            ));
        }
        let (rate_limit, index, _) =
            follower::membership_info(t, &fr).map_err(|e| internal(&e))?;
        if rate_limit == 0 {
            return Err((StatusCode::NOT_FOUND, format!("{} is not a member", fr_hex(&fr))));
        }
        let mut body = proof_json(t, u64::from(index))?;
        body["id_commitment"] = json!(fr_hex(&fr));
        body["rate_limit"] = json!(rate_limit);
        body["last_block"] = json!(last_block(t));
        Ok(body)
    });
    match result {
        Ok(body) => Json(body).into_response(),
        Err((status, message)) => error(status, message),
    }
}
