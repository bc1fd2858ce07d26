//! The persistent tree's checkpoints, undo frames and root window: the history model suite with
//! drop-and-reopen steps, on the in-memory store and on real sled.

use integration_tests::cases;
use proptest::prelude::*;
use tree_core::testing::{arb_history_ops, check_history_ops, mix_leaf, MixHasher};
use tree_core::{Depth, History, HistoryConfig, MerkleTree, MerkleTreeExt, RehashConfig};
use tree_sled::{MemStore, SledConfig, SledMerkleTree, SledStore};

type MemTree = SledMerkleTree<MixHasher, MemStore>;

fn open_mem(store: MemStore, depth: Depth, parallel: bool) -> MemTree {
    let cfg = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
    SledMerkleTree::open_store(store, depth, cfg, 3).unwrap()
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
        (depth, ops) in (1u8..=4).prop_flat_map(|d| (Just(d), arb_history_ops(d, 24, mix_leaf))),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let sled = SledConfig::new(dir.path());
        let depth = Depth::new(depth).unwrap();
        let open = |sled: &SledConfig| {
            let store = SledStore::open(sled).unwrap();
            SledMerkleTree::<MixHasher>::open_store(store, depth, RehashConfig::default(), 2).unwrap()
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
