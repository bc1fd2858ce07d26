//! Logs and metrics of the daemons: `tracing` lines on stderr (text or JSON, level from
//! `RUST_LOG`, default info) and a Prometheus recorder whose text `/metrics` serves.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::config::LogFormat;

/// Name of the HTTP latency histogram (by route and status).
pub const HTTP_REQUEST_SECONDS: &str = "canopy_http_request_seconds";
/// Name of the counter of requests refused by a limit (by reason).
pub const HTTP_REJECTED: &str = "canopy_http_rejected_total";
/// Name of the database size gauge.
pub const DB_SIZE_BYTES: &str = "canopy_db_size_bytes";
/// Name of a replica's gauge of the database commit it serves.
pub const REPLICA_COMMITS: &str = "canopy_replica_commits";
/// Name of a replica's lag gauge: seconds from the primary's commit to the replica serving it.
pub const REPLICA_LAG_SECONDS: &str = "canopy_replica_lag_seconds";
/// Name of a replica's lag gauge in blocks: how far behind the writer it was when it found its
/// last new commit.
pub const REPLICA_LAG_BLOCKS: &str = "canopy_replica_lag_blocks";
/// Name of a replica's gauge of blocks between the chain's head and the block it serves
/// (replicas given `--rpc`).
pub const REPLICA_BLOCKS_BEHIND_HEAD: &str = "canopy_replica_blocks_behind_head";
/// Name of a replica's gauge: 1 while the writer's commit notifications reach it, 0 polling.
pub const REPLICA_LISTENING: &str = "canopy_replica_listening";

/// Installs the log subscriber on stderr; `color` decides ANSI escapes in text lines (never in
/// JSON ones).
pub fn init_logs(format: LogFormat, color: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(color && format == LogFormat::Text)
        // A closed stderr (`canopy follow 2>&1 | head`) loses the lines, nothing more: the
        // subscriber would otherwise report each failed write with `eprintln!`, which panics.
        .log_internal_errors(false)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Installs the Prometheus recorder (histograms with explicit buckets) and describes every
/// metric; the handle renders the text format.
///
/// # Errors
/// A recorder is already installed.
pub fn init_metrics() -> Result<PrometheusHandle, String> {
    let seconds = [
        0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
        0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(follower::metrics::REORG_DEPTH.into()),
                &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0],
            )
        })
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    follower::metrics::describe();
    metrics::describe_histogram!(
        HTTP_REQUEST_SECONDS,
        metrics::Unit::Seconds,
        "HTTP request latency by route and status"
    );
    metrics::describe_counter!(HTTP_REJECTED, "HTTP requests refused by a limit, by reason");
    metrics::describe_gauge!(REPLICA_COMMITS, "The database commit a read replica serves");
    metrics::describe_gauge!(
        REPLICA_LAG_SECONDS,
        metrics::Unit::Seconds,
        "Seconds from the primary's commit to a read replica serving it (last new commit)"
    );
    metrics::describe_gauge!(
        REPLICA_LAG_BLOCKS,
        "Blocks a read replica was behind its writer when it found its last new commit"
    );
    metrics::describe_gauge!(
        REPLICA_BLOCKS_BEHIND_HEAD,
        "Blocks between the chain's head and the block a read replica serves"
    );
    metrics::describe_gauge!(
        REPLICA_LISTENING,
        "1 while a read replica receives its writer's commit notifications, 0 while it polls"
    );
    metrics::describe_gauge!(DB_SIZE_BYTES, "Bytes of the database directory on disk");
    Ok(handle)
}
