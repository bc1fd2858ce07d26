//! Committing a block: its changes, checkpoint and metadata in one atomic store commit, only
//! when every root the contract stored within it, and its root after it, are the tree's.

use std::borrow::Cow;

use hasher::{Fr, PoseidonHasher};
use tree_engines::SharedDbTree as SharedTree;

use crate::block::{fr_hex, BlockMeta};
use crate::changes::BlockChanges;
use crate::FollowError;

/// Why [`commit_block`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The root after the block would not be the expected one.
    #[error("root after block {block} would be {ours}, expected {expected}")]
    RootMismatch {
        /// The block.
        block: u64,
        /// Ours, 0x hex.
        ours: String,
        /// Expected, 0x hex.
        expected: String,
    },
    /// The tree refused the block (a rule) or the store failed.
    #[error(transparent)]
    Tree(#[from] tree_engines::DbTreeError),
}

impl From<CommitError> for FollowError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::RootMismatch {
                block,
                ours,
                expected,
            } => Self::RootMismatch {
                block,
                ours,
                contract: expected,
            },
            CommitError::Tree(e) => Self::Tree(e),
        }
    }
}

/// Lands a block: `changes`, `meta` as the tree's metadata and a checkpoint named by the block
/// number, in one atomic store commit. Every root the contract stored within the block is
/// compared with the tree's root after the same changes, and with `expected_root` the root
/// after the block; nothing is written when one differs. A full erasure that does not give its
/// stored root with all the deletions before it is tried with each shorter suffix of them
/// (the transaction's earlier calls erased lazily): the one whose root matches is taken, found
/// with one more hashing of the block (every suffix's root in one pass). Returns the new root.
///
/// # Errors
/// [`CommitError`]: a tree rule, a store failure, a root mismatch; nothing is written.
pub fn commit_block(
    tree: &SharedTree<PoseidonHasher>,
    meta: &BlockMeta,
    changes: &BlockChanges,
    expected_root: Option<Fr>,
) -> Result<Fr, CommitError> {
    let mut changes = Cow::Borrowed(changes);
    loop {
        let mismatch = match try_commit(tree, meta, &changes, expected_root)? {
            Ok(root) => return Ok(root),
            Err(mismatch) => mismatch,
        };
        // Only a stored root that closes a full erasure can be met by another split.
        let split = match mismatch.step {
            Some(step) => resolve_erasure(tree, meta, &changes, step)?.map(|lazy| (step, lazy)),
            None => None,
        };
        let Some((step, lazy)) = split else {
            return Err(CommitError::RootMismatch {
                block: meta.number,
                ours: fr_hex(&mismatch.ours),
                expected: fr_hex(&mismatch.expected),
            });
        };
        changes = Cow::Owned(changes.with_lazy_erasures(step, lazy));
    }
}

/// Where a block's roots first differed from the contract's: at stored root `step` (`None`:
/// the root after the block).
struct Mismatch {
    step: Option<usize>,
    ours: Fr,
    expected: Fr,
}

/// One attempt of [`commit_block`]: committed (the new root), or the first mismatch.
fn try_commit(
    tree: &SharedTree<PoseidonHasher>,
    meta: &BlockMeta,
    changes: &BlockChanges,
    expected_root: Option<Fr>,
) -> Result<Result<Fr, Mismatch>, CommitError> {
    let mut new_root = Fr::from(0u64);
    // Without stored roots the block is one step, and its root the one compared.
    let outcome =
        tree.apply_checkpointed_steps_if(changes.to_steps(meta), meta.number, |roots| {
            for (step, (ours, stored)) in roots.iter().zip(changes.stored_roots()).enumerate() {
                if *ours != stored {
                    return Err(Mismatch {
                        step: Some(step),
                        ours: *ours,
                        expected: stored,
                    });
                }
            }
            new_root = roots.last().copied().unwrap_or_default();
            match expected_root {
                Some(expected) if expected != new_root => Err(Mismatch {
                    step: None,
                    ours: new_root,
                    expected,
                }),
                _ => Ok(()),
            }
        })?;
    Ok(outcome.map(|()| new_root))
}

/// For a full erasure at stored root `step` whose deletions did not give the stored root: how
/// many of its first deletions were lazy erasures of earlier calls, the one split whose root
/// is the stored root (`None`: no split gives it, or the step is no such erasure). Hashes the
/// block up to the step once, writes nothing.
fn resolve_erasure(
    tree: &SharedTree<PoseidonHasher>,
    meta: &BlockMeta,
    changes: &BlockChanges,
    step: usize,
) -> Result<Option<usize>, CommitError> {
    let (Some(probe), Some(k), Some(stored)) = (
        changes.suffix_probe(step),
        changes.undecided(step),
        changes.stored_roots().nth(step),
    ) else {
        return Ok(None);
    };
    let mut lazy = None;
    // Never accepted: the roots are read and nothing is published.
    let _ = tree.apply_checkpointed_steps_if(probe, meta.number, |roots| {
        // The last k roots are those after the last 1, 2, … k deletions.
        let suffixes = &roots[roots.len().saturating_sub(k)..];
        lazy = suffixes
            .iter()
            .position(|root| *root == stored)
            .map(|full| k - (full + 1));
        Err(())
    })?;
    Ok(lazy.filter(|&lazy| lazy > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tree_engines::DbTree;

    /// One transaction, two calls: `eraseMemberships([a])` (lazy, no root) then
    /// `eraseMemberships([b, c], true)` (full, one `RootStored`): only b and c leave the tree,
    /// found from the stored root; a root no split gives is refused and nothing is written.
    #[test]
    fn a_full_erasure_after_lazy_ones_in_one_transaction_is_found_by_its_root() {
        use crate::calls::changes_by_call;
        use crate::profile::MembershipEvent;
        use tree_core::{Depth, MerkleTree};
        use tree_engines::DbConfig;

        let open = |dir: &std::path::Path| {
            let tree = DbTree::<PoseidonHasher>::open(&DbConfig::new(dir), Depth::new(20).unwrap())
                .unwrap();
            SharedTree::new(tree)
        };
        let (dir, scratch_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (tree, scratch) = (open(dir.path()), open(scratch_dir.path()));
        let mut first = BlockChanges::new();
        for index in 0..5u64 {
            first.set(index, Fr::from(index + 11));
        }
        for t in [&tree, &scratch] {
            commit_block(t, &BlockMeta::number(1), &first, None).unwrap();
        }
        // The root after deleting only b = 2 and c = 3.
        let mut only_full = BlockChanges::new();
        only_full.delete(2).delete(3);
        let root = commit_block(&scratch, &BlockMeta::number(2), &only_full, None).unwrap();

        let tx = Some((0, alloy::primitives::B256::ZERO));
        let erased = |index: u64| {
            (
                tx,
                MembershipEvent::Erased {
                    index,
                    id: Fr::from(index + 100),
                },
            )
        };
        let stored = |root: Fr| (tx, MembershipEvent::RootStored { root });
        let events = [erased(1), erased(2), erased(3), stored(root)];
        let changes = changes_by_call(events, 5).unwrap();

        // A root that no split gives: refused, nothing written.
        let mut wrong =
            changes_by_call([erased(1), erased(2), erased(3), stored(Fr::from(7u64))], 5).unwrap();
        let before = tree.read(MerkleTree::root);
        assert!(matches!(
            commit_block(&tree, &BlockMeta::number(2), &wrong, None),
            Err(CommitError::RootMismatch { .. })
        ));
        assert_eq!(tree.read(MerkleTree::root), before);
        wrong = changes;
        let committed = commit_block(&tree, &BlockMeta::number(2), &wrong, None).unwrap();
        assert_eq!(committed, root);
        let leaves: Vec<Fr> = (0..5).map(|i| tree.read(|t| t.get(i)).unwrap()).collect();
        let zero = Fr::from(0u64);
        assert_eq!(
            leaves,
            [
                Fr::from(11u64),
                Fr::from(12u64),
                zero,
                zero,
                Fr::from(15u64)
            ],
            "the lazily erased leaf stays"
        );
        // All of a transaction's erasures full (the usual case) still lands as one attempt.
        let mut all = BlockChanges::new();
        all.delete(0).delete(4);
        let root = commit_block(&scratch, &BlockMeta::number(3), &all, None).unwrap();
        let changes = changes_by_call([erased(0), erased(4), stored(root)], 5).unwrap();
        assert_eq!(
            commit_block(&tree, &BlockMeta::number(3), &changes, None).unwrap(),
            root
        );
    }
}
