//! A block's events as the newest contract's calls. Every tree-changing call stores its root
//! once (`RootStored`): `register` emits its lazy erasures' `MembershipErased`, then
//! `RootStored` (after the insert or the reuse of a freed index), then `MembershipRegistered`;
//! `eraseMemberships(ids, true)` emits its erasures, then one `RootStored` (every erased leaf
//! set to 0). Erasures in a call that stores no root are lazy and leave the tree as it is. A
//! transaction may hold several calls (a multicall, a smart account): lazy erasures, then a
//! full one, read as erasures followed by one `RootStored`; the full call's erasures are a
//! suffix of them, and which suffix the stored root decides when the block is committed
//! ([`commit_block`](crate::commit_block)). So no erasure needs a question to the
//! contract, and each call's root is checked.

use alloy::primitives::B256;

use crate::changes::BlockChanges;
use crate::members::MemberInfo;
use crate::profile::MembershipEvent;

/// One decoded log with the transaction it came from (index in the block, hash).
pub(crate) type CallEvent = (Option<(u64, B256)>, MembershipEvent);

/// The block's changes, and the root stored after each call, from its events in log order;
/// `next` is the tree's next free index before the block.
///
/// # Errors
/// A description of an event sequence the contract cannot produce: a registration that leaves
/// a gap or comes without its `RootStored`, an erasure of an index no member holds.
pub(crate) fn changes_by_call(
    events: impl IntoIterator<Item = CallEvent>,
    mut next: u64,
) -> Result<BlockChanges, String> {
    let mut changes = BlockChanges::new();
    // Erasures of the call being read (its transaction), not yet known lazy or full.
    let mut erased: Vec<u64> = Vec::new();
    let mut transaction = None;
    let mut events = events.into_iter().peekable();
    while let Some((tx, event)) = events.next() {
        if tx != transaction {
            // A call that ended without storing a root erased lazily.
            erased.clear();
            transaction = tx;
        }
        match event {
            MembershipEvent::Erased { index, id } => {
                if index >= next {
                    return Err(format!(
                        "erasure of index {index}, which no member holds (next free index {next})"
                    ));
                }
                erased.push(index);
                changes.member(id, None);
            }
            MembershipEvent::RootStored { root } => {
                match events.peek() {
                    // A registration's root, stored just before its event: its erasures were
                    // lazy.
                    Some(&(
                        next_tx,
                        MembershipEvent::Registered {
                            index,
                            leaf,
                            id,
                            rate_limit,
                        },
                    )) if next_tx == tx => {
                        if index > next {
                            return Err(format!(
                                "registration at index {index} leaves a gap: the next free index is {next}"
                            ));
                        }
                        if index == next {
                            next += 1;
                        }
                        changes.set(index, leaf);
                        register_member(&mut changes, id, rate_limit, index)?;
                        events.next();
                    }
                    // A full erasure's root: its erasures are a suffix of the transaction's
                    // uncovered ones (earlier calls may have erased lazily), which suffix the
                    // root decides when the block is committed.
                    _ => {
                        changes.erasures_stored(&erased, root);
                        erased.clear();
                        continue;
                    }
                }
                erased.clear();
                changes.root_stored(root);
            }
            MembershipEvent::Registered { index, .. } => {
                return Err(format!(
                    "the registration at index {index} in transaction {} comes without its RootStored",
                    tx.map(|t| t.1).unwrap_or_default()
                ));
            }
        }
    }
    Ok(changes)
}

/// Member `id`'s entry, where the event carries its rate limit.
pub(crate) fn register_member(
    changes: &mut BlockChanges,
    id: hasher::Fr,
    rate_limit: Option<u32>,
    index: u64,
) -> Result<(), String> {
    if let Some(rate_limit) = rate_limit {
        if rate_limit == 0 {
            return Err("a registration with rate limit 0".into());
        }
        let index = u32::try_from(index).map_err(|_| format!("index {index}"))?;
        changes.member(id, Some(MemberInfo { rate_limit, index }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::changes::LeafChange;
    use hasher::Fr;

    fn tx(i: u64) -> Option<(u64, B256)> {
        Some((i, B256::with_last_byte(u8::try_from(i).unwrap())))
    }

    fn stored(r: u64) -> MembershipEvent {
        MembershipEvent::RootStored { root: Fr::from(r) }
    }

    fn registered(index: u64, leaf: u64) -> MembershipEvent {
        MembershipEvent::Registered {
            index,
            leaf: Fr::from(leaf),
            id: Fr::from(leaf + 1000),
            rate_limit: Some(1),
        }
    }

    #[test]
    fn full_erasures_are_the_calls_that_store_a_root_without_registering() {
        let erased = |index| MembershipEvent::Erased {
            index,
            id: Fr::from(index + 1000),
        };
        let events = [
            // register with a lazy erasure of 0, reusing index 0
            (tx(0), erased(0)),
            (tx(0), stored(100)),
            (tx(0), registered(0, 9)),
            // a lazy erasure alone
            (tx(1), erased(1)),
            // a full erasure of two
            (tx(2), erased(2)),
            (tx(2), erased(3)),
            (tx(2), stored(101)),
        ];
        let changes = changes_by_call(events, 4).unwrap();
        assert_eq!(
            changes.ops(),
            [
                LeafChange::Set(0, Fr::from(9u64)),
                LeafChange::Delete(2),
                LeafChange::Delete(3)
            ]
        );
        assert_eq!(
            changes.stored_roots().collect::<Vec<_>>(),
            [Fr::from(100u64), Fr::from(101u64)]
        );
        // Every erasure leaves the index, lazy or full; the registration enters it.
        let member = |id: u64| Fr::from(id);
        assert_eq!(
            changes.members(),
            [
                (member(1000), None),
                (
                    member(1009),
                    Some(MemberInfo {
                        rate_limit: 1,
                        index: 0
                    })
                ),
                (member(1001), None),
                (member(1002), None),
                (member(1003), None),
            ]
        );
    }

    #[test]
    fn impossible_sequences_are_refused() {
        assert!(changes_by_call([(tx(0), registered(0, 1))], 0).is_err());
        assert!(changes_by_call([(tx(0), registered(0, 1)), (tx(0), stored(1))], 0).is_err());
        assert!(changes_by_call([(tx(1), stored(1)), (tx(0), registered(0, 1))], 0).is_err());
        assert!(changes_by_call([(tx(0), stored(1)), (tx(0), registered(2, 1))], 0).is_err());
        assert!(changes_by_call(
            [(
                tx(0),
                MembershipEvent::Erased {
                    index: 0,
                    id: Fr::from(1u64),
                },
            )],
            0
        )
        .is_err());
        let many = [
            (tx(0), stored(1)),
            (tx(0), registered(0, 1)),
            (tx(0), stored(2)),
            (tx(0), registered(1, 2)),
        ];
        let changes = changes_by_call(many, 0).unwrap();
        assert_eq!(changes.stored_roots().count(), 2);
        assert_eq!(changes.ops().len(), 2);
    }

    #[test]
    fn erasures_of_a_call_that_stored_no_root_stay_lazy() {
        let erased = |index| MembershipEvent::Erased {
            index,
            id: Fr::from(index + 1000),
        };
        // A lazy erasure in one transaction, a full one of another index in the next.
        let events = [(tx(0), erased(0)), (tx(1), erased(1)), (tx(1), stored(5))];
        let changes = changes_by_call(events, 2).unwrap();
        assert_eq!(changes.ops(), [LeafChange::Delete(1)]);
    }
}
