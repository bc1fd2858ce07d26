//! `canopy serve`: a small HTTP JSON API for light clients over a shared tree, while the same
//! process applies new blocks from an events file or stdin.
//!
//! `GET /health` (sync status; 503 while behind), `GET /ready`, `GET /metrics` (Prometheus text),
//! `GET /root`, `GET /roots` (the acceptable window), `GET /proof/{index}` (the Merkle witness in
//! the RLN field order, hex, plus zerokit's byte encoding: each path element as 32 bytes
//! little-endian, concatenated), `POST /verify` (an RLN proof against the root window). Bad
//! requests get a 4xx with `{"error": ...}`; limits (body size, timeout, concurrency, verifier
//! threads) come from [`ServerConfig`] and answer 413/429/503 when hit.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::rejection::JsonRejection;
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{BoxError, Json, Router};
use hasher::{fr_to_le_bytes, PoseidonHasher};
use metrics_exporter_prometheus::PrometheusHandle;
use rln_glue::verifier::{RlnVerifier, Verdict};
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tower::ServiceBuilder;
use tree_core::{History, MerkleTree};
use tree_engines::SharedDbTree;

use crate::config::{CanopyConfig, ServerConfig};
use crate::events::{fr_hex, read_blocks_from};
use crate::ops::{self, apply_block_shared, last_block, not_a_member, open, repair_checkpoint};
use crate::shutdown::Shutdown;
use crate::status::SyncStatus;
use crate::telemetry::{DB_SIZE_BYTES, HTTP_REJECTED, HTTP_REQUEST_SECONDS};
use crate::{verify, CliError, Output};

/// The tree the server reads.
pub type Shared = Arc<SharedDbTree<PoseidonHasher>>;

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// What every handler reads: the tree, the sync status, the limits, the metrics recorder.
#[derive(Clone)]
pub struct AppState {
    tree: Shared,
    status: Arc<SyncStatus>,
    config: Arc<ServerConfig>,
    metrics: Option<PrometheusHandle>,
    verify: Arc<VerifyPool>,
    jsonrpc: Option<Arc<eth_endpoint::Endpoint>>,
}

impl AppState {
    /// The state of a server over `tree`.
    pub fn new(
        tree: Shared,
        status: Arc<SyncStatus>,
        config: ServerConfig,
        metrics: Option<PrometheusHandle>,
    ) -> Self {
        let verify = Arc::new(VerifyPool::new(
            config.max_concurrent_verifications,
            config.verifying_key.clone(),
        ));
        Self {
            tree,
            status,
            config: Arc::new(config),
            metrics,
            verify,
            jsonrpc: None,
        }
    }

    /// Serves the Ethereum JSON-RPC endpoint at `POST /` too.
    #[must_use]
    pub fn with_jsonrpc(mut self, endpoint: eth_endpoint::Endpoint) -> Self {
        self.jsonrpc = Some(Arc::new(endpoint));
        self
    }
}

/// `POST /`: Ethereum JSON-RPC 2.0, one request or a batch ([`eth_endpoint`]); 204 when every
/// request was a notification.
async fn jsonrpc(State(app): State<AppState>, body: axum::body::Bytes) -> Response {
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

/// RLN verification on its own threads, a bounded number at once, at the lowest CPU priority:
/// a pairing never takes a core that `/proof` (on the async threads) wants.
struct VerifyPool {
    permits: Arc<Semaphore>,
    threads: Option<rayon::ThreadPool>,
    key: Option<PathBuf>,
    verifier: OnceLock<Result<RlnVerifier, String>>,
}

impl VerifyPool {
    fn new(threads: usize, key: Option<PathBuf>) -> Self {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("canopy-verify-{i}"))
            .start_handler(|_| lowest_priority())
            .build();
        if let Err(e) = &pool {
            tracing::warn!("no verifier threads ({e}): /verify runs on the blocking pool");
        }
        Self {
            permits: Arc::new(Semaphore::new(threads)),
            threads: pool.ok(),
            key,
            verifier: OnceLock::new(),
        }
    }

    /// Runs `job` on a verifier thread (the blocking pool if there are none).
    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        match &self.threads {
            Some(pool) => {
                let (tell, answer) = tokio::sync::oneshot::channel();
                pool.spawn(move || {
                    let _ = tell.send(job());
                });
                answer.await.map_err(|e| format!("verifier thread: {e}"))
            }
            None => tokio::task::spawn_blocking(job)
                .await
                .map_err(|e| format!("verifier task: {e}")),
        }
    }

    /// The verifier, loaded on first use: the configured key file, else the key of zerokit's
    /// depth-20 circuit when built with `rln`.
    fn verifier(&self) -> Result<&RlnVerifier, String> {
        self.verifier
            .get_or_init(|| verify::load_verifier(self.key.as_deref()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Puts the calling thread in the scheduler's lowest class (Linux `SCHED_IDLE`: it runs only
/// when no other thread wants the core); elsewhere at the lowest normal priority.
fn lowest_priority() {
    #[cfg(unix)]
    {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
        #[cfg(target_os = "linux")]
        let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        #[cfg(not(target_os = "linux"))]
        let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
        if let Err(e) = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            ThreadPriority::Min,
            policy,
        ) {
            tracing::warn!("verifier thread keeps its priority: {e:?}");
        }
    }
}

async fn health(State(app): State<AppState>) -> Response {
    let (members, last) = app.tree.read(|t| (t.next_index(), last_block(t)));
    let health = app.status.health(app.config.max_lag_blocks, members, last);
    let code = if health.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(health.body)).into_response()
}

async fn ready(State(app): State<AppState>) -> Response {
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

async fn metrics_text(State(app): State<AppState>) -> Response {
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

/// `POST /verify`: one RLN proof (an object: `{"valid", "reason"?}` back) or a batch (an array of
/// at most `max_verify_batch` objects: one `{"verdict", "reason"?}` each, in order, and counts),
/// checked against the root window with one batch check. A malformed item is answered alone.
async fn verify(State(app): State<AppState>, body: Result<Json<Value>, JsonRejection>) -> Response {
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
                    .map(verify::parse_value)
                    .collect::<Vec<_>>(),
                false,
            )
        }
        // A single proof that does not parse is the request's fault: 400, as before batches.
        value => match verify::parse_value(value) {
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
            Ok::<_, String>(verify::verdicts(verifier, &items, &roots))
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
        "verdicts": verdicts.iter().map(|(v, r)| verify::verdict_json(*v, r.as_deref())).collect::<Vec<_>>(),
        "counts": verify::tally(&verdicts),
    }))
    .into_response()
}

async fn root(State(app): State<AppState>) -> Json<Value> {
    let tree = &app.tree;
    Json(tree.read(|t| {
        json!({"root": fr_hex(&t.root()), "next_index": t.next_index(), "last_block": last_block(t)})
    }))
}

/// The roots a proof may be made against: the tree's window (one root per retained block) and,
/// for a contract with a root history, the roots it keeps (one per tree-changing call), so every
/// root a verifier seeded from `getRecentRoots()` accepts is accepted here too.
fn acceptable_roots(tree: &ops::Tree) -> Result<Vec<hasher::Fr>, tree_engines::DbTreeError> {
    let mut roots = tree.roots()?;
    let history = follower::BlockMeta::decode(&tree.metadata()?)
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

async fn roots(State(app): State<AppState>) -> Response {
    match app.tree.read(acceptable_roots) {
        Ok(roots) => {
            Json(json!({"roots": roots.iter().map(fr_hex).collect::<Vec<_>>()})).into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn proof(State(app): State<AppState>, Path(index): Path<String>) -> Response {
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
async fn member(State(app): State<AppState>, Path(id): Path<String>) -> Response {
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
        let meta = follower::BlockMeta::decode(&t.metadata().map_err(|e| internal(&e))?)
            .map_err(|e| internal(&e))?;
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

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "unknown path (try /health, /ready, /metrics, /root, /roots, /proof/{index}, /member/{id}, POST /verify, POST / for JSON-RPC)"
            .into(),
    )
}

/// Records the latency of every routed request by route and status.
async fn observe(matched: Option<MatchedPath>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let response = next.run(request).await;
    // `/proof/:index` rather than axum's `/proof/{index}`: braces in label values trip simple
    // exposition parsers and PromQL regexes alike.
    let route = matched.map_or_else(
        || "unmatched".to_owned(),
        |m| m.as_str().replace('{', ":").replace('}', ""),
    );
    metrics::histogram!(
        HTTP_REQUEST_SECONDS,
        "route" => route,
        "status" => response.status().as_u16().to_string()
    )
    .record(started.elapsed().as_secs_f64());
    response
}

/// What the tower limits answer when they refuse a request.
async fn refused(error: BoxError) -> Response {
    if error.is::<tower::load_shed::error::Overloaded>() {
        metrics::counter!(HTTP_REJECTED, "reason" => "overloaded").increment(1);
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "1")],
            Json(json!({"error": "server at capacity: retry later"})),
        )
            .into_response()
    } else if error.is::<tower::timeout::error::Elapsed>() {
        metrics::counter!(HTTP_REJECTED, "reason" => "timeout").increment(1);
        self::error(StatusCode::SERVICE_UNAVAILABLE, "request timed out".into())
    } else {
        self::error(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
    }
}

/// Runs the server until SIGINT/SIGTERM, applying `--events` meanwhile.
///
/// # Errors
/// Opening the database, binding the address, a bad events stream (logged, the server keeps
/// serving the last good state).
pub fn run(config: &CanopyConfig, events: Option<PathBuf>) -> Result<Output, CliError> {
    let db = config.db.clone();
    let listen = config
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8645)));
    let mut tree = open(&db)?;
    repair_checkpoint(&mut tree)?;
    let shared: Shared = Arc::new(SharedDbTree::new(tree));
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
                Ok(n) => tracing::info!(blocks = n, "applied the events file"),
                Err(e) => tracing::error!("events: {e}"),
            }
        });
    }
    let metrics = crate::telemetry::init_metrics().map_err(CliError::Usage)?;
    let runtime = runtime(&db)?;
    let status = Arc::new(SyncStatus::serving());
    let app = AppState::new(shared.clone(), status, config.server.clone(), Some(metrics));
    let server_config = config.server.clone();
    runtime.block_on(async move {
        let shutdown = Shutdown::install(Duration::from_millis(server_config.shutdown_timeout_ms))
            .map_err(|e| CliError::Usage(format!("signal handlers: {e}")))?;
        serve(listen, app, shutdown).await
    })?;
    shared.read(|t| t.flush()).map_err(CliError::from)?;
    Ok(Output {
        text: "stopped".into(),
        json: json!({"stopped": true}),
    })
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

/// The CORS layer for `origins` (none when empty); an origin that is no header value is an
/// error.
///
/// # Errors
/// [`CliError::Usage`] naming the origin.
pub fn cors(origins: &[String]) -> Result<Option<tower_http::cors::CorsLayer>, CliError> {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return Ok(None);
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| {
                header::HeaderValue::from_str(o).map_err(|_| {
                    CliError::Usage(format!("server.cors_origins: {o:?} is not an origin"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(values)
    };
    Ok(Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([axum::http::Method::GET, axum::http::Method::POST])
            .allow_headers([header::CONTENT_TYPE]),
    ))
}

/// The HTTP API over `app`, with its limits: body size (413), a concurrency limit that sheds
/// at once (503), a per-request timeout (503); latency metrics per route; and CORS for the
/// configured origins.
pub fn router(app: AppState) -> Router {
    let config = app.config.clone();
    let router = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics_text))
        .route("/root", get(root))
        .route("/roots", get(roots))
        .route("/proof/{index}", get(proof))
        .route("/member/{id}", get(member))
        .route_layer(tower_http::limit::RequestBodyLimitLayer::new(
            config.max_body_bytes,
        ))
        .route(
            "/",
            post(jsonrpc).layer(tower_http::limit::RequestBodyLimitLayer::new(
                config.max_jsonrpc_body_bytes,
            )),
        )
        // Batches of proofs are larger than any other request: their own limit.
        .route(
            "/verify",
            post(verify).layer(tower_http::limit::RequestBodyLimitLayer::new(
                config.max_verify_body_bytes,
            )),
        )
        .route_layer(axum::middleware::from_fn(observe))
        .fallback(not_found)
        .with_state(app)
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(refused))
                .load_shed()
                .concurrency_limit(config.max_concurrent_requests.max(1))
                .timeout(Duration::from_millis(config.request_timeout_ms.max(1))),
        );
    // `serve` checked the origins.
    match cors(&config.cors_origins) {
        Ok(Some(layer)) => router.layer(layer),
        _ => router,
    }
}

/// Binds `listen`, prints the address on stdout, serves until `shutdown`, then drains the
/// requests in flight.
///
/// # Errors
/// Binding fails, the server stops.
pub async fn serve(
    listen: SocketAddr,
    app: AppState,
    shutdown: Shutdown,
) -> Result<Output, CliError> {
    cors(&app.config.cors_origins)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    // The first line on stdout, for whoever started us on port 0.
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "listening on http://{bound}").and_then(|()| stdout.flush());
    }
    tracing::info!(%bound, "serving");
    let status = app.status.clone();
    axum::serve(listener, router(app))
        .with_graceful_shutdown(async move {
            shutdown.wait().await;
            status.stopping();
        })
        .await
        .map_err(|e| CliError::Usage(format!("server stopped: {e}")))?;
    Ok(Output {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
