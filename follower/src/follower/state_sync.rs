//! State sync: an empty tree filled from the contract's leaves at one pinned block (paged
//! `getRateCommitmentsInRangeBoundsInclusive`), committed only if its root is the contract's.

use std::time::Instant;

use hasher::Fr;

use super::Follower;
use crate::block::{BlockMeta, ChainBinding};
use crate::changes::BlockChanges;
use crate::profile::canonical;
use crate::rpc::{BlockRef, RangeError};
use crate::FollowError;

impl Follower {
    /// Fills an empty tree from the contract's leaves at block `pinned`, checks the root (and
    /// seeds the root history from `getRecentRoots()`, whose newest must be that root), and
    /// commits it as that block. Returns the members read.
    pub(super) async fn state_sync(
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
