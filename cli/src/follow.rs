//! `canopy follow`: mirror a membership contract from an Ethereum node, optionally serving the
//! HTTP API of `canopy serve` meanwhile; stops cleanly on SIGINT/SIGTERM.

use std::sync::Arc;
use std::time::{Duration, Instant};

use follower::{ChainClient, FollowError, Follower, StepOutcome, SyncMode};
use serde_json::json;
use tree_core::persistent::PersistentTreeError;
use tree_core::{Depth, MerkleTree};
use tree_engines::SharedDbTree;

use crate::config::CanopyConfig;
use crate::events::fr_hex;
use crate::ops::Tree;
use crate::server::AppState;
use crate::shutdown::Shutdown;
use crate::status::SyncStatus;
use crate::{CliError, Output};

/// Runs the follower (and the server with `listen`) until a signal, or with `once` (a
/// deadline) until caught up.
///
/// # Errors
/// The providers' URLs and the contract's address from `config`, checked.
///
/// # Errors
/// [`CliError::Config`] when one is missing or does not parse.
pub fn chain_settings(
    config: &CanopyConfig,
) -> Result<(Vec<url::Url>, alloy::primitives::Address), CliError> {
    let missing = |key: &str, flag: &str| {
        CliError::Config(format!(
            "`{key}` is not set: pass {flag}, set CANOPY_{} or `{key}` in the config file",
            key.to_uppercase()
        ))
    };
    if config.rpc.is_empty() {
        return Err(missing("rpc", "--rpc"));
    }
    let contract = config
        .contract
        .as_deref()
        .ok_or_else(|| missing("contract", "--contract"))?;
    let urls = config
        .rpc
        .iter()
        .map(|rpc| {
            rpc.parse::<url::Url>()
                .map_err(|e| CliError::Config(format!("rpc {rpc:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let contract = contract
        .parse()
        .map_err(|e| CliError::Config(format!("contract {contract:?}: {e}")))?;
    Ok((urls, contract))
}

/// Missing or bad settings, a database of another chain, contract or depth, a deep reorg, bad
/// chain data; with `once`, [`CliError::Deadline`] and [`CliError::Interrupted`] when it
/// stopped before the target.
pub fn run(config: &CanopyConfig, once: Option<Duration>) -> Result<Output, CliError> {
    // With a server, /metrics exports the follower's metrics (recorded through the facade).
    let metrics = config
        .listen
        .map(|_| crate::telemetry::init_metrics())
        .transpose()
        .map_err(CliError::Usage)?;
    let (urls, contract) = chain_settings(config)?;
    let follower_config = config.follower.clone();
    let depth = Depth::new(follower_config.profile.depth)
        .map_err(|e| CliError::Config(format!("follower.profile.depth: {e}")))?;
    let db = config.db_config();
    let runtime = crate::serve::runtime(&config.db)?;
    // Before any work (the database is not even opened): an address that is taken or a bad
    // server setting stops the follower here, rather than leaving it following with no server.
    let bound = match config.listen {
        Some(listen) => {
            let (deadline, wait, timeout) = (
                config.jsonrpc.forward_deadline_ms,
                config.jsonrpc.latest_wait_ms,
                config.server.request_timeout_ms,
            );
            // A `latest` call may wait for the follower, then be forwarded: both within the
            // server's timeout, so a forwarded item that times out answers in its own slot.
            if deadline.saturating_add(wait) >= timeout {
                return Err(CliError::Config(format!(
                    "jsonrpc.forward_deadline_ms ({deadline}) plus jsonrpc.latest_wait_ms ({wait}) must be below server.request_timeout_ms ({timeout}): a forwarded item that times out answers in its own slot only then"
                )));
            }
            Some(runtime.block_on(crate::server::bind(listen, &config.server))?)
        }
        None => None,
    };
    let tree = match Tree::open_existing(&db) {
        Err(PersistentTreeError::NotATree) => Tree::open(&db, depth)?,
        other => other?,
    };
    let shared = Arc::new(SharedDbTree::new(tree));
    let retry = follower_config.retry;
    let client = ChainClient::with_providers(urls, contract, retry, config.quorum)
        .map_err(CliError::from)?;
    let status = Arc::new(SyncStatus::following(client.clone()));
    let mut follower =
        Follower::new(client, follower_config, shared.clone()).map_err(CliError::from)?;
    // What `latest` is for the JSON-RPC endpoint: the node's head, watched while serving; a new
    // head wakes the follower, and a block the follower applied at the head is `latest` at once.
    let head = Arc::new(eth_endpoint::HeadView::default().waking(follower.waker()));
    let summary_every = Duration::from_secs(config.log.summary_interval_secs.max(1));
    let human_progress = config.log.format == crate::config::LogFormat::Text;
    let result = runtime.block_on(async {
        let shutdown = Shutdown::install(Duration::from_millis(config.server.shutdown_timeout_ms))
            .map_err(|e| CliError::Usage(format!("signal handlers: {e}")))?;
        if let Some(bound) = bound {
            let endpoint = eth_endpoint::Endpoint::new(
                shared.clone(),
                Some(follower.client().clone()),
                head.clone(),
                config.jsonrpc.clone(),
            );
            let app = AppState::new(
                shared.clone(),
                status.clone(),
                config.server.clone(),
                metrics,
            )
            .with_jsonrpc(endpoint);
            tokio::spawn(eth_endpoint::watch_head(
                follower.client().clone(),
                head.clone(),
                Duration::from_millis(config.jsonrpc.head_poll_ms.max(1)),
            ));
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                if let Err(e) = crate::server::serve(bound, app, shutdown).await {
                    tracing::error!("server: {e}");
                }
            });
        }
        let mut report = Report::new(human_progress, summary_every);
        let mut on_step = |step: Result<&StepOutcome, &FollowError>| match step {
            Ok(outcome) => {
                let applied = shared.read(|t| follower::read_block(t).ok().flatten());
                if let (Some(asked), Some(meta)) = (outcome.head_asked, applied) {
                    if let Some(hash) = meta.hash.filter(|_| meta.number == outcome.head) {
                        head.applied_head(meta.number, hash, asked);
                    }
                }
                if outcome.blocks_committed > 0 || outcome.rewound > 0 {
                    head.tree_moved();
                }
                status.stepped(outcome);
                report.step(outcome, shared.read(MerkleTree::next_index));
            }
            Err(e) => status.failed(&e.to_string()),
        };
        let outcome = match once {
            Some(deadline) => {
                let mut target = None;
                let mut last_error = String::from("none");
                let ended = {
                    let until_target = async {
                        let mut backoff = follower::Backoff::new(&retry);
                        loop {
                            match follower.step().await {
                                Ok(outcome) => {
                                    on_step(Ok(&outcome));
                                    target = Some(outcome.target);
                                    if outcome.caught_up {
                                        return Ok(());
                                    }
                                }
                                // Transient (the node down, a reorg under way): retried until
                                // the deadline, like `run` does without one.
                                Err(e) if e.is_transient() => {
                                    on_step(Err(&e));
                                    last_error = e.to_string();
                                    tokio::time::sleep(backoff.next_wait()).await;
                                }
                                Err(e) => return Err(e),
                            }
                        }
                    };
                    tokio::select! {
                        result = until_target => OnceEnd::Finished(result),
                        () = shutdown.clone().wait() => OnceEnd::Signal,
                        () = tokio::time::sleep(deadline) => OnceEnd::Deadline,
                    }
                };
                let block = follower.last_block().ok().flatten().map(|m| m.number);
                match ended {
                    OnceEnd::Finished(result) => result.map_err(CliError::from),
                    OnceEnd::Signal => Err(CliError::Interrupted { block, target }),
                    OnceEnd::Deadline => Err(CliError::Deadline {
                        seconds: deadline.as_secs(),
                        block,
                        target,
                        last_error,
                    }),
                }
            }
            None => follower
                .run(shutdown.clone().wait(), |step, _| on_step(step))
                .await
                .map_err(CliError::from),
        };
        status.stopping();
        report.finish();
        outcome.inspect_err(|e| tracing::error!(fatal = true, "follow stopped: {e}"))
    });
    // Whatever stopped the loop, what was committed is made durable before exiting.
    let flushed = shared.read(|t| t.flush()).map_err(CliError::from);
    result?;
    flushed?;
    let last = follower.last_block().map_err(CliError::from)?;
    let stats = follower.stats();
    let root = shared.read(MerkleTree::root);
    let members = shared.read(MerkleTree::next_index);
    tracing::info!(
        block = last.map(|m| m.number),
        members,
        blocks = stats.blocks_committed,
        "stopped"
    );
    Ok(Output {
        text: format!(
            "block {}, {members} members, root {}; {} blocks committed, {} events, {} reorgs, {} RPC requests ({} retried)",
            last.map_or(0, |m| m.number),
            fr_hex(&root),
            stats.blocks_committed,
            stats.events,
            stats.reorgs,
            stats.requests,
            stats.retries
        ),
        json: json!({
            "block": last.map(|m| m.number),
            "next_index": members,
            "root": fr_hex(&root),
            "blocks_committed": stats.blocks_committed,
            "events": stats.events,
            "reorgs": stats.reorgs,
            "rpc_requests": stats.requests,
            "rpc_retries": stats.retries,
        }),
    })
}

/// How `follow --once` ended.
enum OnceEnd {
    /// Reached the target, or a fatal error.
    Finished(Result<(), FollowError>),
    /// SIGINT or SIGTERM came first.
    Signal,
    /// The deadline came first.
    Deadline,
}

/// Progress of a follow: an indicatif bar for people on a terminal, and an info-level summary
/// line every interval (blocks, members, rate) for the logs.
struct Report {
    bar: indicatif::ProgressBar,
    base: Option<u64>,
    every: Duration,
    last: Instant,
    blocks_since: u64,
    events_since: u64,
    was_caught_up: bool,
}

impl Report {
    fn new(human: bool, every: Duration) -> Self {
        Self {
            bar: if human {
                crate::progress::blocks_bar(0)
            } else {
                indicatif::ProgressBar::hidden()
            },
            base: None,
            every,
            last: Instant::now(),
            blocks_since: 0,
            events_since: 0,
            was_caught_up: false,
        }
    }

    fn step(&mut self, outcome: &StepOutcome, members: u64) {
        let start = *self
            .base
            .get_or_insert(outcome.first_block.saturating_sub(1));
        self.bar.set_length(outcome.target.saturating_sub(start));
        self.bar.set_position(outcome.block.saturating_sub(start));
        self.bar
            .set_message(format!("block {}, {members} members", outcome.block));
        self.blocks_since += outcome.blocks_committed;
        self.events_since += outcome.events;
        let caught_up_now = outcome.caught_up && !self.was_caught_up;
        self.was_caught_up = outcome.caught_up;
        let elapsed = self.last.elapsed();
        if caught_up_now || (elapsed >= self.every && self.blocks_since > 0) {
            tracing::info!(
                block = outcome.block,
                head = outcome.head,
                behind = outcome.target.saturating_sub(outcome.block),
                members,
                blocks = self.blocks_since,
                events = self.events_since,
                blocks_per_s = format!(
                    "{:.1}",
                    self.blocks_since as f64 / elapsed.as_secs_f64().max(1e-3)
                ),
                "{}",
                if outcome.caught_up {
                    "synced"
                } else {
                    "syncing"
                }
            );
            self.last = Instant::now();
            self.blocks_since = 0;
            self.events_since = 0;
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The sync mode named on the command line.
///
/// # Errors
/// An unknown name.
pub fn sync_mode(name: &str) -> Result<SyncMode, CliError> {
    match name {
        "state" => Ok(SyncMode::State),
        "replay" => Ok(SyncMode::Replay),
        other => Err(CliError::Usage(format!(
            "--sync {other:?}: expected state or replay"
        ))),
    }
}
