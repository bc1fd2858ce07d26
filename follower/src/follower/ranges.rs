//! Log ranges: the contract's logs over `eth_getLogs` ranges that adapt to the node's limits
//! (halved when refused, doubled while sparse), and the checks every log passes before a block
//! is read from it.

use std::ops::RangeInclusive;

use alloy::primitives::Address;
use alloy::rpc::types::Log;

use super::Follower;
use crate::rpc::RangeError;
use crate::FollowError;

impl Follower {
    /// Logs with `topics` of `from..` up to `target`, over a range that adapts to the node's
    /// limits.
    pub(super) async fn fetch_logs(
        &mut self,
        from: u64,
        target: u64,
        topics: &[alloy::primitives::B256],
    ) -> Result<(u64, Vec<Log>), FollowError> {
        let ranges = self.config.log_ranges;
        loop {
            let to = target.min(from.saturating_add(self.range - 1));
            match self.client.logs(from, to, topics).await {
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
}

/// [`FollowError::BadData`] for `log` of `block`, naming the log and its transaction.
pub(super) fn bad_log(block: u64, log: &Log, reason: &str) -> FollowError {
    FollowError::BadData {
        block,
        reason: format!(
            "log {} of transaction {}: {reason}",
            log.log_index.unwrap_or_default(),
            log.transaction_hash.unwrap_or_default()
        ),
    }
}
/// What every log of a range must be before it is read: in a block of the range asked for,
/// emitted by the contract, and not removed (a reorg under way). Returns its block.
///
/// # Errors
/// [`FollowError::BadData`] for a log without a block number, outside the range or from another
/// address; [`FollowError::ReorgInProgress`] for a removed one.
pub(super) fn log_block(
    log: &Log,
    range: RangeInclusive<u64>,
    contract: Address,
) -> Result<u64, FollowError> {
    let number = log.block_number.ok_or_else(|| FollowError::BadData {
        block: *range.start(),
        reason: "a log without a block number".into(),
    })?;
    if !range.contains(&number) {
        return Err(FollowError::BadData {
            block: number,
            reason: format!(
                "log outside the requested blocks {}..={}",
                range.start(),
                range.end()
            ),
        });
    }
    if log.address() != contract {
        return Err(FollowError::BadData {
            block: number,
            reason: format!("log from {} instead of the contract", log.address()),
        });
    }
    if log.removed {
        return Err(FollowError::ReorgInProgress { block: number });
    }
    Ok(number)
}
