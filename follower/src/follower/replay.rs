//! Replay: a range's logs become blocks, a block's logs become leaf changes (by the calls that
//! made them where the contract stores a root per call, otherwise by asking the contract about
//! erasures), and each block lands in one atomic commit after its root check.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use alloy::rpc::types::Log;
use hasher::Fr;
use tree_core::MerkleTree;

use super::ranges::{bad_log, log_block};
use super::Follower;
use crate::block::{BlockMeta, ChainBinding};
use crate::calls::{changes_by_call, register_member};
use crate::changes::BlockChanges;
use crate::commit::commit_block;
use crate::config::RootCheck;
use crate::profile::{canonical, upgraded, MembershipEvent};
use crate::roots::RootHistory;
use crate::rpc::{BlockRef, RangeError};
use crate::{metrics, FollowError};

impl Follower {
    /// Applies the logs of blocks `from..=to`: one commit per block with events, then one for
    /// `to` when it had none (so the position and its hash advance). `to` is committed only with
    /// the contract's root at `to`'s hash: the check that the logs, whichever branch they were
    /// read from, give the state of the block being committed. With a root history (`roots`),
    /// every call's stored root is checked instead of `root()` at each block, and the history
    /// lands in each block's metadata; with a complete member index (`members_from`) the
    /// member changes land in each block's commit.
    ///
    /// A proxy's `Upgraded` log changes the rules from its block on: that block is read by
    /// asking the contract about its erasures (which holds under either implementation) and
    /// checked against `root()`, then the new implementation is asked whether it keeps a root
    /// history, and the history continues from its `getRecentRoots()` there. So a proxy
    /// upgraded to the root-history implementation replays from its deployment. Returns the
    /// blocks committed, the events read and the root history after `to`.
    pub(super) async fn apply_range(
        &mut self,
        from: u64,
        to: u64,
        logs: Vec<Log>,
        binding: ChainBinding,
        (mut roots, members_from): (Option<RootHistory>, Option<u64>),
    ) -> Result<(u64, u64, Option<RootHistory>), FollowError> {
        let decode_started = Instant::now();
        let mut blocks: BTreeMap<u64, Vec<Log>> = BTreeMap::new();
        let mut upgrades: BTreeSet<u64> = BTreeSet::new();
        for log in logs {
            let number = log_block(&log, from..=to, binding.contract)?;
            match upgraded(&log).map_err(|reason| bad_log(number, &log, &reason))? {
                Some(implementation) => {
                    tracing::info!(block = number, %implementation, "the proxy was upgraded");
                    upgrades.insert(number);
                    blocks.entry(number).or_default();
                }
                None => blocks.entry(number).or_default().push(log),
            }
        }
        for logs in blocks.values_mut() {
            logs.sort_by_key(|l| (l.transaction_index, l.log_index));
        }
        self.stats.decode += decode_started.elapsed();
        let last_with_events = blocks.keys().next_back().copied();
        let (mut committed, mut events) = (0, 0);
        for (number, logs) in blocks {
            let upgrade = upgrades.contains(&number);
            // A stored root comes in the logs, from one provider: it replaces the agreed
            // `root()` only when one provider is trusted anyway (quorum 1).
            let check = number == to
                || upgrade
                || (self.config.root_check == RootCheck::EveryBlock
                    && (roots.is_none() || self.client.quorum() > 1));
            events += logs.len() as u64;
            let rules = if upgrade { None } else { roots };
            let block = self
                .apply_block(number, &logs, binding, check, (rules, members_from))
                .await?;
            roots = if upgrade {
                self.history_after_upgrade(number).await?
            } else {
                block
            };
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
        Ok((committed, events, roots))
    }

    /// The root history after block `number`, where the proxy was upgraded: `None` when the new
    /// implementation keeps none, otherwise its `getRecentRoots()` there. The block was
    /// committed without one; its metadata gains it with the next block's commit.
    async fn history_after_upgrade(
        &mut self,
        number: u64,
    ) -> Result<Option<RootHistory>, FollowError> {
        if !self.keeps_root_history_at(number).await? {
            return Ok(None);
        }
        let block = self.client.block(number).await?;
        Ok(Some(
            self.client.recent_roots(block).await?.unwrap_or_default(),
        ))
    }

    /// Decodes one block's logs into leaf changes, resolves erasures (by the calls' stored
    /// roots with a root history, otherwise against the contract), and commits the block
    /// (after comparing roots when `check_root`). Returns the root history after it.
    pub(super) async fn apply_block(
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
    pub(super) async fn changes_by_block(
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
                // Emitted after an upgrade to a root-history implementation, in the block
                // of the upgrade (read by these rules): the contract's root is checked instead.
                MembershipEvent::RootStored { .. } => {}
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
    pub(super) async fn commit(
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
}
