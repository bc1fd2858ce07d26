//! The contract's root history (the newest WakuRlnV2's `RootStored`, `getRecentRoots()`):
//! whether the contract keeps one, and the history the next block starts from.

use super::Follower;
use crate::block::BlockMeta;
use crate::roots::RootHistory;
use crate::rpc::BlockRef;
use crate::FollowError;

impl Follower {
    /// Whether the contract keeps a root history, asked once (at `target`) when the profile
    /// allows one.
    pub(super) async fn has_root_history(&mut self, target: u64) -> Result<bool, FollowError> {
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
    pub(super) async fn roots_before(
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
}
