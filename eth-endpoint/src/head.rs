//! What `latest` means here, and which blocks the node has replaced: the node's head as last
//! seen (number and hash, kept by [`watch_head`]), and the one rule ([`block_holds`]) that says
//! whether the mirror's block answers a call at a given block parameter.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::B256;
use follower::ChainClient;

use crate::call::BlockTag;

/// The node's head as last seen (number and hash), and when: what `latest` means here, and what
/// tells a block the node has replaced at the same height. [`watch_head`] keeps it.
#[derive(Debug)]
pub struct HeadView {
    epoch: Instant,
    seen: Mutex<Option<SeenHead>>,
}

/// One observation of the node's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SeenHead {
    number: u64,
    hash: B256,
    /// Milliseconds after the view's epoch when the node was asked.
    at_ms: u64,
}

impl Default for HeadView {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            seen: Mutex::new(None),
        }
    }
}

impl HeadView {
    /// The node was asked its head now and answered block `number` with `hash`.
    pub fn observed(&self, number: u64, hash: B256) {
        self.observed_at(number, hash, Instant::now());
    }

    /// The node was asked its head at `asked` and answered block `number` with `hash`: the
    /// answer is as old as the question, however long the node took.
    pub fn observed_at(&self, number: u64, hash: B256, asked: Instant) {
        let since = asked.saturating_duration_since(self.epoch);
        let at_ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some(SeenHead {
                number,
                hash,
                at_ms,
            });
        }
    }

    /// The node did not answer: its head is no longer known.
    pub fn forget(&self) {
        if let Ok(mut seen) = self.seen.lock() {
            *seen = None;
        }
    }

    /// The head's number and hash, if seen within `max_age`.
    #[must_use]
    pub fn fresh(&self, max_age: Duration) -> Option<(u64, B256)> {
        let seen = (*self.seen.lock().ok()?)?;
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let max = u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX);
        (now.saturating_sub(seen.at_ms) <= max).then_some((seen.number, seen.hash))
    }
}

/// Whether the mirror's block (`number`, `hash`) answers a call at `block`, given the node's
/// fresh head (`None`: not known). `latest` needs the head to be exactly that block. A number or
/// a hash needs no head, unless the head contradicts it (the node replaced the block at the same
/// height); `requireCanonical` needs a head at or past the block that does not contradict it. A
/// reorg deeper than the head's block is seen by the follower's next step.
#[must_use]
pub fn block_holds(block: BlockTag, number: u64, hash: B256, head: Option<(u64, B256)>) -> bool {
    let replaced = head.is_some_and(|(n, h)| n == number && h != hash);
    match block {
        BlockTag::Latest => head == Some((number, hash)),
        BlockTag::Number(n) => n == number && !replaced,
        BlockTag::Hash {
            hash: h,
            require_canonical,
        } => {
            h == hash && !replaced && (!require_canonical || head.is_some_and(|(n, _)| n >= number))
        }
    }
}

/// Asks the node's head (number and hash) every `every` and records it in `head` (forgets it
/// while the node does not answer), so `latest` is answered here only while the tree's block is
/// the node's head. Runs until the task is dropped.
pub async fn watch_head(client: ChainClient, head: Arc<HeadView>, every: Duration) {
    loop {
        let asked = Instant::now();
        match client.head_block().await {
            Ok(block) => head.observed_at(block.number, block.hash, asked),
            Err(_) => head.forget(),
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Same-height reorgs: a block the node replaced at its height answers nothing here, even
    /// by number or hash; `latest` needs exactly the mirror's block at the head.
    #[test]
    fn a_block_replaced_at_its_height_is_not_answered() {
        let (ours, theirs) = (B256::repeat_byte(1), B256::repeat_byte(2));
        let by_hash = |require_canonical| BlockTag::Hash {
            hash: ours,
            require_canonical,
        };
        let cases = [
            // (block, head, answered here)
            (BlockTag::Latest, Some((7, ours)), true),
            (BlockTag::Latest, Some((7, theirs)), false),
            (BlockTag::Latest, Some((8, theirs)), false),
            (BlockTag::Latest, None, false),
            (BlockTag::Number(7), Some((7, ours)), true),
            (BlockTag::Number(7), Some((7, theirs)), false),
            (BlockTag::Number(7), Some((8, theirs)), true),
            (BlockTag::Number(7), None, true),
            (BlockTag::Number(6), Some((7, ours)), false),
            (by_hash(false), Some((7, theirs)), false),
            (by_hash(false), None, true),
            (by_hash(true), Some((7, ours)), true),
            (by_hash(true), Some((7, theirs)), false),
            (by_hash(true), Some((9, theirs)), true),
            (by_hash(true), None, false),
        ];
        for (block, head, answered) in cases {
            assert_eq!(
                block_holds(block, 7, ours, head),
                answered,
                "{block:?} at {head:?}"
            );
        }
        let head = HeadView::default();
        assert_eq!(head.fresh(Duration::from_secs(1)), None);
        head.observed(7, ours);
        assert_eq!(head.fresh(Duration::from_secs(1)), Some((7, ours)));
        head.forget();
        assert_eq!(head.fresh(Duration::from_secs(1)), None);
    }
}
