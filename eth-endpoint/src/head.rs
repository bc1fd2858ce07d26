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
    /// Told when the head moves (the follower's [`waker`](follower::Follower::waker)), so the
    /// block is applied at once and `latest` is answered here again soon after.
    wake: Option<Arc<tokio::sync::Notify>>,
    /// Told when the head moves or the tree does: what a `latest` call waiting for the two to
    /// meet waits on (see [`Self::next_move`]).
    moved: tokio::sync::Notify,
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
            wake: None,
            moved: tokio::sync::Notify::new(),
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
        self.record(number, hash, asked, true, |_| true);
    }

    /// The follower applied block `number` (`hash`), which was the node's head when it was
    /// asked at `asked`: taken only past the head already seen, so the watcher's newer answer
    /// (or its report of a block replaced at that height) always wins. Between two polls of the
    /// watcher, this is what makes the applied block `latest` at once.
    pub fn applied_head(&self, number: u64, hash: B256, asked: Instant) {
        self.record(number, hash, asked, false, |seen| {
            seen.is_none_or(|seen| number > seen.number)
        });
    }

    /// Tells the follower (through `wake`) when the head moves.
    #[must_use]
    pub fn waking(mut self, wake: Arc<tokio::sync::Notify>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Records (`number`, `hash`) asked at `asked` if `take` accepts the head seen before; with
    /// `wake`, wakes the follower when the head moved.
    fn record(
        &self,
        number: u64,
        hash: B256,
        asked: Instant,
        wake: bool,
        take: impl FnOnce(Option<SeenHead>) -> bool,
    ) {
        let since = asked.saturating_duration_since(self.epoch);
        let at_ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        if !take(*seen) {
            return;
        }
        let moved = seen.is_none_or(|s| (s.number, s.hash) != (number, hash));
        *seen = Some(SeenHead {
            number,
            hash,
            at_ms,
        });
        drop(seen);
        if moved {
            self.moved.notify_waiters();
        }
        if let Some(follower) = self.wake.as_ref().filter(|_| wake && moved) {
            follower.notify_one();
        }
    }

    /// The follower committed or rewound blocks: `latest` calls waiting for the tree look again.
    pub fn tree_moved(&self) {
        self.moved.notify_waiters();
    }

    /// Resolves at the next move of the head or the tree ([`Self::tree_moved`]). Pin it and
    /// `enable()` it before looking at the two, so a move in between is not missed.
    pub fn next_move(&self) -> tokio::sync::futures::Notified<'_> {
        self.moved.notified()
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
