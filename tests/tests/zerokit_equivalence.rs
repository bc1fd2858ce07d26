//! Differential tests: our trees against zerokit_utils 3.0.0's trees, same Poseidon, same ops.

use hasher::{poseidon, Fr, PoseidonHasher};
use integration_tests::cases;
use proptest::prelude::*;
use tree_core::testing::ReferenceTree;
use tree_core::{
    Depth, FullMerkleTree, MerkleProof, MerkleTree, MerkleTreeExt, OptimalMerkleTree, RehashConfig,
};
use zerokit_utils::merkle_tree::{
    FullMerkleTree as ZkFull, OptimalMerkleTree as ZkOptimal, ZerokitMerkleProof, ZerokitMerkleTree,
};

/// zerokit's trees hashed with our Poseidon (proven equal to zerokit's own in the hasher tests),
/// so a mismatch here is a tree mismatch, not a hash mismatch.
#[derive(Clone, Copy, PartialEq, Debug)]
struct ZkPoseidon;

impl zerokit_utils::hasher::ZerokitHasher for ZkPoseidon {
    type Scalar = Fr;
    fn hash(input: &[Fr]) -> Fr {
        poseidon(input).unwrap()
    }
}

#[derive(Debug, Clone)]
enum ZkOp {
    Set(u64, u64),
    Delete(u64),
    UpdateNext(u64),
    SetRange(u64, Vec<u64>),
}

fn arb_zk_ops(depth: u8) -> impl Strategy<Value = Vec<ZkOp>> {
    let cap = 1u64 << depth;
    let op = prop_oneof![
        3 => (0..cap, 1..1000u64).prop_map(|(i, v)| ZkOp::Set(i, v)),
        2 => (0..cap).prop_map(ZkOp::Delete),
        3 => (1..1000u64).prop_map(ZkOp::UpdateNext),
        2 => (0..cap, prop::collection::vec(1..1000u64, 1..6)).prop_map(|(i, v)| ZkOp::SetRange(i, v)),
    ];
    prop::collection::vec(op, 1..24)
}

fn assert_same_proofs<T, Z>(
    ours: &T,
    theirs: &Z,
    // indices written or deleted at least once
    written: &std::collections::BTreeSet<u64>,
) where
    T: MerkleTree<Hasher = PoseidonHasher>,
    Z: ZerokitMerkleTree<Hasher = ZkPoseidon>,
    Z::Proof: ZerokitMerkleProof<Hasher = ZkPoseidon, Index = u8>,
{
    assert_eq!(ours.root(), theirs.root());
    for index in 0..ours.capacity() {
        let p: MerkleProof<PoseidonHasher> = ours.proof(index).unwrap();
        let q = theirs.proof(index as usize).unwrap();
        assert_eq!(
            p.path_elements(),
            q.get_path_elements().as_slice(),
            "path elements {index}"
        );
        assert_eq!(p.path_index(), q.get_path_index(), "path index {index}");
        assert_eq!(p.leaf_index(), q.leaf_index() as u64);
        assert_eq!(
            ours.get(index).unwrap(),
            theirs.get(index as usize).unwrap()
        );
    }
    assert_eq!(ours.next_index(), theirs.leaves_set() as u64);
    // zerokit also lists never-written gaps below next_index; ours lists deleted slots only.
    let empties: Vec<u64> = theirs
        .get_empty_leaves_indices()
        .into_iter()
        .map(|i| i as u64)
        .filter(|i| written.contains(i))
        .collect();
    assert_eq!(ours.empty_leaves_indices().unwrap(), empties);
}

fn run<T, Z>(ours: &mut T, theirs: &mut Z, ops: &[ZkOp], use_set_range: bool)
where
    T: MerkleTree<Hasher = PoseidonHasher>,
    Z: ZerokitMerkleTree<Hasher = ZkPoseidon>,
    Z::Proof: ZerokitMerkleProof<Hasher = ZkPoseidon, Index = u8>,
{
    let mut written = std::collections::BTreeSet::new();
    for op in ops {
        let before = ours.next_index();
        let (a, b) = match op {
            ZkOp::Set(i, v) => (
                ours.set(*i, Fr::from(*v)).is_ok(),
                theirs.set(*i as usize, Fr::from(*v)).is_ok(),
            ),
            ZkOp::Delete(i) => (ours.delete(*i).is_ok(), theirs.delete(*i as usize).is_ok()),
            ZkOp::UpdateNext(v) => (
                ours.update_next(Fr::from(*v)).is_ok(),
                theirs.update_next(Fr::from(*v)).is_ok(),
            ),
            ZkOp::SetRange(s, vs) if use_set_range => {
                let leaves: Vec<Fr> = vs.iter().map(|&v| Fr::from(v)).collect();
                (
                    ours.set_range(*s, leaves.iter().copied()).is_ok(),
                    theirs.set_range(*s as usize, leaves.into_iter()).is_ok(),
                )
            }
            // zerokit's Optimal set_range is wrong at odd starts: emulate it by single sets.
            ZkOp::SetRange(s, vs) => {
                let fits = s + vs.len() as u64 <= ours.capacity();
                let mut a = ours.set_range(*s, vs.iter().map(|&v| Fr::from(v))).is_ok();
                if fits {
                    for (k, &v) in vs.iter().enumerate() {
                        a &= theirs.set(*s as usize + k, Fr::from(v)).is_ok();
                    }
                }
                (a, fits)
            }
        };
        assert_eq!(a, b, "accepted differently: {op:?}");
        if a {
            match op {
                ZkOp::Set(i, _) => {
                    written.insert(*i);
                }
                ZkOp::UpdateNext(_) => {
                    written.insert(before);
                }
                ZkOp::SetRange(s, vs) => written.extend(*s..*s + vs.len() as u64),
                ZkOp::Delete(i) => {
                    written.insert(*i);
                }
            }
        }
        assert_same_proofs(ours, theirs, &written);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(16)))]

    #[test]
    fn full_tree_equals_zerokit_full(ops in arb_zk_ops(4), parallel in any::<bool>()) {
        let _case = integration_tests::tally!("full_tree_equals_zerokit_full", ops.len());
        let cfg = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
        let mut ours = FullMerkleTree::<PoseidonHasher>::with_config(Depth::new(4).unwrap(), cfg).unwrap();
        let mut theirs = ZkFull::<ZkPoseidon>::default(4).unwrap();
        run(&mut ours, &mut theirs, &ops, true);
    }

    #[test]
    fn optimal_tree_equals_zerokit_optimal(ops in arb_zk_ops(4), parallel in any::<bool>()) {
        let _case = integration_tests::tally!("optimal_tree_equals_zerokit_optimal", ops.len());
        let cfg = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
        let mut ours = OptimalMerkleTree::<PoseidonHasher>::with_config(Depth::new(4).unwrap(), cfg);
        let mut theirs = ZkOptimal::<ZkPoseidon>::default(4).unwrap();
        run(&mut ours, &mut theirs, &ops, false);
    }
}

/// zerokit's `OptimalMerkleTree::set_range(3, [a, b])` at depth 3 gives a wrong root; ours agrees
/// with the naive reference (and with zerokit's Full tree).
#[test]
fn odd_start_set_range_is_right_where_zerokit_optimal_is_wrong() {
    let depth = Depth::new(3).unwrap();
    let leaves = [Fr::from(11u64), Fr::from(22u64)];
    let mut reference = ReferenceTree::<PoseidonHasher>::new(depth);
    reference.set_range(3, &leaves).unwrap();

    let mut optimal = OptimalMerkleTree::<PoseidonHasher>::new(depth);
    optimal.set_range(3, leaves).unwrap();
    let mut full = FullMerkleTree::<PoseidonHasher>::new(depth).unwrap();
    full.set_range(3, leaves).unwrap();
    assert_eq!(optimal.root(), reference.root());
    assert_eq!(full.root(), reference.root());

    let mut zk_full = ZkFull::<ZkPoseidon>::default(3).unwrap();
    zk_full.set_range(3, leaves.into_iter()).unwrap();
    assert_eq!(zk_full.root(), reference.root());
    let mut zk_optimal = ZkOptimal::<ZkPoseidon>::default(3).unwrap();
    zk_optimal.set_range(3, leaves.into_iter()).unwrap();
    assert_ne!(
        zk_optimal.root(),
        reference.root(),
        "zerokit 3.0.0's known odd-start bug"
    );
}

/// Whole levels on the batch path (IFMA lanes where the CPU has them: full groups of eight and
/// tails) give zerokit's roots and proofs, zerokit hashing one pair at a time; the run records
/// whether the lanes were exercised, for the reliability line.
#[test]
fn large_ranges_equal_zerokit_on_the_batch_path() {
    let before = hasher::lane_permutations();
    for (start, count, parallel) in [(0u64, 1000u64, true), (3, 517, false), (1, 9, true)] {
        let cfg = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
        let mut ours =
            FullMerkleTree::<PoseidonHasher>::with_config(Depth::new(10).unwrap(), cfg).unwrap();
        let mut theirs = ZkFull::<ZkPoseidon>::default(10).unwrap();
        let leaves: Vec<Fr> = (0..count)
            .map(|i| Fr::from(i * i + 17) - Fr::from(3 * i))
            .collect();
        ours.set_range(start, leaves.iter().copied()).unwrap();
        theirs
            .set_range(start as usize, leaves.into_iter())
            .unwrap();
        assert_eq!(
            ours.root(),
            theirs.root(),
            "root, start {start}, {count} leaves"
        );
        // Every proof, leaf, the next index and the empty slots, as the differential proptests.
        assert_same_proofs(&ours, &theirs, &(start..start + count).collect());
    }
    let used = hasher::lane_permutations() - before;
    if hasher::ifma_available() {
        assert!(used > 0, "the lanes were not used on a CPU that has them");
    }
    integration_tests::report::record(
        "lanes",
        "zerokit_equivalence",
        &[
            ("ifma_cpu", u64::from(hasher::ifma_available())),
            ("lane_permutations", used),
        ],
        &[],
    );
}
