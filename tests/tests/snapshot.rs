//! Snapshot export/import: round trips for every tree kind, and typed refusal of truncated,
//! corrupted, forged and mismatched snapshots.

use hasher::{Fr, Keccak256Hasher, PoseidonHasher};
use integration_tests::cases;
use proptest::prelude::*;
use tree_core::testing::{arb_ops, check_ops, mix_leaf, MixHasher};
use tree_core::{
    Depth, FullMerkleTree, MerkleTree, MerkleTreeExt, OptimalMerkleTree, RehashConfig, Snapshot,
    SnapshotError,
};
use tree_sled::{MemStore, SledMerkleTree};

fn bytes_of<T: MerkleTree<Hasher = MixHasher>>(tree: &T) -> Vec<u8>
where
    T::Error: std::fmt::Debug,
{
    let mut out = Vec::new();
    Snapshot::of(tree).unwrap().write_to(&mut out).unwrap();
    out
}

fn same_state<A: MerkleTree, B: MerkleTree<Hasher = A::Hasher>>(a: &A, b: &B) -> bool
where
    A::Error: std::fmt::Debug,
    B::Error: std::fmt::Debug,
{
    a.root() == b.root()
        && a.next_index() == b.next_index()
        && a.empty_leaves_indices().unwrap() == b.empty_leaves_indices().unwrap()
        && a.metadata().unwrap() == b.metadata().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    /// Any state of any tree kind survives export and import into every tree kind.
    #[test]
    fn round_trip_between_every_tree_kind(
        (depth, ops) in (1u8..=6).prop_flat_map(|d| (Just(d), arb_ops(d, 30, mix_leaf))),
    ) {
        let _case = integration_tests::tally!("round_trip_between_every_tree_kind", ops.len());
        let depth = Depth::new(depth).unwrap();
        let source = check_ops(OptimalMerkleTree::<MixHasher>::new(depth), &ops, |t| t);
        let bytes = bytes_of(&source);
        let read = || Snapshot::<MixHasher>::read_from(bytes.as_slice()).unwrap();
        let optimal = read().import(OptimalMerkleTree::new(depth), Some(&source.root())).unwrap();
        let full = read().import(FullMerkleTree::new(depth).unwrap(), None).unwrap();
        let store = SledMerkleTree::<MixHasher, MemStore>::open_store(
            MemStore::new(), depth, RehashConfig::default(), tree_core::persistent::NodeCache::top(2),
        ).unwrap();
        let sled = read().import(store, None).unwrap();
        prop_assert!(same_state(&source, &optimal));
        prop_assert!(same_state(&source, &full));
        prop_assert!(same_state(&source, &sled));
        prop_assert_eq!(bytes_of(&sled), bytes.clone());
    }
}

fn sample() -> (OptimalMerkleTree<MixHasher>, Vec<u8>) {
    let mut tree = OptimalMerkleTree::<MixHasher>::new(Depth::new(8).unwrap());
    tree.set_range(0, 1..=40).unwrap();
    tree.delete(7).unwrap();
    tree.set_metadata(b"block 12").unwrap();
    let bytes = bytes_of(&tree);
    (tree, bytes)
}

#[test]
fn every_truncation_is_refused() {
    let (_, bytes) = sample();
    for len in 0..bytes.len() {
        let result = Snapshot::<MixHasher>::read_from(&bytes[..len]);
        assert!(
            matches!(
                result,
                Err(SnapshotError::Truncated | SnapshotError::BadMagic)
            ),
            "length {len}: {result:?}"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    // A snapshot is the whole stream: bytes after the checksum (not covered by it) are refused.
    assert!(matches!(
        Snapshot::<MixHasher>::read_from(longer.as_slice()),
        Err(SnapshotError::Malformed("bytes after the checksum"))
    ));
}

#[test]
fn every_flipped_byte_is_refused() {
    let (_, bytes) = sample();
    for pos in 0..bytes.len() {
        for bit in [0x01u8, 0x80] {
            let mut bad = bytes.clone();
            bad[pos] ^= bit;
            let result = Snapshot::<MixHasher>::read_from(bad.as_slice());
            assert!(result.is_err(), "flip {bit:#x} at {pos} accepted");
        }
    }
}

#[test]
fn mismatches_and_forgeries_are_typed_errors() {
    let (tree, bytes) = sample();
    let depth = tree.depth();
    let read = || Snapshot::<MixHasher>::read_from(bytes.as_slice()).unwrap();
    // Wrong expected root: refused before anything is written.
    assert!(matches!(
        read().import(OptimalMerkleTree::new(depth), Some(&12345)),
        Err(SnapshotError::UnexpectedRoot)
    ));
    // Another depth, a non-empty tree.
    assert!(matches!(
        read().import(OptimalMerkleTree::new(Depth::new(9).unwrap()), None),
        Err(SnapshotError::DepthMismatch {
            found: 8,
            expected: 9
        })
    ));
    let mut busy = OptimalMerkleTree::<MixHasher>::new(depth);
    busy.set(0, 1).unwrap();
    assert!(matches!(
        read().import(busy, None),
        Err(SnapshotError::NotEmpty { next_index: 1 })
    ));
    // A forged root with a valid checksum: caught by the recomputation.
    let mut forged = read();
    forged.root ^= 1;
    let mut forged_bytes = Vec::new();
    forged.write_to(&mut forged_bytes).unwrap();
    let forged = Snapshot::<MixHasher>::read_from(forged_bytes.as_slice()).unwrap();
    assert!(matches!(
        forged.import(OptimalMerkleTree::new(depth), None),
        Err(SnapshotError::RootMismatch)
    ));
    // A deleted slot that holds a leaf.
    let mut bad = read();
    bad.deleted = vec![3];
    let mut bad_bytes = Vec::new();
    bad.write_to(&mut bad_bytes).unwrap();
    assert!(matches!(
        Snapshot::<MixHasher>::read_from(bad_bytes.as_slice()),
        Err(SnapshotError::Malformed(_))
    ));
    // Not a snapshot at all.
    assert!(matches!(
        Snapshot::<MixHasher>::read_from(&b"hello world, not a snapshot"[..]),
        Err(SnapshotError::BadMagic)
    ));
}

#[test]
fn another_hasher_is_refused() {
    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(4).unwrap());
    tree.set_range(0, [Fr::from(1u64), Fr::from(2u64)]).unwrap();
    let mut bytes = Vec::new();
    Snapshot::of(&tree).unwrap().write_to(&mut bytes).unwrap();
    assert!(matches!(
        Snapshot::<Keccak256Hasher>::read_from(bytes.as_slice()),
        Err(SnapshotError::HasherMismatch { .. })
    ));
    let back = Snapshot::<PoseidonHasher>::read_from(bytes.as_slice()).unwrap();
    let copy = back.import(
        FullMerkleTree::new(Depth::new(4).unwrap()).unwrap(),
        Some(&tree.root()),
    );
    assert_eq!(copy.unwrap().root(), tree.root());
}
