//! `canopy serve`: a small HTTP JSON API for light clients over a shared tree, while the same
//! process applies new blocks from an events file or stdin.
//!
//! `GET /health`, `GET /root`, `GET /roots` (the acceptable window), `GET /proof/{index}` (the
//! Merkle witness in the RLN field order, hex, plus zerokit's byte encoding: each path element as
//! 32 bytes little-endian, concatenated). Bad requests get a 4xx with `{"error": ...}`.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hasher::{fr_to_le_bytes, PoseidonHasher};
use serde_json::{json, Value};
use tree_core::{History, MerkleTree};
use tree_sled::SharedTree;

use crate::events::{fr_hex, read_blocks_from};
use crate::ops::{apply_block_shared, last_block, not_a_member, open, repair_checkpoint};
use crate::{CliError, Output};

/// The tree the server reads.
pub type Shared = Arc<SharedTree<PoseidonHasher>>;

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

async fn health(State(tree): State<Shared>) -> Json<Value> {
    Json(
        tree.read(
            |t| json!({"ok": true, "next_index": t.next_index(), "last_block": last_block(t)}),
        ),
    )
}

async fn root(State(tree): State<Shared>) -> Json<Value> {
    Json(tree.read(|t| {
        json!({"root": fr_hex(&t.root()), "next_index": t.next_index(), "last_block": last_block(t)})
    }))
}

async fn roots(State(tree): State<Shared>) -> Response {
    match tree.read(|t| t.roots()) {
        Ok(roots) => {
            Json(json!({"roots": roots.iter().map(fr_hex).collect::<Vec<_>>()})).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn proof(State(tree): State<Shared>, Path(index): Path<String>) -> Response {
    let Ok(index) = index.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("{index:?} is not a member index"),
        );
    };
    // One read: the root and the proof come from the same state.
    let result = tree.read(|t| {
        match not_a_member(t, index) {
            Ok(Some(reason)) => return Err((StatusCode::NOT_FOUND, reason)),
            Ok(None) => {}
            Err(e) => return Err((StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        }
        let leaf = t
            .get(index)
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let proof = t
            .proof(index)
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        Ok((t.root(), leaf, proof))
    });
    match result {
        Ok((root, leaf, proof)) => {
            let zerokit: String = proof
                .path_elements()
                .iter()
                .flat_map(fr_to_le_bytes)
                .map(|b| format!("{b:02x}"))
                .collect();
            Json(json!({
                "index": index,
                "root": fr_hex(&root),
                "leaf": fr_hex(&leaf),
                "path_elements": proof.path_elements().iter().map(fr_hex).collect::<Vec<_>>(),
                "identity_path_index": proof.path_index(),
                "zerokit_path_elements_le": zerokit,
            }))
            .into_response()
        }
        Err((status, message)) => error(status, message),
    }
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "unknown path (try /health, /root, /roots, /proof/{index})".into(),
    )
}

/// Runs the server until the process is stopped.
///
/// # Errors
/// Opening the database, binding the address, a bad events stream (logged, the server keeps
/// serving the last good state).
pub fn run(
    db: &std::path::Path,
    listen: SocketAddr,
    events: Option<PathBuf>,
) -> Result<Output, CliError> {
    let mut tree = open(db)?;
    repair_checkpoint(&mut tree)?;
    let shared: Shared = Arc::new(SharedTree::new(tree));
    if let Some(events) = events {
        let writer = shared.clone();
        std::thread::spawn(move || {
            let result = (|| -> Result<usize, CliError> {
                let blocks = read_blocks_from(&events)?;
                let last = writer.read(last_block);
                let mut applied = 0;
                for block in blocks.iter().filter(|b| last.is_none_or(|l| b.number > l)) {
                    apply_block_shared(&writer, block)?;
                    applied += 1;
                }
                writer.read(|t| t.flush()).map_err(CliError::from)?;
                Ok(applied)
            })();
            match result {
                Ok(n) => eprintln!("applied {n} blocks"),
                Err(e) => eprintln!("error: {e}"),
            }
        });
    }
    let runtime = runtime(db)?;
    runtime.block_on(serve(listen, shared))
}

/// The tokio runtime of `serve` and `follow`.
///
/// # Errors
/// The runtime cannot start.
pub fn runtime(db: &std::path::Path) -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| CliError::Io {
            path: db.to_path_buf(),
            source,
        })
}

/// The HTTP API over `shared`.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/root", get(root))
        .route("/roots", get(roots))
        .route("/proof/{index}", get(proof))
        .fallback(not_found)
        .with_state(shared)
}

/// Binds `listen`, prints the address on stdout, serves until the process stops.
///
/// # Errors
/// Binding fails, the server stops.
pub async fn serve(listen: SocketAddr, shared: Shared) -> Result<Output, CliError> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    println!("listening on http://{bound}");
    let _ = std::io::stdout().flush();
    axum::serve(listener, router(shared))
        .await
        .map_err(|e| CliError::Usage(format!("server stopped: {e}")))?;
    Ok(Output {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
