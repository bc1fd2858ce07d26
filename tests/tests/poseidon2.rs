//! Poseidon2 under every tree shape: both compressions (`Poseidon2Hasher`, t = 2; and
//! `Poseidon2T3Hasher`, zkhash's t = 3) on the in-memory trees, on sled and on redb with
//! restarts, each against the naive reference after every operation; a database written with
//! one hash refuses to open with another.

use hasher::{Fr, Poseidon2Hasher, Poseidon2T3Hasher, PoseidonHasher};
use integration_tests::{cases, fr_leaf};
use proptest::prelude::*;
use tree_core::testing::{arb_ops, check_ops};
use tree_core::{
    Depth, FullMerkleTree, MerkleTree, MerkleTreeExt, OptimalMerkleTree, RehashConfig,
};
use tree_redb::{RedbConfig, RedbMerkleTree, RedbTreeError};
use tree_sled::{SledConfig, SledMerkleTree, SledTreeError};

fn config(parallel: bool) -> RehashConfig {
    RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(12)))]

    #[test]
    fn memory_trees_match_reference(parallel in any::<bool>(), ops in arb_ops(5, 24, fr_leaf)) {
        let depth = Depth::new(5).unwrap();
        check_ops(OptimalMerkleTree::<Poseidon2Hasher>::with_config(depth, config(parallel)), &ops, |t| t);
        check_ops(FullMerkleTree::<Poseidon2Hasher>::with_config(depth, config(parallel)).unwrap(), &ops, |t| t);
        check_ops(OptimalMerkleTree::<Poseidon2T3Hasher>::with_config(depth, config(parallel)), &ops, |t| t);
        check_ops(FullMerkleTree::<Poseidon2T3Hasher>::with_config(depth, config(parallel)).unwrap(), &ops, |t| t);
    }

    /// Real sled and redb files, restarts (drop and reopen) included.
    #[test]
    fn persistent_trees_match_reference_across_restarts(ops in arb_ops(4, 16, fr_leaf)) {
        let depth = Depth::new(4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sled = SledConfig::new(dir.path().join("sled"));
        let open_sled = || SledMerkleTree::<Poseidon2Hasher>::open(&sled, depth).unwrap();
        let tree = check_ops(open_sled(), &ops, |tree| {
            drop(tree);
            open_sled()
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
        let redb = RedbConfig::new(dir.path().join("redb"));
        let open_redb = || RedbMerkleTree::<Poseidon2T3Hasher>::open(&redb, depth).unwrap();
        let tree = check_ops(open_redb(), &ops, |tree| {
            drop(tree);
            open_redb()
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }
}

/// A proof from a Poseidon2 tree folds back to its root with the hasher's own pair hash, and
/// fails for another leaf.
#[test]
fn proofs_verify_with_the_pair_hash() {
    let depth = Depth::new(10).unwrap();
    let mut tree = FullMerkleTree::<Poseidon2Hasher>::new(depth).unwrap();
    let leaves: Vec<Fr> = (1..=300u64).map(Fr::from).collect();
    tree.set_range(0, leaves.iter().copied()).unwrap();
    for index in [0u64, 1, 255, 299, 300, 1023] {
        let proof = tree.proof(index).unwrap();
        let leaf = tree.get(index).unwrap();
        assert_eq!(proof.compute_root(&leaf), tree.root(), "leaf {index}");
        assert_ne!(proof.compute_root(&Fr::from(7_777u64)), tree.root());
    }
}

/// Every hasher writes its own ID: a database of one hash is refused by another, and is
/// unchanged by the attempt.
#[test]
fn a_database_of_another_hash_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let depth = Depth::new(6).unwrap();
    let sled = SledConfig::new(dir.path().join("sled"));
    let root = {
        let mut tree = SledMerkleTree::<Poseidon2Hasher>::open(&sled, depth).unwrap();
        tree.set_range(0, [Fr::from(1u64), Fr::from(2u64)]).unwrap();
        tree.root()
    };
    for refused in [
        SledMerkleTree::<PoseidonHasher>::open(&sled, depth).err(),
        SledMerkleTree::<Poseidon2T3Hasher>::open(&sled, depth).err(),
    ] {
        assert!(
            matches!(refused, Some(SledTreeError::HasherMismatch { .. })),
            "{refused:?}"
        );
    }
    let tree = SledMerkleTree::<Poseidon2Hasher>::open(&sled, depth).unwrap();
    assert_eq!((tree.root(), tree.next_index()), (root, 2));

    let redb = RedbConfig::new(dir.path().join("redb"));
    drop(RedbMerkleTree::<Poseidon2T3Hasher>::open(&redb, depth).unwrap());
    let refused = RedbMerkleTree::<Poseidon2Hasher>::open(&redb, depth);
    assert!(
        matches!(refused, Err(RedbTreeError::HasherMismatch { .. })),
        "{:?}",
        refused.err()
    );
}
