//! The member backfill: the member index (`idCommitment -> (rate limit, index)`) of a tree that
//! has none, built from the contract's logs since deployment and checked against the tree's
//! leaves, in one commit.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use hasher::{Fr, Hasher, PoseidonHasher};
use tree_core::{MerkleTree, UpdateBatch};

use super::ranges::{bad_log, log_block};
use super::Follower;
use crate::block::BlockMeta;
use crate::members::{member_key, MemberInfo};
use crate::profile::MembershipEvent;
use crate::FollowError;

impl Follower {
    /// Builds the member index of a tree that has none (after a state sync, or a database
    /// written before Canopy kept one): the contract's registrations and erasures since
    /// `deployedBlockNumber()` up to the tree's block, logs only. Every member found must hold
    /// its leaf in the tree (`PoseidonT3(id, rate limit)` at its index, one member per index)
    /// and the block must still be the node's; then the index and the metadata that says it is
    /// complete land in one commit (recorded in the block's undo frame, so a rewind below it
    /// drops both). Returns the logs read.
    pub(super) async fn backfill_members(&mut self, meta: BlockMeta) -> Result<u64, FollowError> {
        let started = Instant::now();
        let deployed = self.client.deployed_block().await?;
        let contract = self.binding().await?.contract;
        let bad = |block: u64, reason: String| FollowError::BadData { block, reason };
        let mut members: BTreeMap<[u8; 32], (Fr, MemberInfo)> = BTreeMap::new();
        let mut read = 0u64;
        let mut from = deployed;
        let topics = self.config.profile.topics(false);
        while from <= meta.number {
            let (to, mut logs) = self.fetch_logs(from, meta.number, &topics).await?;
            logs.sort_by_key(|l| (l.block_number, l.transaction_index, l.log_index));
            for log in &logs {
                let number = log_block(log, from..=to, contract)?;
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
}
