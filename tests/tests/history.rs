//! Checkpoints, rewind and the root window: every tree against a model that keeps full copies.

use integration_tests::cases;
use proptest::prelude::*;
use tree_core::testing::{
    arb_history_ops, check_apply_checkpointed, check_history_ops, mix_leaf, MixHasher,
};
use tree_core::{
    Depth, FullMerkleTree, History, HistoryConfig, MerkleTree, MerkleTreeExt, OptimalMerkleTree,
    RehashConfig, TreeError,
};

fn history_config() -> impl Strategy<Value = HistoryConfig> {
    (0usize..5, 1usize..5).prop_map(|(max_checkpoints, root_window)| HistoryConfig {
        max_checkpoints,
        root_window,
    })
}

macro_rules! history_suite {
    ($name:ident, $make:expr) => {
        mod $name {
            use super::*;

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(cases(128)))]

                #[test]
                fn matches_model_with_full_copies(
                    config in history_config(),
                    parallel in any::<bool>(),
                    (depth, ops) in (1u8..=5)
                        .prop_flat_map(|d| (Just(d), arb_history_ops(d, 50, mix_leaf))),
                ) {
                    let _case = integration_tests::tally!("matches_model_with_full_copies", ops.len());
                    let rehash = RehashConfig::with_min_parallel_nodes(
                        if parallel { 1 } else { usize::MAX },
                    );
                    let make = $make;
                    check_history_ops(make(Depth::new(depth).unwrap(), rehash), config, &ops, |t| t);
                }
            }
        }
    };
}

history_suite!(optimal, |d, c| OptimalMerkleTree::<MixHasher>::with_config(
    d, c
));
history_suite!(full, |d, c| FullMerkleTree::<MixHasher>::with_config(d, c)
    .unwrap());

/// A chain-follower's day: blocks with checkpoints, a reorg of two blocks, replay, proofs
/// against the previous block's root.
#[test]
fn reorg_of_two_blocks_restores_the_tree_exactly() {
    let depth = Depth::new(10).unwrap();
    let mut tree = OptimalMerkleTree::<MixHasher>::new(depth);
    let mut roots = Vec::new();
    for block in 1..=5u64 {
        let start = tree.next_index();
        tree.set_range(start, (0..8).map(|i| block * 100 + i))
            .unwrap();
        if block > 2 {
            tree.delete(block).unwrap();
        }
        tree.set_metadata(&block.to_be_bytes()).unwrap();
        tree.checkpoint(block).unwrap();
        roots.push(tree.root());
    }
    let at_three = {
        let mut copy = OptimalMerkleTree::<MixHasher>::new(depth);
        for block in 1..=3u64 {
            copy.set_range(copy.next_index(), (0..8).map(|i| block * 100 + i))
                .unwrap();
            if block > 2 {
                copy.delete(block).unwrap();
            }
        }
        copy
    };
    assert!(tree.is_acceptable_root(&roots[3]).unwrap());
    // Leaf 20 (block 3) is unchanged since checkpoint 4; leaf 33 (block 5) was empty then.
    let old = tree.proof_at(&roots[3], 20).unwrap();
    assert_eq!(old.compute_root(&tree.get(20).unwrap()), roots[3]);
    let old = tree.proof_at(&roots[3], 33).unwrap();
    assert_eq!(old.compute_root(&0), roots[3]);
    assert_ne!(tree.proof(33).unwrap(), old);

    tree.rewind_to(3).unwrap();
    assert_eq!(tree.root(), roots[2]);
    assert_eq!(tree.root(), at_three.root());
    assert_eq!(tree.next_index(), 24);
    assert_eq!(tree.empty_leaves_indices().unwrap(), vec![3]);
    assert_eq!(tree.metadata().unwrap(), 3u64.to_be_bytes());
    assert!(!tree.is_acceptable_root(&roots[4]).unwrap());
    assert_eq!(tree.proof_at(&roots[4], 0), Err(TreeError::RootNotInWindow));
    assert_eq!(
        tree.checkpoint(3),
        Err(TreeError::CheckpointNotIncreasing { id: 3, last: 3 })
    );
    tree.set(24, 999).unwrap();
    tree.checkpoint(4).unwrap();
    assert_ne!(tree.root(), roots[3]);
    assert_eq!(
        tree.rewind_to(9),
        Err(TreeError::UnknownCheckpoint {
            id: 9,
            oldest: Some(1)
        })
    );
}

/// Retention bounds memory: undo frames cost what changed, and pruning drops them.
#[test]
fn retention_prunes_oldest_checkpoints_and_their_frames() {
    let depth = Depth::new(16).unwrap();
    let mut tree = FullMerkleTree::<MixHasher>::new(depth).unwrap();
    tree.set_history_config(HistoryConfig {
        max_checkpoints: 3,
        root_window: 2,
    })
    .unwrap();
    for block in 0..10u64 {
        tree.checkpoint(block).unwrap();
        tree.set_range(tree.next_index(), (0..16).map(|i| block * 16 + i + 1))
            .unwrap();
    }
    let ids: Vec<u64> = tree.checkpoints().unwrap().iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![7, 8, 9]);
    assert!(tree.history_bytes() > 0);
    assert_eq!(
        tree.rewind_to(6),
        Err(TreeError::UnknownCheckpoint {
            id: 6,
            oldest: Some(7)
        })
    );
    tree.rewind_to(7).unwrap();
    assert_eq!(tree.next_index(), 7 * 16);
    tree.set_history_config(HistoryConfig {
        max_checkpoints: 0,
        root_window: 1,
    })
    .unwrap();
    assert!(tree.checkpoints().unwrap().is_empty());
    assert_eq!(tree.history_bytes(), 0);
    assert_eq!(tree.roots().unwrap(), vec![tree.root()]);
}

/// The in-memory trees share the engine's one-commit block path: `apply_checkpointed` leaves the
/// state, checkpoints and undo frames of `apply` then `checkpoint`, with and without pruning,
/// and rewinds the same; a batch prepared before another write is a `Conflict`.
#[test]
fn in_memory_apply_checkpointed_equals_apply_then_checkpoint() {
    use tree_core::UpdateBatch;
    let depth = Depth::new(8).unwrap();
    for max_checkpoints in [1, 2, 5] {
        let mut one = OptimalMerkleTree::<MixHasher>::new(depth);
        let mut two = OptimalMerkleTree::<MixHasher>::new(depth);
        let mut three = OptimalMerkleTree::<MixHasher>::new(depth);
        check_apply_checkpointed(&mut one, &mut two, &mut three, max_checkpoints, |t| {
            t.history_bytes()
        });
    }
    let mut tree = FullMerkleTree::<MixHasher>::new(depth).unwrap();
    let mut first = UpdateBatch::new();
    first.set(0, 1);
    let stale = tree.prepare(first.clone()).unwrap();
    tree.set(1, 2).unwrap();
    let root = tree.root();
    assert!(matches!(tree.publish(stale), Err(TreeError::Conflict)));
    assert_eq!(tree.root(), root);
    let fresh = tree.prepare(first).unwrap();
    tree.publish(fresh).unwrap();
    assert_eq!(tree.get(0).unwrap(), 1);
}
