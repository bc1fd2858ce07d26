//! The persistent tree's checkpoints, undo frames and root window: the history model suite with
//! drop-and-reopen steps, on the in-memory store and on real sled.

use integration_tests::cases;
use proptest::prelude::*;
use tree_core::testing::{
    arb_history_ops, check_apply_checkpointed, check_history_ops, mix_leaf, MixHasher,
};
use tree_core::{Depth, History, HistoryConfig, MerkleTree, MerkleTreeExt, RehashConfig};
use tree_sled::{MemStore, SledConfig, SledMerkleTree, SledStore};

type MemTree = SledMerkleTree<MixHasher, MemStore>;

fn open_mem(store: MemStore, depth: Depth, parallel: bool) -> MemTree {
    let cfg = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
    SledMerkleTree::open_store(store, depth, cfg, tree_core::persistent::NodeCache::top(3)).unwrap()
}

fn history_config() -> impl Strategy<Value = HistoryConfig> {
    (0usize..5, 1usize..5).prop_map(|(max_checkpoints, root_window)| HistoryConfig {
        max_checkpoints,
        root_window,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(128)))]

    /// Checkpoints, frames, retention and the window survive every restart.
    #[test]
    fn mem_store_history_matches_model_across_restarts(
        config in history_config(),
        parallel in any::<bool>(),
        (depth, ops) in (1u8..=5).prop_flat_map(|d| (Just(d), arb_history_ops(d, 50, mix_leaf))),
    ) {
        let _case = integration_tests::tally!("mem_store_history_matches_model_across_restarts", ops.len());
        let depth = Depth::new(depth).unwrap();
        let tree = open_mem(MemStore::new(), depth, parallel);
        let tree = check_history_ops(tree, config, &ops, |tree| {
            let store = tree.store().clone();
            drop(tree);
            open_mem(store, depth, parallel)
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(12).min(24)))]

    #[test]
    fn sled_history_matches_model_across_restarts(
        config in history_config(),
        band_chunks in 0u32..3,
        (depth, ops) in (1u8..=9).prop_flat_map(|d| (Just(d), arb_history_ops(d, 24, mix_leaf))),
    ) {
        let _case = integration_tests::tally!("sled_history_matches_model_across_restarts", ops.len());
        let dir = tempfile::tempdir().unwrap();
        let sled = SledConfig::new(dir.path());
        let depth = Depth::new(depth).unwrap();
        // With a budget of 1 or 2 chunks the cached bands move as the tree grows and rewinds.
        let cache = tree_core::persistent::NodeCache { top_levels: 2, band_chunks };
        let open = |sled: &SledConfig| {
            let store = SledStore::open(sled).unwrap();
            SledMerkleTree::<MixHasher>::open_store(store, depth, RehashConfig::default(), cache).unwrap()
        };
        let tree = check_history_ops(open(&sled), config, &ops, |tree| {
            drop(tree);
            open(&sled)
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }
}

/// Rewinding removes every undo record it consumed, and pruning removes the pruned frames: the
/// store holds history only for retained checkpoints.
#[test]
fn undo_records_are_consumed_by_rewind_and_pruning() {
    let depth = Depth::new(12).unwrap();
    let mut tree = open_mem(MemStore::new(), depth, false);
    tree.set_history_config(HistoryConfig {
        max_checkpoints: 2,
        root_window: 3,
    })
    .unwrap();
    tree.checkpoint(1).unwrap();
    tree.set_range(0, (1..=64).collect::<Vec<u64>>()).unwrap();
    let (records_one, _) = tree.history_size().unwrap();
    assert!(records_one > 0);
    tree.checkpoint(2).unwrap();
    tree.set(3, 77).unwrap();
    tree.checkpoint(3).unwrap(); // prunes checkpoint 1 and its frame
    let (records, _) = tree.history_size().unwrap();
    assert!(records < records_one, "{records} >= {records_one}");
    tree.rewind_to(2).unwrap();
    assert_eq!(tree.history_size().unwrap(), (0, 0));
    assert_eq!(tree.get(3).unwrap(), 4);
    // Settings persist.
    let store = tree.store().clone();
    drop(tree);
    let tree = open_mem(store, depth, false);
    assert_eq!(
        tree.history_config(),
        HistoryConfig {
            max_checkpoints: 2,
            root_window: 3
        }
    );
    assert_eq!(tree.checkpoints().unwrap().len(), 1);
}

/// Every commit of a history run fails in turn: a failed apply, checkpoint, pruning or rewind
/// leaves the tree (in memory and after reopen) exactly as before the call, and the run then
/// continues to the model's final state.
#[test]
fn failed_commits_in_checkpoints_and_rewinds_change_nothing() {
    use integration_tests::{FaultyStore, Injected};
    use tree_sled::SledTreeError;

    let depth = Depth::new(6).unwrap();
    let config = HistoryConfig {
        max_checkpoints: 3,
        root_window: 2,
    };
    type Step = fn(&mut dyn FnMut(Call));
    enum Call {
        Apply(u64),
        Checkpoint(u64),
        Rewind(u64),
    }
    let script: Step = |run| {
        for b in 1..=6u64 {
            run(Call::Apply(b));
            run(Call::Checkpoint(b));
            if b % 3 == 0 {
                run(Call::Rewind(b - 1));
            }
        }
    };
    let observe = |t: &dyn Fn() -> (u64, u64, Vec<u8>, Vec<u64>)| t();
    let mut injected_total = 0;
    // Commit 0 creates the store and commit 1 stores the history settings.
    for fail_at in 2..40 {
        let store = FaultyStore::new(fail_at);
        let mut tree = SledMerkleTree::<MixHasher, _>::open_store(
            store.clone(),
            depth,
            RehashConfig::default(),
            tree_core::persistent::NodeCache::top(2),
        )
        .unwrap();
        tree.set_history_config(config).unwrap();
        let mut model = tree_core::OptimalMerkleTree::<MixHasher>::new(depth);
        model.set_history_config(config).unwrap();
        let mut failures = 0;
        script(&mut |call| {
            let state = |t: &SledMerkleTree<MixHasher, FaultyStore>| {
                observe(&|| {
                    (
                        t.root(),
                        t.next_index(),
                        t.metadata().unwrap(),
                        t.checkpoints().unwrap().iter().map(|c| c.id).collect(),
                    )
                })
            };
            let before = state(&tree);
            let result = match call {
                Call::Apply(b) => {
                    let start = tree.next_index();
                    let leaves: Vec<u64> = (0..5).map(|i| b * 10 + i).collect();
                    let got = tree.set_range(start, leaves.clone());
                    if got.is_ok() {
                        model.set_range(start, leaves).unwrap();
                    }
                    got
                }
                Call::Checkpoint(b) => {
                    let got = tree.checkpoint(b);
                    if got.is_ok() {
                        model.checkpoint(b).unwrap();
                    }
                    got
                }
                Call::Rewind(id) => {
                    let got = tree.rewind_to(id);
                    if got.is_ok() || matches!(got, Err(SledTreeError::Tree(_))) {
                        let _ = model.rewind_to(id);
                    }
                    got
                }
            };
            if let Err(SledTreeError::Store(Injected)) = result {
                failures += 1;
                assert_eq!(state(&tree), before, "fail_at {fail_at}: in memory");
                let reopened = SledMerkleTree::<MixHasher, _>::open_store(
                    store.inner.clone(),
                    depth,
                    RehashConfig::default(),
                    tree_core::persistent::NodeCache::top(2),
                )
                .unwrap();
                let reopened_state = (
                    reopened.root(),
                    reopened.next_index(),
                    reopened.metadata().unwrap(),
                    reopened
                        .checkpoints()
                        .unwrap()
                        .iter()
                        .map(|c| c.id)
                        .collect(),
                );
                assert_eq!(reopened_state, before, "fail_at {fail_at}: after reopen");
            }
        });
        assert!(failures <= 1);
        injected_total += failures;
        assert_eq!(tree.root(), model.root(), "fail_at {fail_at}");
        assert_eq!(
            tree.empty_leaves_indices().unwrap(),
            model.empty_leaves_indices().unwrap()
        );
        let ids =
            |c: Vec<tree_core::CheckpointInfo<u64>>| c.iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(
            ids(tree.checkpoints().unwrap()),
            ids(model.checkpoints().unwrap())
        );
    }
    // 6 applies, 6 checkpoints (3 of them pruning) and 2 rewinds: each commit failed once.
    assert_eq!(injected_total, 14);
}

/// `apply_checkpointed` (one store batch) leaves exactly the state, checkpoints and undo frames
/// of `apply` then `checkpoint` (two), with and without pruning, and rewinds the same.
#[test]
fn apply_checkpointed_equals_apply_then_checkpoint() {
    let depth = Depth::new(8).unwrap();
    for max_checkpoints in [1, 2, 5] {
        let mut one = open_mem(MemStore::new(), depth, false);
        let mut two = open_mem(MemStore::new(), depth, false);
        let mut three = open_mem(MemStore::new(), depth, false);
        check_apply_checkpointed(&mut one, &mut two, &mut three, max_checkpoints, |t| {
            t.history_size().unwrap()
        });
        // Reopened, the checkpoints are there.
        let store = one.store().clone();
        drop(one);
        let one = open_mem(store, depth, false);
        assert_eq!(one.checkpoints().unwrap(), two.checkpoints().unwrap());
    }
}
