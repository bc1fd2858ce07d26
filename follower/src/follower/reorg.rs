//! Reorgs: whether the blocks the tree holds are still the node's, rewinding to the newest
//! checkpoint that is, and telling a root mismatch caused by a moving chain (or one provider's
//! bad data) from a real one.

use alloy::primitives::B256;
use tree_core::History;

use super::Follower;
use crate::block::BlockMeta;
use crate::{metrics, FollowError};

/// Header requests in flight while the retained checkpoints are compared with the node.
const CHECK_CONCURRENCY: usize = 16;

impl Follower {
    /// Makes sure the last applied block is still on the chain, and after a start or a root
    /// mismatch every retained checkpoint too; rewinds to the newest checkpoint below the first
    /// block the node disowns. Returns the block now last applied.
    pub(super) async fn reconcile(&mut self, stored: BlockMeta) -> Result<BlockMeta, FollowError> {
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
    pub(super) async fn verify_checkpoints(
        &mut self,
        stored: BlockMeta,
    ) -> Result<BlockMeta, FollowError> {
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
    pub(super) async fn on_chain(&self, number: u64, hash: B256) -> Result<bool, FollowError> {
        Ok(self.client.header(number).await?.map(|h| h.0) == Some(hash))
    }

    /// Rewinds from `stored` to the checkpoint of `to`, because the node disowned block
    /// `orphaned` (at or below `stored`).
    pub(super) fn rewind_to(
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
    pub(super) async fn check_still_on_chain(&self, meta: BlockMeta) -> Result<(), FollowError> {
        match meta.hash {
            Some(hash) if !self.on_chain(meta.number, hash).await? => {
                Err(FollowError::ReorgInProgress { block: meta.number })
            }
            _ => Ok(()),
        }
    }

    pub(super) async fn header_of(&self, number: u64) -> Result<(B256, B256), FollowError> {
        self.client
            .header(number)
            .await?
            .ok_or(FollowError::ReorgInProgress { block: number })
    }

    /// When `number` follows the last applied block, its parent hash must be that block's hash.
    pub(super) async fn check_parent(&self, number: u64, parent: B256) -> Result<(), FollowError> {
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

    /// A root mismatch is fatal only when nothing else explains it: first the chain is checked
    /// for a reorg (the block, the stored one and, on the next step, every retained
    /// checkpoint), then, with several providers, the data is read again from another one
    /// (the providers that served it are reported).
    pub(super) async fn explain_mismatch(
        &mut self,
        block: BlockMeta,
        error: FollowError,
    ) -> FollowError {
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
    pub(super) async fn verify_checkpoints_now(&mut self) -> Result<bool, FollowError> {
        let Some(stored) = self.last_block()? else {
            return Ok(false);
        };
        self.verify_history = false;
        let current = self.verify_checkpoints(stored).await?;
        Ok(current != stored)
    }
}
