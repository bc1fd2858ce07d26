//! `canopy serve`: the HTTP server ([`crate::server`]) over a database, while the same process
//! applies new blocks from an events file or stdin.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tree_core::MerkleTree;
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
pub fn run(
    config: &CanopyConfig,
    events: Option<PathBuf>,
    replica: bool,
) -> Result<Output, CliError> {
    if replica {
        if events.is_some() {
            return Err(CliError::Usage(
                "--replica serves what the database's writer commits: no --events".into(),
            ));
        }
        return run_replica(config);
    }
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

/// `serve --replica`: the PostgreSQL tree `config` names, held in memory and brought forward
/// every `postgres.replica_poll_ms` from the rows its writer committed since.
fn run_replica(config: &CanopyConfig) -> Result<Output, CliError> {
    if tree_engines::postgres_url(&config.db).is_none() {
        return Err(CliError::Usage(
            "--replica reads a PostgreSQL tree: --db postgres://…".into(),
        ));
    }
    let listen = config
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8645)));
    let runtime = runtime(&config.db)?;
    let bound = runtime.block_on(bind(listen, &config.server))?;
    let started = std::time::Instant::now();
    let (mut replica, tree) =
        tree_engines::DbReplica::open::<hasher::PoseidonHasher>(&config.db_config())?;
    tracing::info!(
        members = tree.next_index(),
        commits = replica.commits(),
        ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "replica loaded the tree"
    );
    let shared: ServedTree = Arc::new(SharedDbTree::new(tree));
    // With `--rpc`, the Ethereum JSON-RPC endpoint at `POST /`, as `follow --serve` has it:
    // the contract's views from the replica's tree, everything else forwarded to the node.
    let jsonrpc = if config.rpc.is_empty() {
        None
    } else {
        let (urls, contract) = crate::follow::chain_settings(config)?;
        let client = follower::ChainClient::with_providers(
            urls,
            contract,
            config.follower.retry,
            config.quorum,
        )
        .map_err(CliError::from)?;
        Some((client, Arc::new(eth_endpoint::HeadView::default())))
    };
    let status = Arc::new(SyncStatus::replica());
    status.caught_up(
        u64::try_from(replica.commits()).unwrap_or(0),
        replica.is_listening(),
        None,
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pg = &config.postgres;
    let (poll, listening_poll) = (
        Duration::from_millis(pg.replica_poll_ms.max(1)),
        Duration::from_millis(pg.replica_listen_poll_ms.max(1)),
    );
    let catching_up = {
        let (shared, status, stop) = (shared.clone(), status.clone(), stop.clone());
        let head = jsonrpc.as_ref().map(|(_, head)| head.clone());
        std::thread::spawn(move || {
            let mut refusal = None;
            // The block served: what the last catch-up left.
            let mut served = shared.read(last_block).unwrap_or(0);
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let refused = replica.listen_refusal();
                if refused.is_some() && refused != refusal {
                    tracing::warn!(
                        reason = refused.as_deref().unwrap_or_default(),
                        "the server sends no commit notifications (a hot standby?): polling"
                    );
                }
                refusal = refused;
                match replica.catch_up(&shared) {
                    Ok(lag) => {
                        // Unchanged unless the look found commits (or a shrunken tree).
                        let block = if lag.caught_up != 0 {
                            shared.read(last_block).unwrap_or(0)
                        } else {
                            served
                        };
                        let found = (lag.caught_up > 0).then(|| crate::status::ReplicaCatchUp {
                            seconds: lag.last_commit_age,
                            blocks: block.saturating_sub(served),
                        });
                        served = block;
                        let seen = (lag.commits, block, found);
                        replica_seen(&status, &replica, seen, head.as_deref());
                    }
                    Err(e) => {
                        tracing::warn!("replica catch-up: {e}");
                        status.failed(&e.to_string());
                    }
                }
                // A commit's notification ends the wait at once; without notifications (a hot
                // standby, a lost connection) the replica polls.
                let wait = if replica.is_listening() {
                    listening_poll
                } else {
                    poll
                };
                replica.wait_for_commit(wait);
            }
        })
    };
    let metrics = crate::telemetry::init_metrics().map_err(CliError::Usage)?;
    let mut app = AppState::new(shared.clone(), status, config.server.clone(), Some(metrics));
    if let Some((client, head)) = &jsonrpc {
        let endpoint = eth_endpoint::Endpoint::new(
            shared,
            Some(client.clone()),
            head.clone(),
            config.jsonrpc.clone(),
        );
        app = app.with_jsonrpc(endpoint);
    }
    let server_config = config.server.clone();
    let head_poll = Duration::from_millis(config.jsonrpc.head_poll_ms.max(1));
    let served = runtime.block_on(async move {
        if let Some((client, head)) = jsonrpc {
            tokio::spawn(eth_endpoint::watch_head(client, head, head_poll));
        }
        let shutdown = Shutdown::install(Duration::from_millis(server_config.shutdown_timeout_ms))
            .map_err(|e| CliError::Usage(format!("signal handlers: {e}")))?;
        serve(bound, app, shutdown).await
    });
    stop.store(true, std::sync::atomic::Ordering::Release);
    let _ = catching_up.join();
    served?;
    Ok(Output {
        text: "stopped".into(),
        json: json!({"stopped": true}),
    })
}

/// Reports a replica's successful look at the database: `/health`, `/metrics`, and `latest`
/// calls waiting for the tree (`head`, with `--rpc`), which also gives the chain's head.
fn replica_seen(
    status: &SyncStatus,
    replica: &tree_engines::DbReplica,
    (commits, block, found): (i64, u64, Option<crate::status::ReplicaCatchUp>),
    head: Option<&eth_endpoint::HeadView>,
) {
    use crate::telemetry::{
        REPLICA_BLOCKS_BEHIND_HEAD, REPLICA_COMMITS, REPLICA_LAG_BLOCKS, REPLICA_LAG_SECONDS,
        REPLICA_LISTENING,
    };
    let listening = replica.is_listening();
    status.caught_up(u64::try_from(commits).unwrap_or(0), listening, found);
    #[allow(clippy::cast_precision_loss)]
    {
        metrics::gauge!(REPLICA_COMMITS).set(commits as f64);
        metrics::gauge!(REPLICA_LISTENING).set(f64::from(u8::from(listening)));
        if let Some(found) = found {
            metrics::gauge!(REPLICA_LAG_SECONDS).set(found.seconds);
            metrics::gauge!(REPLICA_LAG_BLOCKS).set(found.blocks as f64);
        }
    }
    let Some(head) = head else { return };
    if found.is_some() {
        // `latest` calls waiting for the tree to reach the head look again.
        head.tree_moved();
    }
    if let Some((number, _)) = head.fresh(Duration::from_secs(60)) {
        status.head_seen(number);
        #[allow(clippy::cast_precision_loss)]
        metrics::gauge!(REPLICA_BLOCKS_BEHIND_HEAD).set(number.saturating_sub(block) as f64);
    }
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
