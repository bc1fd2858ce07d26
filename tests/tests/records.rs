//! Records (the keyed side table a chain follower keeps its members by id in) on every store:
//! written with leaves in one commit, recorded in the open checkpoint's undo frame, restored by
//! a rewind, dropped with pruned checkpoints and kept across reopens; and bad keys refused.

use integration_tests::{cases, tally};
use proptest::prelude::*;
use tree_core::testing::{arb_record_ops, check_records, MixHasher};
use tree_core::{
    AsTreeError, Depth, FullMerkleTree, HistoryConfig, MerkleTree, OptimalMerkleTree, RehashConfig,
    TreeError, UpdateBatch, MAX_RECORD_KEY,
};
use tree_redb::{RedbConfig, RedbMerkleTree};
use tree_sled::{SledConfig, SledMerkleTree, SledStore};

fn history() -> impl Strategy<Value = HistoryConfig> {
    (0usize..4).prop_map(|max_checkpoints| HistoryConfig {
        max_checkpoints,
        root_window: 2,
    })
}

fn depth() -> Depth {
    Depth::new(4).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    #[test]
    fn memory_stores_keep_records_with_the_tree(config in history(), ops in arb_record_ops(40)) {
        let _case = tally!("memory_stores_keep_records_with_the_tree", ops.len());
        check_records(OptimalMerkleTree::<MixHasher>::new(depth()), config, &ops, |t| t);
        let full = FullMerkleTree::<MixHasher>::with_config(depth(), RehashConfig::default()).unwrap();
        check_records(full, config, &ops, |t| t);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(12).min(24)))]

    #[test]
    fn sled_keeps_records_with_the_tree_across_reopens(config in history(), ops in arb_record_ops(30)) {
        let _case = tally!("sled_keeps_records_with_the_tree_across_reopens", ops.len());
        let dir = tempfile::tempdir().unwrap();
        let sled = SledConfig::new(dir.path());
        let open = |sled: &SledConfig| {
            let store = SledStore::open(sled).unwrap();
            SledMerkleTree::<MixHasher>::open_store(store, depth(), RehashConfig::default(), tree_core::persistent::NodeCache::top(2)).unwrap()
        };
        let tree = check_records(open(&sled), config, &ops, |tree| {
            drop(tree);
            open(&sled)
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }

    #[test]
    fn redb_keeps_records_with_the_tree_across_reopens(config in history(), ops in arb_record_ops(30)) {
        let _case = tally!("redb_keeps_records_with_the_tree_across_reopens", ops.len());
        let dir = tempfile::tempdir().unwrap();
        let redb = RedbConfig::new(dir.path()).cached_levels(2).cached_band_chunks(0);
        let open = |redb: &RedbConfig| RedbMerkleTree::<MixHasher>::open(redb, depth()).unwrap();
        let tree = check_records(open(&redb), config, &ops, |tree| {
            drop(tree);
            open(&redb)
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }
}

/// An empty or over-long key refuses the whole batch: its leaves and other records do not land.
#[test]
fn bad_record_keys_refuse_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut tree =
        RedbMerkleTree::<MixHasher>::open(&RedbConfig::new(dir.path()), depth()).unwrap();
    for bad in [Vec::new(), vec![7u8; MAX_RECORD_KEY + 1]] {
        let mut batch = UpdateBatch::<MixHasher>::new();
        batch.set(0, 1).put_record(b"good", vec![1]);
        batch.put_record(&bad, vec![2]);
        let err = tree.apply(batch).unwrap_err();
        assert_eq!(
            err.as_tree_error(),
            Some(&TreeError::RecordKey { len: bad.len() })
        );
        assert_eq!(tree.next_index(), 0);
        assert_eq!(tree.record(b"good").unwrap(), None);
    }
    let mut batch = UpdateBatch::<MixHasher>::new();
    batch.put_record(&[7u8; MAX_RECORD_KEY], vec![3]);
    tree.apply(batch).unwrap();
    assert_eq!(tree.record(&[7u8; MAX_RECORD_KEY]).unwrap(), Some(vec![3]));
}
