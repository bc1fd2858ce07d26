//! LeanIMT on the one engine against zk-kit's Rust crate (`zk-kit-lean-imt`): random insert,
//! batch insert, update and remove sequences on the sparse and dense in-memory trees, on sled
//! and redb across restarts, with checkpoints and rewinds — roots, sizes, depths and proofs
//! equal, and each side's verifier accepts the other's proofs.

use hasher::{
    fr_from_le_bytes, fr_to_le_bytes, Fr, Hasher, Lean, LeanHash, Poseidon2Hasher, PoseidonHasher,
};
use integration_tests::cases;
use proptest::prelude::*;
use tree_core::lean::{LeanImt, LeanProof};
use tree_core::{
    Depth, FullMerkleTree, History, MerkleTree, OptimalMerkleTree, RehashConfig, TreeError,
};
use tree_redb::{RedbConfig, RedbMerkleTree};
use tree_sled::{SledConfig, SledMerkleTree};
use zk_kit_lean_imt::hashed_tree::{HashedLeanIMT, LeanIMTHasher};
use zk_kit_lean_imt::lean_imt::MerkleProof;

/// zk-kit's tree over bytes, hashing with `H` on the 32-byte little-endian field encoding.
struct ZkHash<H>(core::marker::PhantomData<H>);

impl<H: Hasher<Digest = Fr>> LeanIMTHasher<32> for ZkHash<H> {
    fn hash(input: &[u8]) -> [u8; 32] {
        let left = fr_from_le_bytes(&input[..32]).unwrap();
        let right = fr_from_le_bytes(&input[32..]).unwrap();
        fr_to_le_bytes(&H::hash_pair(&left, &right))
    }
}

type ZkTree<H> = HashedLeanIMT<32, ZkHash<H>>;

fn zk_tree<H: Hasher<Digest = Fr>>() -> ZkTree<H> {
    HashedLeanIMT::new(&[], ZkHash(core::marker::PhantomData)).unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64),
    InsertMany(Vec<u64>),
    Update(usize, u64),
    UpdateMany(Vec<(usize, u64)>),
    Remove(usize),
    /// Checkpoint, do the next ops, rewind, and check the state came back (persistent trees).
    Restart,
}

fn arb_ops(max_len: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            4 => any::<u64>().prop_map(Op::Insert),
            2 => prop::collection::vec(any::<u64>(), 1..70).prop_map(Op::InsertMany),
            2 => (any::<usize>(), any::<u64>()).prop_map(|(i, v)| Op::Update(i, v)),
            1 => prop::collection::vec((any::<usize>(), any::<u64>()), 1..20).prop_map(Op::UpdateMany),
            1 => any::<usize>().prop_map(Op::Remove),
            1 => Just(Op::Restart),
        ],
        1..max_len,
    )
}

fn assert_same_proof<H: Hasher<Digest = Fr>>(ours: &LeanProof<H>, theirs: &MerkleProof<32>) {
    assert_eq!(fr_to_le_bytes(&ours.root), theirs.root, "root");
    assert_eq!(fr_to_le_bytes(&ours.leaf), theirs.leaf, "leaf");
    assert_eq!(ours.index, theirs.index as u64, "index");
    let siblings: Vec<[u8; 32]> = ours.siblings.iter().map(fr_to_le_bytes).collect();
    assert_eq!(siblings, theirs.siblings, "siblings");
}

/// Runs `ops` on ours (through `open`/`reopen`) and on zk-kit's, comparing after every op and
/// every proof at the end.
fn run<H, T>(mut ours: LeanImt<T>, ops: &[Op], reopen: &mut impl FnMut(T) -> T)
where
    H: LeanHash<Digest = Fr>,
    T: MerkleTree<Hasher = Lean<H>>,
{
    let mut zk = zk_tree::<H>();
    for (step, op) in ops.iter().enumerate() {
        let size = zk.size();
        match op {
            Op::Insert(v) => {
                ours.insert(Fr::from(*v)).unwrap();
                zk.insert(&fr_to_le_bytes(&Fr::from(*v)));
            }
            Op::InsertMany(vs) => {
                let leaves: Vec<Fr> = vs.iter().map(|v| Fr::from(*v)).collect();
                ours.insert_many(&leaves).unwrap();
                let bytes: Vec<[u8; 32]> = leaves.iter().map(fr_to_le_bytes).collect();
                zk.insert_many(&bytes).unwrap();
            }
            Op::Update(i, _) | Op::Remove(i) if size == 0 => {
                let err = ours
                    .update(*i as u64, Fr::from(1u64))
                    .err()
                    .map(|e| e.to_string());
                assert!(
                    err.is_some_and(|e| e.contains("not in the LeanIMT")),
                    "step {step}"
                );
                continue;
            }
            Op::UpdateMany(_) if size == 0 => continue,
            Op::UpdateMany(pairs) => {
                // Distinct indices (zk-kit refuses repeats; checked below), as zk-kit's Rust
                // crate has no updateMany: one update each on its side.
                let mut seen = std::collections::BTreeMap::new();
                for (i, v) in pairs {
                    seen.entry(i % size).or_insert(*v);
                }
                let (indices, leaves): (Vec<u64>, Vec<Fr>) =
                    seen.iter().map(|(i, v)| (*i as u64, Fr::from(*v))).unzip();
                if indices.len() > 1 {
                    let mut repeated = indices.clone();
                    repeated.push(indices[0]);
                    let refused =
                        ours.update_many(&repeated, &[leaves.clone(), vec![leaves[0]]].concat());
                    assert!(
                        matches!(refused, Err(e) if e.to_string().contains("twice")),
                        "step {step}"
                    );
                }
                ours.update_many(&indices, &leaves).unwrap();
                for (i, leaf) in indices.iter().zip(&leaves) {
                    zk.update(*i as usize, &fr_to_le_bytes(leaf)).unwrap();
                }
            }
            Op::Update(i, v) => {
                let i = i % size;
                ours.update(i as u64, Fr::from(*v)).unwrap();
                zk.update(i, &fr_to_le_bytes(&Fr::from(*v))).unwrap();
            }
            Op::Remove(i) => {
                let i = i % size;
                ours.remove(i as u64).unwrap();
                zk.update(i, &[0; 32]).unwrap();
            }
            Op::Restart => ours = LeanImt::new(reopen(ours.into_inner())),
        }
        assert_eq!(ours.size(), zk.size() as u64, "step {step}: size");
        assert_eq!(usize::from(ours.depth()), zk.depth(), "step {step}: depth");
        assert_eq!(
            ours.root().map(|r| fr_to_le_bytes(&r)),
            zk.root(),
            "step {step}: root after {op:?}"
        );
    }
    let size = zk.size();
    for index in (0..size).step_by(size / 16 + 1).chain(size.checked_sub(1)) {
        let proof = ours.proof(index as u64).unwrap();
        let theirs = zk.generate_proof(index).unwrap();
        assert_same_proof(&proof, &theirs);
        assert!(proof.verify(), "ours verifies {index}");
        let mut forged = proof.clone();
        forged.leaf += Fr::from(1u64);
        assert!(!forged.verify(), "a changed leaf does not verify");
    }
    assert!(ours.proof(size as u64).is_err());
}

fn no_reopen<T>(t: T) -> T {
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(24)))]

    /// The sparse tree at depth 32 (every LeanIMT zk-kit can hold in memory) and the dense
    /// tree at depth 10, sequential and parallel rehash, Poseidon and Poseidon2.
    #[test]
    fn memory_trees_equal_zk_kit(parallel in any::<bool>(), ops in arb_ops(30)) {
        let config = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
        let sparse = OptimalMerkleTree::<Lean<PoseidonHasher>>::with_config(Depth::new(32).unwrap(), config.clone());
        run(LeanImt::new(sparse), &ops, &mut no_reopen);
        let dense = FullMerkleTree::<Lean<Poseidon2Hasher>>::with_config(Depth::new(11).unwrap(), config).unwrap();
        run(LeanImt::new(dense), &ops, &mut no_reopen);
    }

    /// Real sled and redb files, dropped and reopened at every `Restart`.
    #[test]
    fn persistent_trees_equal_zk_kit_across_restarts(ops in arb_ops(16)) {
        let dir = tempfile::tempdir().unwrap();
        let depth = Depth::new(32).unwrap();
        let sled = SledConfig::new(dir.path().join("sled"));
        let open = || SledMerkleTree::<Lean<PoseidonHasher>>::open(&sled, depth).unwrap();
        run(LeanImt::new(open()), &ops, &mut |tree| { drop(tree); open() });
        let redb = RedbConfig::new(dir.path().join("redb"));
        let open = || RedbMerkleTree::<Lean<PoseidonHasher>>::open(&redb, depth).unwrap();
        run(LeanImt::new(open()), &ops, &mut |tree| { drop(tree); open() });
    }

    /// Engine trees of every depth 1..=32 hold LeanIMTs up to their capacity and refuse the
    /// next leaf with a typed error, the LeanIMT unchanged.
    #[test]
    fn every_engine_depth_holds_leanimts_to_capacity(depth in 1u8..=32, extra in 1usize..4) {
        let capacity = 1usize << depth.min(8);
        let mut ours = LeanImt::new(OptimalMerkleTree::<Lean<PoseidonHasher>>::new(Depth::new(depth).unwrap()));
        let mut zk = zk_tree::<PoseidonHasher>();
        let leaves: Vec<Fr> = (1..=capacity as u64).map(Fr::from).collect();
        ours.insert_many(&leaves).unwrap();
        zk.insert_many(&leaves.iter().map(fr_to_le_bytes).collect::<Vec<_>>()).unwrap();
        prop_assert_eq!(ours.root().map(|r| fr_to_le_bytes(&r)), zk.root());
        if usize::from(depth) <= 8 {
            let root = ours.root();
            let more: Vec<Fr> = (0..extra as u64).map(Fr::from).collect();
            let refused = ours.insert_many(&more);
            prop_assert!(matches!(refused, Err(TreeError::RangeOutOfBounds { .. })), "{:?}", refused);
            let full = ours.insert(Fr::from(1u64));
            prop_assert!(matches!(full, Err(TreeError::TreeFull { .. })), "{:?}", full);
            prop_assert_eq!(ours.root(), root);
            prop_assert_eq!(ours.size(), capacity as u64);
        }
    }
}

/// Checkpoints and rewinds on a persistent LeanIMT: a rewind restores root, size and proofs.
#[test]
fn rewinds_restore_the_leanimt() {
    let dir = tempfile::tempdir().unwrap();
    let mut lean = LeanImt::new(
        RedbMerkleTree::<Lean<PoseidonHasher>>::open(
            &RedbConfig::new(dir.path()),
            Depth::new(32).unwrap(),
        )
        .unwrap(),
    );
    lean.insert_many(&(1..=5u64).map(Fr::from).collect::<Vec<_>>())
        .unwrap();
    lean.tree_mut().checkpoint(1).unwrap();
    let (root, proof) = (lean.root(), lean.proof(4).unwrap());
    lean.insert_many(&(6..=40u64).map(Fr::from).collect::<Vec<_>>())
        .unwrap();
    lean.remove(2).unwrap();
    assert_ne!(lean.root(), root);
    lean.tree_mut().rewind_to(1).unwrap();
    assert_eq!((lean.root(), lean.size(), lean.depth()), (root, 5, 3));
    assert_eq!(lean.proof(4).unwrap(), proof);
}

/// Bad input: an empty batch, an update past the size, a wrong-length or non-canonical node
/// in a proof's bytes are typed errors; nothing changes.
#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let mut lean = LeanImt::new(OptimalMerkleTree::<Lean<PoseidonHasher>>::new(
        Depth::new(32).unwrap(),
    ));
    assert!(matches!(lean.insert_many(&[]), Err(TreeError::EmptyInsert)));
    assert_eq!(lean.root(), None);
    lean.insert(Fr::from(3u64)).unwrap();
    assert_eq!(
        lean.root(),
        Some(Fr::from(3u64)),
        "one leaf: the root is the leaf"
    );
    assert_eq!(lean.proof(0).unwrap().siblings, Vec::<Fr>::new());
    assert!(matches!(
        lean.update(1, Fr::from(1u64)),
        Err(TreeError::LeafNotInserted { index: 1, size: 1 })
    ));
    assert!(matches!(
        lean.remove(u64::MAX),
        Err(TreeError::LeafNotInserted { .. })
    ));
    assert!(matches!(
        lean.leaf(7),
        Err(TreeError::LeafNotInserted { .. })
    ));
    assert_eq!(lean.root(), Some(Fr::from(3u64)));
    // A proof whose index has bits past its siblings is not valid.
    let mut proof = lean.proof(0).unwrap();
    proof.index = 1;
    assert!(!proof.verify());
}
