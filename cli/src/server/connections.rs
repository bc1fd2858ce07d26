//! The server's connections: accepted under a cap, each served by hyper with a header-read
//! timeout that also closes a connection idle between requests (so slow or silent clients hold
//! nothing for long), the client's address handed to the router, and a per-client cap on the
//! requests in flight. On shutdown the listener closes and open connections finish the request
//! they are answering.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use serde_json::json;
use tower::ServiceExt as _;

use crate::telemetry::HTTP_REJECTED;

/// Requests in flight per client address, capped.
pub(super) struct ClientCaps {
    max: usize,
    in_flight: Mutex<HashMap<IpAddr, usize>>,
}

/// One request of a client in flight; leaving (answered or dropped) frees its place.
struct InFlight<'a> {
    caps: &'a ClientCaps,
    client: IpAddr,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = self.caps.in_flight.lock();
        if let Some(n) = in_flight.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                in_flight.remove(&self.client);
            }
        }
    }
}

impl ClientCaps {
    /// At most `max` requests per client address at once (0: no cap).
    pub(super) fn new(max: usize) -> Self {
        Self {
            max,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more request of `client`, if it has one left.
    fn enter(&self, client: IpAddr) -> Option<InFlight<'_>> {
        let mut in_flight = self.in_flight.lock();
        let n = in_flight.entry(client).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        Some(InFlight { caps: self, client })
    }
}

/// The per-client cap as a middleware: a client past its cap gets 429 at once, before it takes
/// one of the server's places. Requests without a client address (a router called in-process)
/// pass.
pub(super) async fn per_client(
    State(caps): State<Arc<ClientCaps>>,
    request: Request,
    next: Next,
) -> Response {
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip())
        .filter(|_| caps.max > 0);
    let Some(client) = client else {
        return next.run(request).await;
    };
    let Some(_place) = caps.enter(client) else {
        metrics::counter!(HTTP_REJECTED, "reason" => "per_client").increment(1);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            Json(json!({"error": format!("more than {} requests of this client at once: retry later", caps.max)})),
        )
            .into_response();
    };
    next.run(request).await
}

/// Limits of the connections themselves.
#[derive(Clone, Copy, Debug)]
pub(super) struct ConnectionLimits {
    /// Open connections at once.
    pub(super) max_connections: usize,
    /// Time to send a request's headers, and to stay idle between requests.
    pub(super) header_read_timeout: Duration,
}

/// Accepts connections on `listener` and serves `router` on each until `stop` resolves; then
/// stops accepting, lets each connection finish its request, and returns when all are closed.
pub(super) async fn accept(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stop: impl std::future::Future<Output = ()>,
) {
    let open = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, do not spin.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let Ok(place) = open.clone().try_acquire_owned() else {
            metrics::counter!(HTTP_REJECTED, "reason" => "connections").increment(1);
            drop(stream);
            continue;
        };
        let service = router.clone().map_request(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            },
        );
        let mut closed = closed.clone();
        connections.spawn(async move {
            let _place = place;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let connection =
                builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closed.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}
