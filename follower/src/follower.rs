//! [`Follower`]: mirrors a membership contract into a tree, one atomic commit per block.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::eips::BlockId;
use alloy::primitives::{Address, B256};
use alloy::rpc::types::Log;
use hasher::{Fr, Hasher, PoseidonHasher};
use serde::{Deserialize, Serialize};
use tree_core::{History, MerkleTree, UpdateBatch};
use tree_engines::SharedDbTree as SharedTree;

use crate::block::{commit_block, last_block, BlockChanges, BlockMeta, ChainBinding};
use crate::calls::{changes_by_call, register_member};
use crate::members::{member_key, MemberInfo};
use crate::profile::{canonical, ContractProfile, MembershipEvent};
use crate::roots::RootHistory;
use crate::rpc::{BlockRef, ChainClient, RangeError, RetryConfig};
use crate::{metrics, FollowError};

/// The tree a follower writes: shared, so a server can read it meanwhile.
pub type FollowedTree = SharedTree<PoseidonHasher>;

/// How an empty database is first filled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Read the contract's leaves at a recent block (paged views), build the tree in one batch,
    /// check the root, then follow events from the next block.
    #[default]
    State,
    /// Replay every event from the deployment block (or `from_block`); needs an archive node for
    /// the root checks at old blocks.
    Replay,
}

/// When the tree's root is compared with the contract's `root()`. The last block of every
/// `eth_getLogs` range is always checked, events or not: that check is what ties a range's
/// logs to the chain the block is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootCheck {
    /// After every block with events (one `eth_call` each) and the last block of each range,
    /// before it is committed.
    #[default]
    EveryBlock,
    /// After the last block of each `eth_getLogs` range only.
    EveryRange,
}

/// Adaptive `eth_getLogs` block ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogRangeConfig {
    /// Blocks in the first request.
    pub initial: u64,
    /// Never fewer (a node that refuses one block's logs is an error).
    pub min: u64,
    /// Never more.
    pub max: u64,
    /// Grow (double) the range while a response holds fewer logs than this.
    pub grow_below_logs: usize,
}

impl Default for LogRangeConfig {
    fn default() -> Self {
        Self {
            initial: 1_000,
            min: 1,
            max: 10_000,
            grow_below_logs: 2_000,
        }
    }
}

/// Everything a follower needs besides the node and the tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FollowerConfig {
    /// The contract's events and leaf rule.
    pub profile: ContractProfile,
    /// How an empty database is filled.
    pub sync: SyncMode,
    /// Replay from this block instead of `deployedBlockNumber()`; state sync pins this block
    /// instead of the head (less confirmations).
    pub from_block: Option<u64>,
    /// Stay this many blocks behind the head.
    pub confirmations: u64,
    /// `eth_getLogs` ranges.
    pub log_ranges: LogRangeConfig,
    /// Leaves per `getRateCommitmentsInRangeBoundsInclusive` call in state sync (halved on
    /// failure).
    pub state_page: u32,
    /// When roots are checked against the contract.
    pub root_check: RootCheck,
    /// Retries of each call.
    pub retry: RetryConfig,
    /// Wait between polls once caught up, in milliseconds.
    pub poll_interval_ms: u64,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        Self {
            profile: ContractProfile::default(),
            sync: SyncMode::State,
            from_block: None,
            confirmations: 0,
            log_ranges: LogRangeConfig::default(),
            state_page: 2_048,
            root_check: RootCheck::EveryBlock,
            retry: RetryConfig::default(),
            poll_interval_ms: 2_000,
        }
    }
}

/// What one [`Follower::step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// The first block this step read (its range is `first_block..=block`).
    pub first_block: u64,
    /// The last block now applied.
    pub block: u64,
    /// The newest block the node reported.
    pub head: u64,
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
    /// Whether the contract keeps a root history (`None` until asked).
    root_history: Option<bool>,
    /// The contract's deployment block, once a replay from it asked.
    deployed: Option<u64>,
}

/// How often one [`Follower::step`] starts over after the chain moved under it.
const REORG_RETRIES: u32 = 3;

/// Header requests in flight while the retained checkpoints are compared with the node.
const CHECK_CONCURRENCY: usize = 16;

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
        })
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
        let head = self.client.head().await?;
        let target = head.saturating_sub(self.config.confirmations);
        let mut outcome = StepOutcome {
            head,
            target,
            ..StepOutcome::default()
        };
        let history = self.has_root_history(target).await?;
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
        let (to, logs) = self.fetch_logs(from, target, history).await?;
        // The logs may come from another branch than the stored block's if the chain moved
        // below it meanwhile: that block must still be the node's.
        if let Some(meta) = anchor {
            self.check_still_on_chain(meta).await?;
        }
        let (committed, events) = self
            .apply_range(from, to, logs, binding, (roots, members_from))
            .await?;
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
        let mut backoff = Duration::from_millis(self.config.retry.initial_backoff_ms.max(1));
        loop {
            let wait = tokio::select! {
                () = &mut stop => return Ok(()),
                result = self.step() => match result {
                    Ok(outcome) => {
                        on_step(Ok(&outcome), &self.stats());
                        backoff = Duration::from_millis(self.config.retry.initial_backoff_ms.max(1));
                        if outcome.caught_up { poll } else { Duration::ZERO }
                    }
                    Err(e) if e.is_transient() => {
                        tracing::warn!("follow step failed, will retry: {e}");
                        on_step(Err(&e), &self.stats());
                        let wait = backoff;
                        backoff = (backoff * 2).min(Duration::from_millis(self.config.retry.max_backoff_ms.max(1)));
                        wait
                    }
                    Err(e) => return Err(e),
                },
            };
            if !wait.is_zero() {
                tokio::select! {
                    () = &mut stop => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }

    /// Makes sure the last applied block is still on the chain, and after a start or a root
    /// mismatch every retained checkpoint too; rewinds to the newest checkpoint below the first
    /// block the node disowns. Returns the block now last applied.
    async fn reconcile(&mut self, stored: BlockMeta) -> Result<BlockMeta, FollowError> {
        if std::mem::take(&mut self.verify_history) {
            return match self.verify_checkpoints(stored).await {
                Err(e) => {
                    self.verify_history = true;
                    Err(e)
                }
                ok => ok,
            };
        }
        let Some(stored_hash) = stored.hash else {
            return Ok(stored);
        };
        if self.on_chain(stored.number, stored_hash).await? {
            return Ok(stored);
        }
        let checkpoints = self.tree.read(|t| t.checkpoints())?;
        for checkpoint in checkpoints.iter().rev() {
            let Some(meta) = BlockMeta::decode(&checkpoint.metadata)? else {
                continue;
            };
            let Some(hash) = meta.hash else { continue };
            if self.on_chain(meta.number, hash).await? {
                return self.rewind_to(stored, meta, stored.number);
            }
        }
        Err(FollowError::ReorgTooDeep {
            stored_block: stored.number,
            oldest_checkpoint: checkpoints.first().map(|c| c.id),
        })
    }

    /// Compares every retained checkpoint, oldest first, with the node's hash of its block;
    /// rewinds to the last one before the first the node disowns. A database written on a
    /// branch that the chain left below its newest block is repaired here.
    async fn verify_checkpoints(&mut self, stored: BlockMeta) -> Result<BlockMeta, FollowError> {
        let checkpoints = self.tree.read(|t| t.checkpoints())?;
        let mut metas = Vec::with_capacity(checkpoints.len() + 1);
        for checkpoint in &checkpoints {
            if let Some(meta) = BlockMeta::decode(&checkpoint.metadata)? {
                metas.push(meta);
            }
        }
        if metas.last() != Some(&stored) {
            metas.push(stored);
        }
        // One header per checkpoint (128 by default), CHECK_CONCURRENCY at a time, in order.
        let verdicts: Vec<Result<bool, FollowError>> = {
            use futures::StreamExt;
            let this = &*self;
            futures::stream::iter(metas.iter().copied())
                .map(|meta| async move {
                    match meta.hash {
                        Some(hash) => this.on_chain(meta.number, hash).await,
                        None => Ok(true),
                    }
                })
                .buffered(CHECK_CONCURRENCY)
                .collect()
                .await
        };
        let mut kept: Option<BlockMeta> = None;
        for (meta, on_chain) in metas.into_iter().zip(verdicts) {
            if on_chain? {
                kept = Some(meta);
                continue;
            }
            return match kept {
                Some(kept) if kept != stored => self.rewind_to(stored, kept, meta.number),
                _ => Err(FollowError::ReorgTooDeep {
                    stored_block: stored.number,
                    oldest_checkpoint: checkpoints.first().map(|c| c.id),
                }),
            };
        }
        Ok(stored)
    }

    /// Whether the node's block `number` has `hash`.
    async fn on_chain(&self, number: u64, hash: B256) -> Result<bool, FollowError> {
        Ok(self.client.header(number).await?.map(|h| h.0) == Some(hash))
    }

    /// Rewinds from `stored` to the checkpoint of `to`, because the node disowned block
    /// `orphaned` (at or below `stored`).
    fn rewind_to(
        &mut self,
        stored: BlockMeta,
        to: BlockMeta,
        orphaned: u64,
    ) -> Result<BlockMeta, FollowError> {
        self.tree.write(|t| t.rewind_to(to.number))?;
        let depth = stored.number - to.number;
        self.stats.reorgs += 1;
        self.stats.max_reorg_depth = self.stats.max_reorg_depth.max(depth);
        metrics::reorg(depth);
        tracing::warn!(
            from_block = stored.number,
            from_hash = ?stored.hash,
            orphaned_block = orphaned,
            to_block = to.number,
            to_hash = ?to.hash,
            depth,
            "reorg: rewound to the newest common checkpoint"
        );
        Ok(to)
    }

    /// [`FollowError::ReorgInProgress`] unless the node still has `meta`'s block.
    async fn check_still_on_chain(&self, meta: BlockMeta) -> Result<(), FollowError> {
        match meta.hash {
            Some(hash) if !self.on_chain(meta.number, hash).await? => {
                Err(FollowError::ReorgInProgress { block: meta.number })
            }
            _ => Ok(()),
        }
    }

    /// Whether the contract keeps a root history, asked once (at `target`) when the profile
    /// allows one.
    async fn has_root_history(&mut self, target: u64) -> Result<bool, FollowError> {
        if !self.config.profile.root_history {
            return Ok(false);
        }
        if let Some(known) = self.root_history {
            return Ok(known);
        }
        let block = self.client.block(target).await?;
        let known = self.client.has_root_history(block).await?;
        tracing::info!(
            root_history = known,
            "the contract {} a root history (RootStored, getRecentRoots)",
            if known { "keeps" } else { "keeps no" }
        );
        self.root_history = Some(known);
        Ok(known)
    }

    /// The root history the next block starts from: none without one; empty before the first
    /// block of a replay; the stored one; or, for a database written before Canopy kept it,
    /// the contract's at the stored block.
    async fn roots_before(
        &self,
        stored: Option<BlockMeta>,
        history: bool,
    ) -> Result<Option<RootHistory>, FollowError> {
        if !history {
            return Ok(None);
        }
        let Some(meta) = stored else {
            return Ok(Some(RootHistory::default()));
        };
        if meta.roots.is_some() {
            return Ok(meta.roots);
        }
        let block = match meta.hash {
            Some(hash) => BlockRef {
                number: meta.number,
                hash,
            },
            None => self.client.block(meta.number).await?,
        };
        Ok(Some(
            self.client.recent_roots(block).await?.unwrap_or_default(),
        ))
    }

    /// Logs of `from..` up to `target`, over a range that adapts to the node's limits.
    async fn fetch_logs(
        &mut self,
        from: u64,
        target: u64,
        history: bool,
    ) -> Result<(u64, Vec<Log>), FollowError> {
        let ranges = self.config.log_ranges;
        let topics = self.config.profile.topics(history);
        loop {
            let to = target.min(from.saturating_add(self.range - 1));
            match self.client.logs(from, to, &topics).await {
                Ok(logs) => {
                    if logs.len() < ranges.grow_below_logs {
                        self.range = (self.range * 2).min(ranges.max.max(1));
                    }
                    return Ok((to, logs));
                }
                Err(RangeError::TooLarge) if self.range > ranges.min.max(1) => {
                    self.range = (self.range / 2).max(ranges.min.max(1));
                    tracing::info!(range = self.range, "eth_getLogs range too large, shrinking");
                }
                Err(RangeError::TooLarge) => {
                    return Err(FollowError::Refused {
                        method: "eth_getLogs",
                        provider: self.client.names(),
                        message: format!("the node refuses the logs of blocks {from}..={to}"),
                    })
                }
                Err(RangeError::Failed(e)) => return Err(e),
            }
        }
    }

    /// Applies the logs of blocks `from..=to`: one commit per block with events, then one for
    /// `to` when it had none (so the position and its hash advance). `to` is committed only with
    /// the contract's root at `to`'s hash: the check that the logs, whichever branch they were
    /// read from, give the state of the block being committed. With a root history (`roots`),
    /// every call's stored root is checked instead of `root()` at each block, and the history
    /// lands in each block's metadata; with a complete member index (`members_from`) the
    /// member changes land in each block's commit.
    async fn apply_range(
        &mut self,
        from: u64,
        to: u64,
        logs: Vec<Log>,
        binding: ChainBinding,
        (mut roots, members_from): (Option<RootHistory>, Option<u64>),
    ) -> Result<(u64, u64), FollowError> {
        let decode_started = Instant::now();
        let mut blocks: BTreeMap<u64, Vec<Log>> = BTreeMap::new();
        for log in logs {
            let number = log.block_number.ok_or_else(|| FollowError::BadData {
                block: from,
                reason: "a log without a block number".into(),
            })?;
            if !(from..=to).contains(&number) {
                return Err(FollowError::BadData {
                    block: number,
                    reason: format!("log outside the requested blocks {from}..={to}"),
                });
            }
            if log.address() != binding.contract {
                return Err(FollowError::BadData {
                    block: number,
                    reason: format!("log from {} instead of the contract", log.address()),
                });
            }
            if log.removed {
                return Err(FollowError::ReorgInProgress { block: number });
            }
            blocks.entry(number).or_default().push(log);
        }
        for logs in blocks.values_mut() {
            logs.sort_by_key(|l| (l.transaction_index, l.log_index));
        }
        self.stats.decode += decode_started.elapsed();
        let last_with_events = blocks.keys().next_back().copied();
        let (mut committed, mut events) = (0, 0);
        for (number, logs) in blocks {
            // A stored root comes in the logs, from one provider: it replaces the agreed
            // `root()` only when one provider is trusted anyway (quorum 1).
            let check = number == to
                || (self.config.root_check == RootCheck::EveryBlock
                    && (roots.is_none() || self.client.quorum() > 1));
            events += logs.len() as u64;
            roots = self
                .apply_block(number, &logs, binding, check, (roots, members_from))
                .await?;
            committed += 1;
        }
        if last_with_events != Some(to) {
            let (hash, parent) = self.header_of(to).await?;
            self.check_parent(to, parent).await?;
            let block = BlockRef { number: to, hash };
            let expected = self.client.root_at(block).await?;
            let meta = BlockMeta {
                number: to,
                hash: Some(hash),
                binding: Some(binding),
                roots,
                members_from,
            };
            self.commit(meta, BlockChanges::new(), Some(expected), 0)
                .await?;
            committed += 1;
        }
        Ok((committed, events))
    }

    async fn header_of(&self, number: u64) -> Result<(B256, B256), FollowError> {
        self.client
            .header(number)
            .await?
            .ok_or(FollowError::ReorgInProgress { block: number })
    }

    /// When `number` follows the last applied block, its parent hash must be that block's hash.
    async fn check_parent(&self, number: u64, parent: B256) -> Result<(), FollowError> {
        let Some(previous) = self.last_block()? else {
            return Ok(());
        };
        let Some(stored) = previous.hash else {
            return Ok(());
        };
        if previous.number + 1 != number || parent == stored {
            return Ok(());
        }
        // The node moved to another branch (a reorg the next step handles), or its answers
        // do not chain.
        if self.client.header(previous.number).await?.map(|h| h.0) != Some(stored) {
            return Err(FollowError::ReorgInProgress { block: number });
        }
        Err(FollowError::BrokenChain {
            block: number,
            parent,
            stored,
        })
    }

    /// Decodes one block's logs into leaf changes, resolves erasures (by the calls' stored
    /// roots with a root history, otherwise against the contract), and commits the block
    /// (after comparing roots when `check_root`). Returns the root history after it.
    async fn apply_block(
        &mut self,
        number: u64,
        logs: &[Log],
        binding: ChainBinding,
        check_root: bool,
        (roots, members_from): (Option<RootHistory>, Option<u64>),
    ) -> Result<Option<RootHistory>, FollowError> {
        let (hash, parent) = self.header_of(number).await?;
        if logs.iter().any(|l| l.block_hash != Some(hash)) {
            return Err(FollowError::ReorgInProgress { block: number });
        }
        self.check_parent(number, parent).await?;
        let decode_started = Instant::now();
        let bad = |reason: String| FollowError::BadData {
            block: number,
            reason,
        };
        let block = BlockRef { number, hash };
        let (changes, roots) = match roots {
            Some(mut history) => {
                let mut events = Vec::with_capacity(logs.len());
                for log in logs {
                    let event = self
                        .config
                        .profile
                        .decode(log)
                        .map_err(|reason| bad_log(number, log, &reason))?;
                    let transaction = log.transaction_index.zip(log.transaction_hash);
                    events.push((transaction, event));
                }
                let next = self.tree.read(MerkleTree::next_index);
                let changes = changes_by_call(events, next).map_err(&bad)?;
                self.stats.decode += decode_started.elapsed();
                for root in changes.stored_roots() {
                    history.push(root);
                }
                (changes, Some(history))
            }
            None => (self.changes_by_block(number, logs, block).await?, None),
        };
        let expected = if check_root {
            Some(self.client.root_at(block).await?)
        } else {
            None
        };
        let meta = BlockMeta {
            number,
            hash: Some(hash),
            binding: Some(binding),
            roots,
            members_from,
        };
        self.commit(meta, changes, expected, logs.len() as u64)
            .await?;
        self.stats.events += logs.len() as u64;
        tracing::debug!(block = number, %hash, events = logs.len(), "applied block");
        Ok(roots)
    }

    /// A block's changes from a contract without a root history: whether an erasure was lazy
    /// or full, the event does not say; the contract's leaf after the block does.
    async fn changes_by_block(
        &mut self,
        number: u64,
        logs: &[Log],
        block: BlockRef,
    ) -> Result<BlockChanges, FollowError> {
        let decode_started = Instant::now();
        let bad = |reason: String| FollowError::BadData {
            block: number,
            reason,
        };
        let mut next = self.tree.read(MerkleTree::next_index);
        let mut changes = BlockChanges::new();
        let mut written: BTreeMap<u64, Fr> = BTreeMap::new();
        let mut erased: BTreeSet<u64> = BTreeSet::new();
        for log in logs {
            let at = |reason: String| bad_log(number, log, &reason);
            match self.config.profile.decode(log).map_err(at)? {
                MembershipEvent::Registered {
                    index,
                    leaf,
                    id,
                    rate_limit,
                } => {
                    if index > next {
                        return Err(at(format!(
                            "registration at index {index} leaves a gap: the next free index is {next}"
                        )));
                    }
                    if index == next {
                        next += 1;
                    }
                    changes.set(index, leaf);
                    register_member(&mut changes, id, rate_limit, index).map_err(at)?;
                    written.insert(index, leaf);
                    erased.remove(&index);
                }
                MembershipEvent::Erased { index, id } => {
                    if index >= next {
                        return Err(at(format!(
                            "erasure of index {index}, which no member holds (next free index {next})"
                        )));
                    }
                    erased.insert(index);
                    changes.member(id, None);
                }
                MembershipEvent::RootStored { .. } => {
                    return Err(at(
                        "RootStored from a contract followed without a root history".into(),
                    ))
                }
            }
        }
        self.stats.decode += decode_started.elapsed();
        for index in erased {
            let index32 = u32::try_from(index).map_err(|_| bad(format!("index {index}")))?;
            let value = match self.client.leaves(index32, index32, block).await {
                Ok(values) if values.len() == 1 => values[0],
                Ok(values) => {
                    return Err(bad(format!(
                    "getRateCommitmentsInRangeBoundsInclusive({index}, {index}) returned {} values",
                    values.len()
                )))
                }
                Err(RangeError::Failed(e)) => return Err(e),
                Err(RangeError::TooLarge) => {
                    return Err(FollowError::ReorgInProgress { block: number })
                }
            };
            let value = canonical(value, "leaf").map_err(&bad)?;
            let current = match written.get(&index) {
                Some(leaf) => *leaf,
                None => self.tree.read(|t| t.get(index))?,
            };
            if value == Fr::from(0u64) {
                changes.delete(index);
            } else if value != current {
                return Err(bad(format!(
                    "after erasing index {index} the contract holds leaf {}, neither 0 nor the leaf before",
                    crate::block::fr_hex(&value)
                )));
            }
        }
        Ok(changes)
    }

    /// Hashes and commits off the async threads.
    async fn commit(
        &mut self,
        meta: BlockMeta,
        changes: BlockChanges,
        expected: Option<Fr>,
        events: u64,
    ) -> Result<Fr, FollowError> {
        let started = Instant::now();
        let tree = self.tree.clone();
        let committed =
            tokio::task::spawn_blocking(move || commit_block(&tree, &meta, &changes, expected))
                .await
                .map_err(|e| FollowError::Internal(format!("commit task: {e}")))?;
        let root = match committed {
            Ok(root) => root,
            Err(e) => return Err(self.explain_mismatch(meta, e.into()).await),
        };
        self.stats.apply += started.elapsed();
        self.stats.blocks_committed += 1;
        metrics::committed(events, started.elapsed());
        Ok(root)
    }

    /// A root mismatch is fatal only when nothing else explains it: first the chain is checked
    /// for a reorg (the block, the stored one and, on the next step, every retained
    /// checkpoint), then, with several providers, the data is read again from another one
    /// (the providers that served it are reported).
    async fn explain_mismatch(&mut self, block: BlockMeta, error: FollowError) -> FollowError {
        let FollowError::RootMismatch { ours, contract, .. } = &error else {
            return error;
        };
        self.verify_history = true;
        let moved = match (block.hash, self.last_block()) {
            (Some(hash), Ok(stored)) => {
                let this_block = self.on_chain(block.number, hash).await;
                let stored_block = match stored.and_then(|m| m.hash.map(|h| (m.number, h))) {
                    Some((number, hash)) => self.on_chain(number, hash).await,
                    None => Ok(true),
                };
                match (this_block, stored_block) {
                    (Ok(a), Ok(b)) => !(a && b),
                    (Err(e), _) | (_, Err(e)) => return e,
                }
            }
            _ => false,
        };
        if moved {
            return FollowError::ReorgInProgress {
                block: block.number,
            };
        }
        // Nothing moved at the tip; the next step still compares every retained checkpoint.
        match self.verify_checkpoints_now().await {
            Ok(true) => {
                return FollowError::ReorgInProgress {
                    block: block.number,
                }
            }
            Ok(false) => {}
            Err(e) => return e,
        }
        let what = format!(
            "its data for block {} gives root {ours}, the contract's root() is {contract}",
            block.number
        );
        if self.client.distrust_data_sources(&what) {
            return FollowError::Disputed {
                block: block.number,
            };
        }
        error
    }

    /// Runs the full checkpoint comparison now; true when it rewound.
    async fn verify_checkpoints_now(&mut self) -> Result<bool, FollowError> {
        let Some(stored) = self.last_block()? else {
            return Ok(false);
        };
        self.verify_history = false;
        let current = self.verify_checkpoints(stored).await?;
        Ok(current != stored)
    }

    /// Builds the member index of a tree that has none (after a state sync, or a database
    /// written before Canopy kept one): the contract's registrations and erasures since
    /// `deployedBlockNumber()` up to the tree's block, logs only. Every member found must hold
    /// its leaf in the tree (`PoseidonT3(id, rate limit)` at its index, one member per index)
    /// and the block must still be the node's; then the index and the metadata that says it is
    /// complete land in one commit (recorded in the block's undo frame, so a rewind below it
    /// drops both). Returns the logs read.
    async fn backfill_members(&mut self, meta: BlockMeta) -> Result<u64, FollowError> {
        let started = Instant::now();
        let deployed = self.client.deployed_block().await?;
        let contract = self.binding().await?.contract;
        let bad = |block: u64, reason: String| FollowError::BadData { block, reason };
        let mut members: BTreeMap<[u8; 32], (Fr, MemberInfo)> = BTreeMap::new();
        let mut read = 0u64;
        let mut from = deployed;
        while from <= meta.number {
            let (to, mut logs) = self.fetch_logs(from, meta.number, false).await?;
            logs.sort_by_key(|l| (l.block_number, l.transaction_index, l.log_index));
            for log in &logs {
                let number = log.block_number.unwrap_or(from);
                if log.block_number.is_none_or(|n| !(from..=to).contains(&n)) {
                    return Err(bad(
                        number,
                        format!("log outside the requested blocks {from}..={to}"),
                    ));
                }
                if log.address() != contract {
                    return Err(bad(
                        number,
                        format!("log from {} instead of the contract", log.address()),
                    ));
                }
                if log.removed {
                    return Err(FollowError::ReorgInProgress { block: number });
                }
                let event = self
                    .config
                    .profile
                    .decode(log)
                    .map_err(|reason| bad_log(number, log, &reason))?;
                match event {
                    MembershipEvent::Registered {
                        index,
                        id,
                        rate_limit: Some(rate_limit),
                        ..
                    } if rate_limit != 0 => {
                        let index = u32::try_from(index)
                            .map_err(|_| bad_log(number, log, "index past uint32"))?;
                        members.insert(
                            hasher::fr_to_be_bytes(&id),
                            (id, MemberInfo { rate_limit, index }),
                        );
                    }
                    MembershipEvent::Erased { id, .. } => {
                        members.remove(&hasher::fr_to_be_bytes(&id));
                    }
                    other => {
                        return Err(bad_log(
                            number,
                            log,
                            &format!("{other:?} cannot be indexed"),
                        ))
                    }
                }
            }
            read += logs.len() as u64;
            from = to + 1;
        }
        self.check_still_on_chain(meta).await?;
        let indexed = BlockMeta {
            members_from: Some(deployed),
            ..meta
        };
        let count = members.len();
        let tree = self.tree.clone();
        tokio::task::spawn_blocking(move || -> Result<(), FollowError> {
            let mut batch = UpdateBatch::<PoseidonHasher>::new();
            let mut held = BTreeSet::new();
            for (id, info) in members.values() {
                let leaf = tree.read(|t| t.get(u64::from(info.index)))?;
                let expected = PoseidonHasher::hash_pair(id, &Fr::from(info.rate_limit));
                if leaf != expected || !held.insert(info.index) {
                    return Err(bad(
                        meta.number,
                        format!(
                            "the contract's logs since block {deployed} make {} the member at index {}, the tree's leaf there is not its rate commitment",
                            crate::block::fr_hex(id),
                            info.index
                        ),
                    ));
                }
                batch.put_record(&member_key(id), info.encode());
            }
            batch.metadata(indexed.encode());
            tree.apply(batch)?;
            Ok(())
        })
        .await
        .map_err(|e| FollowError::Internal(format!("member index task: {e}")))??;
        tracing::info!(
            block = meta.number,
            members = count,
            logs = read,
            since = deployed,
            elapsed_s = started.elapsed().as_secs_f64(),
            "member index built from the contract's logs"
        );
        Ok(read)
    }

    /// Fills an empty tree from the contract's leaves at block `pinned`, checks the root (and
    /// seeds the root history from `getRecentRoots()`, whose newest must be that root), and
    /// commits it as that block. Returns the members read.
    async fn state_sync(
        &mut self,
        pinned: u64,
        binding: ChainBinding,
        history: bool,
    ) -> Result<u64, FollowError> {
        let (hash, _) = self.header_of(pinned).await?;
        let at = BlockRef {
            number: pinned,
            hash,
        };
        self.client.begin_data();
        let members = self.client.next_free_index(at).await?;
        let capacity = 1u64 << self.config.profile.depth;
        if members > capacity {
            return Err(FollowError::BadData {
                block: pinned,
                reason: format!("nextFreeIndex {members} is past the capacity {capacity}"),
            });
        }
        let mut leaves: Vec<Fr> = Vec::with_capacity(usize::try_from(members).unwrap_or(0));
        let mut page = u64::from(self.config.state_page.max(1));
        let mut start = 0u64;
        while start < members {
            let end = members.min(start + page) - 1;
            let (s, e) = (
                u32::try_from(start).map_err(|_| FollowError::Internal("index".into()))?,
                u32::try_from(end).map_err(|_| FollowError::Internal("index".into()))?,
            );
            match self.client.leaves(s, e, at).await {
                Ok(values) => {
                    if values.len() as u64 != end - start + 1 {
                        return Err(FollowError::BadData {
                            block: pinned,
                            reason: format!(
                                "leaves {start}..={end}: {} values returned",
                                values.len()
                            ),
                        });
                    }
                    let decode_started = Instant::now();
                    for value in values {
                        leaves.push(canonical(value, "leaf").map_err(|reason| {
                            FollowError::BadData {
                                block: pinned,
                                reason,
                            }
                        })?);
                    }
                    self.stats.decode += decode_started.elapsed();
                    start = end + 1;
                    tracing::debug!(read = start, of = members, "state sync");
                }
                Err(RangeError::TooLarge) => {
                    page = (page / 2).max(1);
                    tracing::info!(page, "leaf page too large, shrinking");
                }
                Err(RangeError::Failed(e)) => return Err(e),
            }
        }
        let expected = self.client.root_at(at).await?;
        let roots = if history {
            let roots = self.client.recent_roots(at).await?.unwrap_or_default();
            if roots.newest().is_some_and(|newest| newest != expected) {
                return Err(FollowError::BadData {
                    block: pinned,
                    reason: "getRecentRoots()'s newest root is not root()".into(),
                });
            }
            Some(roots)
        } else {
            None
        };
        let mut changes = BlockChanges::new();
        for (index, leaf) in (0u64..).zip(&leaves) {
            changes.set(index, *leaf);
        }
        // Leaves carry no ids: the member index is built from the logs by the next step.
        let meta = BlockMeta {
            number: pinned,
            hash: Some(hash),
            binding: Some(binding),
            roots,
            members_from: None,
        };
        self.commit(meta, changes, Some(expected), members).await?;
        tracing::info!(block = pinned, members, "state sync done; following events");
        Ok(members)
    }
}

/// [`FollowError::BadData`] for `log` of `block`, naming the log and its transaction.
fn bad_log(block: u64, log: &Log, reason: &str) -> FollowError {
    FollowError::BadData {
        block,
        reason: format!(
            "log {} of transaction {}: {reason}",
            log.log_index.unwrap_or_default(),
            log.transaction_hash.unwrap_or_default()
        ),
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
