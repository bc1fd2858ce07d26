//! `canopy follow`: mirror a membership contract from an Ethereum node, optionally serving the
//! HTTP API of `canopy serve` meanwhile.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use follower::{ChainClient, Follower, FollowerConfig, SyncMode};
use serde_json::json;
use tree_core::{Depth, MerkleTree};
use tree_sled::{SharedTree, SledConfig};

use crate::events::fr_hex;
use crate::ops::Tree;
use crate::{CliError, Output};

/// What `canopy follow` was asked to do.
pub struct FollowArgs<'a> {
    /// JSON-RPC URL of the node.
    pub rpc: &'a str,
    /// The membership contract.
    pub contract: &'a str,
    /// Database directory (created when absent).
    pub db: &'a Path,
    /// Follower settings.
    pub config: FollowerConfig,
    /// Serve the HTTP API here while following.
    pub serve: Option<SocketAddr>,
    /// Stop once caught up with the head (less confirmations).
    pub once: bool,
}

fn follow_error(e: follower::FollowError) -> CliError {
    CliError::Tree(e.to_string())
}

/// Runs the follower (and the server) until stopped, or until caught up with `once`.
///
/// # Errors
/// Bad arguments, a database of another chain, contract or depth, a deep reorg, bad chain data.
pub fn run(args: FollowArgs<'_>) -> Result<Output, CliError> {
    let url: url::Url = args
        .rpc
        .parse()
        .map_err(|e| CliError::Usage(format!("--rpc {:?}: {e}", args.rpc)))?;
    let contract: alloy::primitives::Address = args
        .contract
        .parse()
        .map_err(|e| CliError::Usage(format!("--contract {:?}: {e}", args.contract)))?;
    let depth = Depth::new(args.config.profile.depth)
        .map_err(|e| CliError::Usage(format!("profile depth: {e}")))?;
    let tree = if args.db.join("db").exists() || args.db.join("conf").exists() {
        Tree::open_existing(&SledConfig::new(args.db))?
    } else {
        Tree::open(&SledConfig::new(args.db), depth)?
    };
    let shared = Arc::new(SharedTree::new(tree));
    let client = ChainClient::new(url, contract, args.config.retry).map_err(follow_error)?;
    let mut follower =
        Follower::new(client, args.config.clone(), shared.clone()).map_err(follow_error)?;
    let runtime = crate::serve::runtime(args.db)?;
    let once = args.once;
    let serve = args.serve;
    runtime.block_on(async move {
        if let Some(listen) = serve {
            let shared = shared.clone();
            tokio::spawn(async move {
                if let Err(e) = crate::serve::serve(listen, shared).await {
                    eprintln!("error: {e}");
                }
            });
        }
        // Long syncs show blocks, members, blocks/s and an ETA on stderr.
        let bar = crate::progress::blocks_bar(0);
        let mut base: Option<u64> = None;
        let mut on_step = |outcome: &follower::StepOutcome, members: u64| {
            let start = *base.get_or_insert(outcome.first_block.saturating_sub(1));
            bar.set_length(outcome.target.saturating_sub(start));
            bar.set_position(outcome.block.saturating_sub(start));
            bar.set_message(format!("block {}, {members} members", outcome.block));
        };
        if once {
            loop {
                let outcome = follower.step().await.map_err(follow_error)?;
                on_step(&outcome, shared.read(MerkleTree::next_index));
                if outcome.caught_up {
                    break;
                }
            }
            bar.finish_and_clear();
        } else {
            let stop = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            follower
                .run(stop, |outcome, stats| {
                    on_step(outcome, shared.read(MerkleTree::next_index));
                    if outcome.blocks_committed > 0 && outcome.caught_up {
                        tracing::info!(
                            block = outcome.block,
                            target = outcome.target,
                            behind = outcome.target.saturating_sub(outcome.block),
                            members = shared.read(MerkleTree::next_index),
                            blocks = stats.blocks_committed,
                            events = stats.events,
                            "synced"
                        );
                    }
                })
                .await
                .map_err(follow_error)?;
        }
        let last = follower.last_block().map_err(follow_error)?;
        let stats = follower.stats();
        shared
            .read(|t| t.flush())
            .map_err(|e| CliError::Tree(e.to_string()))?;
        let root = shared.read(MerkleTree::root);
        let members = shared.read(MerkleTree::next_index);
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
    })
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
