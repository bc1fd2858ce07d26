//! The HTTP server of `canopy serve` and `canopy follow --serve`: the router and its limits
//! (body size, concurrency, timeout, CORS), latency metrics per route, and serving until
//! shutdown. The handlers live by route family:
//! - `health`: `GET /health` (sync status; 503 while behind), `/ready`, `/metrics` (Prometheus);
//! - `tree`: `GET /root`, `/roots` (the acceptable window), `/proof/{index}` (the Merkle witness
//!   in the RLN field order, hex, plus zerokit's byte encoding: each path element as 32 bytes
//!   little-endian, concatenated), `/member/{id}`;
//! - `verify`: `POST /verify` (RLN proofs against the root window), on the `verify_pool`;
//! - `jsonrpc`: `POST /`, the Ethereum JSON-RPC endpoint ([`eth_endpoint`]).
//!
//! Bad requests get a 4xx with `{"error": ...}`; limits come from [`ServerConfig`] and answer
//! 413/429/503 when hit.

mod connections;
mod health;
mod jsonrpc;
mod tree;
mod verify;
mod verify_pool;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::error_handling::HandleErrorLayer;
use axum::extract::{MatchedPath, Request};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{BoxError, Json, Router};
use hasher::PoseidonHasher;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;
use tower::ServiceBuilder;
use tree_engines::SharedDbTree;

use crate::config::ServerConfig;
use crate::shutdown::Shutdown;
use crate::status::SyncStatus;
use crate::telemetry::{HTTP_REJECTED, HTTP_REQUEST_SECONDS};
use crate::{CliError, Output};
use verify_pool::VerifyPool;

/// The tree the server reads.
pub type ServedTree = Arc<SharedDbTree<PoseidonHasher>>;

/// A JSON error body with `status`: what every refusal of this server looks like.
fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// What every handler reads: the tree, the sync status, the limits, the metrics recorder.
#[derive(Clone)]
pub struct AppState {
    tree: ServedTree,
    status: Arc<SyncStatus>,
    config: Arc<ServerConfig>,
    metrics: Option<PrometheusHandle>,
    verify: Arc<VerifyPool>,
    jsonrpc: Option<Arc<eth_endpoint::Endpoint>>,
}

impl AppState {
    /// The state of a server over `tree`.
    pub fn new(
        tree: ServedTree,
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

/// The HTTP API over `app`, with its limits: body size (413), a per-client cap (429) and a
/// concurrency limit (503) that refuse at once, a per-request timeout (503); latency metrics
/// per route; and CORS for the configured origins.
pub fn router(app: AppState) -> Router {
    let config = app.config.clone();
    let caps = Arc::new(connections::ClientCaps::new(
        config.max_concurrent_per_client,
    ));
    let router = Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/metrics", get(health::metrics_text))
        .route("/root", get(tree::root))
        .route("/roots", get(tree::roots))
        .route("/proof/{index}", get(tree::proof))
        .route("/member/{id}", get(tree::member))
        .route_layer(tower_http::limit::RequestBodyLimitLayer::new(
            config.max_body_bytes,
        ))
        .route(
            "/",
            post(jsonrpc::jsonrpc).layer(tower_http::limit::RequestBodyLimitLayer::new(
                config.max_jsonrpc_body_bytes,
            )),
        )
        // Batches of proofs are larger than any other request: their own limit.
        .route(
            "/verify",
            post(verify::verify).layer(tower_http::limit::RequestBodyLimitLayer::new(
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
        )
        // Outermost: a client over its cap is refused before it takes a server-wide place.
        .layer(axum::middleware::from_fn_with_state(
            caps,
            connections::per_client,
        ));
    // `bind` checked the origins before the server was built.
    match cors(&config.cors_origins) {
        Ok(Some(layer)) => router.layer(layer),
        _ => router,
    }
}

/// A socket bound for the server, whose settings were checked: what `serve` and `follow --serve`
/// get before any other work, so an address that is taken or a bad setting stops them at once.
pub struct BoundServer {
    listener: tokio::net::TcpListener,
}

/// Checks the server settings, binds `listen` and prints the address on stdout (the first line,
/// for whoever started us on port 0).
///
/// # Errors
/// [`CliError::Usage`]: an origin that is no header value, an address that cannot be bound.
pub async fn bind(listen: SocketAddr, config: &ServerConfig) -> Result<BoundServer, CliError> {
    cors(&config.cors_origins)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::Usage(format!("cannot listen on {listen}: {e}")))?;
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "listening on http://{bound}").and_then(|()| stdout.flush());
    }
    tracing::info!(%bound, "serving");
    Ok(BoundServer { listener })
}

/// Serves `app` on `bound` until `shutdown`, then drains the requests in flight.
///
/// # Errors
/// None today: a connection's failure ends that connection only.
pub async fn serve(
    bound: BoundServer,
    app: AppState,
    shutdown: Shutdown,
) -> Result<Output, CliError> {
    let status = app.status.clone();
    let limits = connections::ConnectionLimits {
        max_connections: app.config.max_connections,
        header_read_timeout: Duration::from_millis(app.config.header_read_timeout_ms.max(1)),
    };
    connections::accept(bound.listener, router(app), limits, async move {
        shutdown.wait().await;
        status.stopping();
    })
    .await;
    Ok(Output {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
