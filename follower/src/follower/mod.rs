//! [`Follower`]: mirrors a membership contract into a tree, one atomic commit per block.
//!
//! This module owns the step loop (what one step does, and running steps until stopped); the
//! rest of a block's way has a room each:
//! - `reorg`: is the stored block still the node's; rewinding to the newest common checkpoint;
//!   explaining a root mismatch;
//! - `root_history`: whether the contract keeps a root history, and the one a block starts from;
//! - `ranges`: `eth_getLogs` over adaptive block ranges, and the checks every log passes;
//! - `replay`: a range's blocks, a block's calls and leaf changes, and the commit;
//! - `state_sync`: filling an empty tree from the contract's leaves at one block;
//! - `backfill`: building the member index from the logs after a state sync.

mod backfill;
mod ranges;
mod reorg;
mod replay;
mod root_history;
mod state_sync;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use alloy::eips::BlockId;
use alloy::primitives::Address;
use hasher::{Fr, PoseidonHasher};
use tree_core::MerkleTree;
use tree_engines::SharedDbTree as SharedTree;

use crate::backoff::Backoff;
use crate::block::{last_block, BlockMeta, ChainBinding};
use crate::config::{FollowerConfig, SyncMode};
use crate::rpc::ChainClient;
use crate::{metrics, FollowError};

/// The tree a follower writes: shared, so a server can read it meanwhile.
pub type FollowedTree = SharedTree<PoseidonHasher>;

/// What one [`Follower::step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// The first block this step read (its range is `first_block..=block`).
    pub first_block: u64,
    /// The last block now applied.
    pub block: u64,
    /// The newest block the node reported.
    pub head: u64,
    /// When the node was asked for `head`: how old that answer is.
    pub head_asked: Option<std::time::Instant>,
    /// The block the follower is heading for (head less confirmations).
    pub target: u64,
    /// Blocks committed by this step.
    pub blocks_committed: u64,
    /// Membership events applied by this step.
    pub events: u64,
    /// Blocks rewound by a reorg in this step.
    pub rewound: u64,
    /// Whether the follower has reached its target.
    pub caught_up: bool,
}

/// Running totals, with where the time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FollowStats {
    /// Blocks committed.
    pub blocks_committed: u64,
    /// Membership events applied.
    pub events: u64,
    /// Reorgs handled.
    pub reorgs: u64,
    /// Deepest reorg, in blocks.
    pub max_reorg_depth: u64,
    /// Requests sent to the node (retries included).
    pub requests: u64,
    /// Retried requests.
    pub retries: u64,
    /// Time waiting on the node.
    pub rpc_wait: Duration,
    /// Time decoding logs.
    pub decode: Duration,
    /// Time hashing and committing.
    pub apply: Duration,
}

/// Follows one membership contract on one node into one tree.
///
/// [`step`](Self::step) does a bounded amount of work (a reorg check and one `eth_getLogs`
/// range, or the initial state sync) and returns; [`run`](Self::run) steps until stopped.
pub struct Follower {
    client: ChainClient,
    config: FollowerConfig,
    tree: Arc<FollowedTree>,
    binding: Option<ChainBinding>,
    /// The block a replay continues after, before anything is committed.
    start_after: Option<u64>,
    range: u64,
    stats: FollowStats,
    /// Compare every retained checkpoint with the node before the next step, not only the
    /// newest: on start (a database may hold a block the node has since disowned, below a
    /// newer one it still has) and after a root mismatch.
    verify_history: bool,
    /// Whether the contract keeps a root history after a block: the last block asked about,
    /// or where the last range ended (`None` until asked).
    root_history: Option<(u64, bool)>,
    /// The contract's deployment block, once a replay from it asked.
    deployed: Option<u64>,
    /// Ends [`Self::run`]'s wait between steps early: whoever sees a new head first (the
    /// JSON-RPC endpoint's head watcher) says so, and the block is applied at once rather than
    /// a poll interval later.
    wake: Arc<tokio::sync::Notify>,
}

/// How often one [`Follower::step`] starts over after the chain moved under it.
const REORG_RETRIES: u32 = 3;

impl Follower {
    /// A follower of `client`'s contract into `tree`.
    ///
    /// # Errors
    /// The tree's depth is not the profile's.
    pub fn new(
        client: ChainClient,
        config: FollowerConfig,
        tree: Arc<FollowedTree>,
    ) -> Result<Self, FollowError> {
        let stored = tree.read(|t| t.depth().get());
        if stored != config.profile.depth {
            return Err(FollowError::WrongDepth {
                stored,
                contract: config.profile.depth,
            });
        }
        let range = config.log_ranges.initial.max(1);
        Ok(Self {
            client,
            config,
            tree,
            binding: None,
            start_after: None,
            range,
            stats: FollowStats::default(),
            verify_history: true,
            root_history: None,
            deployed: None,
            wake: Arc::new(tokio::sync::Notify::new()),
        })
    }

    /// What to notify when the node has a new head: [`Self::run`] then steps at once instead
    /// of at the end of its poll interval (which stays the fallback).
    #[must_use]
    pub fn waker(&self) -> Arc<tokio::sync::Notify> {
        self.wake.clone()
    }

    /// The tree.
    #[must_use]
    pub fn tree(&self) -> &Arc<FollowedTree> {
        &self.tree
    }

    /// The node client.
    #[must_use]
    pub fn client(&self) -> &ChainClient {
        &self.client
    }

    /// Totals so far.
    #[must_use]
    pub fn stats(&self) -> FollowStats {
        let counters = self.client.counters();
        FollowStats {
            requests: counters.requests.load(Ordering::Relaxed),
            retries: counters.retries.load(Ordering::Relaxed),
            rpc_wait: Duration::from_micros(counters.wait_us.load(Ordering::Relaxed)),
            ..self.stats
        }
    }

    /// The last block applied, from the tree.
    ///
    /// # Errors
    /// Damaged metadata.
    pub fn last_block(&self) -> Result<Option<BlockMeta>, FollowError> {
        last_block(&self.tree)
    }

    async fn binding(&mut self) -> Result<ChainBinding, FollowError> {
        if let Some(binding) = self.binding {
            return Ok(binding);
        }
        let binding = ChainBinding {
            chain_id: self.client.chain_id().await?,
            contract: self.client.contract(),
        };
        self.binding = Some(binding);
        Ok(binding)
    }

    /// Applies what is new, up to the head less confirmations: one `eth_getLogs` range, or the
    /// initial state sync; first checks that the last applied block is still on the chain and
    /// rewinds to the newest common checkpoint when it is not.
    ///
    /// # Errors
    /// [`FollowError`]; when [`FollowError::is_transient`], a later step may succeed. Nothing
    /// from a failing block is applied.
    pub async fn step(&mut self) -> Result<StepOutcome, FollowError> {
        let first = self.step_once().await;
        let mut result = self.dispute_bad_data(first);
        // The chain moved while a range was read, or a provider's data was disowned: start over
        // at once (the next try reconciles first), a few times, before reporting it to the
        // caller's loop.
        for _ in 1..REORG_RETRIES {
            match &result {
                Err(e @ (FollowError::ReorgInProgress { .. } | FollowError::Disputed { .. })) => {
                    tracing::info!("{e}");
                    let again = self.step_once().await;
                    result = self.dispute_bad_data(again);
                }
                _ => break,
            }
        }
        match &result {
            Ok(outcome) => metrics::position(
                outcome.head,
                outcome.target,
                outcome.block,
                self.tree.read(MerkleTree::next_index),
            ),
            Err(e) => metrics::step_error(e.is_transient()),
        }
        result
    }

    /// Data that cannot be right, read from one of several providers, is that provider's fault
    /// (it is reported and asked last), not a reason to stop: the block is read again from
    /// another. With one provider, or a quorum of one, it stays an error.
    fn dispute_bad_data(
        &self,
        result: Result<StepOutcome, FollowError>,
    ) -> Result<StepOutcome, FollowError> {
        match result {
            Err(FollowError::BadData { block, reason })
                if self.client.distrust_data_sources(&reason) =>
            {
                Err(FollowError::Disputed { block })
            }
            other => other,
        }
    }

    async fn step_once(&mut self) -> Result<StepOutcome, FollowError> {
        let binding = self.binding().await?;
        let head_asked = std::time::Instant::now();
        let head = self.client.head().await?;
        let target = head.saturating_sub(self.config.confirmations);
        let mut outcome = StepOutcome {
            head,
            head_asked: Some(head_asked),
            target,
            ..StepOutcome::default()
        };
        let stored = self.last_block()?;
        let mut anchor: Option<BlockMeta> = None;
        let after = match stored {
            None => {
                let members = self.tree.read(MerkleTree::next_index);
                if members != 0 {
                    return Err(FollowError::NotAFollowerDatabase { members });
                }
                match self.config.sync {
                    SyncMode::State => {
                        let pinned = self.config.from_block.unwrap_or(target).min(target);
                        let history = self.keeps_root_history_at(pinned).await?;
                        outcome.events = self.state_sync(pinned, binding, history).await?;
                        outcome.first_block = pinned;
                        outcome.block = pinned;
                        outcome.blocks_committed = 1;
                        // The member index is built from the logs by the next step.
                        outcome.caught_up =
                            pinned >= target && !self.config.profile.indexes_members();
                        return Ok(outcome);
                    }
                    SyncMode::Replay => match self.start_after {
                        Some(after) => after,
                        None => {
                            let from = match self.config.from_block {
                                Some(from) => from,
                                None => {
                                    let deployed = self.client.deployed_block().await?;
                                    self.deployed = Some(deployed);
                                    deployed
                                }
                            };
                            let after = from.saturating_sub(1);
                            self.start_after = Some(after);
                            after
                        }
                    },
                }
            }
            Some(meta) => {
                let Some(stored_binding) = meta.binding else {
                    return Err(FollowError::NotAFollowerDatabase {
                        members: self.tree.read(MerkleTree::next_index),
                    });
                };
                if stored_binding.chain_id != binding.chain_id {
                    return Err(FollowError::WrongChain {
                        stored: stored_binding.chain_id,
                        node: binding.chain_id,
                    });
                }
                if stored_binding.contract != binding.contract {
                    return Err(FollowError::WrongContract {
                        stored: stored_binding.contract,
                        requested: binding.contract,
                    });
                }
                let current = self.reconcile(meta).await?;
                outcome.rewound = meta.number - current.number;
                if current.members_from.is_none() && self.config.profile.indexes_members() {
                    // A step of its own: the next one follows the chain from here.
                    outcome.events = self.backfill_members(current).await?;
                    outcome.block = current.number;
                    return Ok(outcome);
                }
                anchor = Some(current);
                current.number
            }
        };
        outcome.block = after;
        if after >= target {
            outcome.caught_up = true;
            return Ok(outcome);
        }
        let history_at = self.history_anchor(after, anchor.is_some()).await?;
        let history = self.keeps_root_history_at(history_at).await?;
        let roots = self.roots_before(anchor, history).await?;
        // A replay from the deployment block indexes every member from its first block.
        let members_from = match anchor {
            Some(meta) => meta.members_from,
            None => self
                .deployed
                .filter(|_| self.config.profile.indexes_members()),
        };
        let from = after + 1;
        self.client.begin_data();
        let topics = self.config.profile.topics(self.config.profile.root_history);
        let (to, logs) = self.fetch_logs(from, target, &topics).await?;
        // The logs may come from another branch than the stored block's if the chain moved
        // below it meanwhile: that block must still be the node's.
        if let Some(meta) = anchor {
            self.check_still_on_chain(meta).await?;
        }
        let (committed, events, roots) = self
            .apply_range(from, to, logs, binding, (roots, members_from))
            .await?;
        self.root_history = Some((to, roots.is_some()));
        outcome.first_block = from;
        outcome.block = to;
        outcome.blocks_committed = committed;
        outcome.events = events;
        outcome.caught_up = to >= target;
        Ok(outcome)
    }

    /// Steps until the follower reaches the head (less confirmations) as it was when called.
    ///
    /// # Errors
    /// As [`step`](Self::step).
    pub async fn sync_to_head(&mut self) -> Result<StepOutcome, FollowError> {
        let mut total = StepOutcome::default();
        loop {
            let outcome = self.step().await?;
            total.block = outcome.block;
            total.head = outcome.head;
            total.target = outcome.target;
            total.blocks_committed += outcome.blocks_committed;
            total.events += outcome.events;
            total.rewound += outcome.rewound;
            if outcome.caught_up {
                total.caught_up = true;
                return Ok(total);
            }
        }
    }

    /// Steps until `stop` resolves: polls every `poll_interval_ms` once caught up, waits and
    /// retries after transient errors, returns on any other. `on_step` sees every outcome and
    /// every transient error it will retry (for progress reports and health). When `stop`
    /// resolves mid-step the step is dropped: a block is one atomic commit, so it either landed
    /// whole or not at all.
    ///
    /// # Errors
    /// The first non-transient [`FollowError`].
    pub async fn run(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
        mut on_step: impl FnMut(Result<&StepOutcome, &FollowError>, &FollowStats),
    ) -> Result<(), FollowError> {
        tokio::pin!(stop);
        let poll = Duration::from_millis(self.config.poll_interval_ms);
        let mut backoff = Backoff::new(&self.config.retry);
        loop {
            // A caught-up follower waits for the poll interval or a new head, whichever comes
            // first; a failed step waits its backoff whatever the head does.
            let (wait, wakeable) = tokio::select! {
                () = &mut stop => return Ok(()),
                result = self.step() => match result {
                    Ok(outcome) => {
                        on_step(Ok(&outcome), &self.stats());
                        backoff.reset();
                        if outcome.caught_up { (poll, true) } else { (Duration::ZERO, false) }
                    }
                    Err(e) if e.is_transient() => {
                        tracing::warn!("follow step failed, will retry: {e}");
                        on_step(Err(&e), &self.stats());
                        (backoff.next_wait(), false)
                    }
                    Err(e) => return Err(e),
                },
            };
            if !wait.is_zero() {
                let wake = self.wake.clone();
                tokio::select! {
                    () = &mut stop => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                    () = wake.notified(), if wakeable => {}
                }
            }
        }
    }
}

/// The contract address a database follows, if it was made by a follower.
///
/// # Errors
/// Damaged metadata.
pub fn followed_contract(tree: &FollowedTree) -> Result<Option<Address>, FollowError> {
    Ok(last_block(tree)?
        .and_then(|m| m.binding)
        .map(|b| b.contract))
}

/// The contract's root at a block, for callers that check by hand.
///
/// # Errors
/// As [`ChainClient::root`].
pub async fn contract_root(client: &ChainClient, block: u64) -> Result<Fr, FollowError> {
    client.root(BlockId::Number(block.into())).await
}
