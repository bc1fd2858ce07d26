//! `canopy serve`: the HTTP server ([`crate::server`]) over a database, while the same process
//! applies new blocks from an events file or stdin.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tree_engines::SharedDbTree;

use crate::config::CanopyConfig;
use crate::events::read_blocks_from;
use crate::ops::{apply_block_shared, last_block, open, repair_checkpoint};
use crate::server::{bind, serve, AppState, ServedTree};
use crate::shutdown::Shutdown;
use crate::status::SyncStatus;
use crate::{CliError, Output};

/// Runs the server until SIGINT/SIGTERM, applying `--events` meanwhile.
///
/// # Errors
/// Opening the database, binding the address, a bad events stream (logged, the server keeps
/// serving the last good state).
pub fn run(config: &CanopyConfig, events: Option<PathBuf>) -> Result<Output, CliError> {
    let db = crate::ops::Db {
        path: config.db.clone(),
        tree: config.tree.clone(),
    };
    let listen = config
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8645)));
    let runtime = runtime(&db.path)?;
    // Before any work (the database is not even opened): an address that is taken or a bad
    // setting stops us here.
    let bound = runtime.block_on(bind(listen, &config.server))?;
    let mut tree = open(&db)?;
    repair_checkpoint(&mut tree)?;
    let shared: ServedTree = Arc::new(SharedDbTree::new(tree));
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
    let status = Arc::new(SyncStatus::serving());
    let app = AppState::new(shared.clone(), status, config.server.clone(), Some(metrics));
    let server_config = config.server.clone();
    runtime.block_on(async move {
        let shutdown = Shutdown::install(Duration::from_millis(server_config.shutdown_timeout_ms))
            .map_err(|e| CliError::Usage(format!("signal handlers: {e}")))?;
        serve(bound, app, shutdown).await
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
