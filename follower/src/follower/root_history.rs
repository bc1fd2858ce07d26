//! The contract's root history (the newest WakuRlnV2's `RootStored`, `getRecentRoots()`):
//! whether the contract keeps one, and the history the next block starts from.

use super::Follower;
use crate::block::BlockMeta;
use crate::roots::RootHistory;
use crate::rpc::BlockRef;
use crate::FollowError;

impl Follower {
    /// Whether the contract keeps a root history after block `number`, asked of the
    /// implementation it runs there (a proxy's upgrade changes it, see [`Self::apply_range`])
    /// when the profile allows one. The answer for the block a step starts from is kept, so a
    /// follower that is caught up asks once.
    pub(super) async fn keeps_root_history_at(&mut self, number: u64) -> Result<bool, FollowError> {
        if !self.config.profile.root_history {
            return Ok(false);
        }
        if let Some((at, known)) = self.root_history {
            if at == number {
                return Ok(known);
            }
        }
        let block = self.client.block(number).await?;
        let known = self.client.has_root_history(block).await?;
        if self.root_history.map(|(_, was)| was) != Some(known) {
            tracing::info!(
                block = number,
                root_history = known,
                "the contract {} a root history (RootStored, getRecentRoots)",
                if known { "keeps" } else { "keeps no" }
            );
        }
        self.root_history = Some((number, known));
        Ok(known)
    }

    /// The block whose implementation decides how a step's first block is read: the stored
    /// one, or for a replay into an empty database the contract's deployment block (before
    /// it there is no code to ask; a proxy deployed then says which implementation it ran).
    pub(super) async fn history_anchor(
        &self,
        after: u64,
        stored: bool,
    ) -> Result<u64, FollowError> {
        if stored {
            return Ok(after);
        }
        // Not kept in `self.deployed`: that one says the replay started at the deployment.
        let deployed = match self.deployed {
            Some(deployed) => deployed,
            None => self.client.deployed_block().await?,
        };
        Ok(after.max(deployed))
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
