//! Depth 30 (World ID's trees) at 2^16 leaves, the CI-sized case of the `depth30` bench: the
//! sparse in-memory tree, redb and sled, built streaming, equal semaphore-rs's cascading tree
//! (a reference no one here wrote) in root and in every sampled proof; the persistent trees
//! reopen to the same root and proofs; memory stays bounded by the leaves, not the capacity.

use hasher::{fr_from_le_bytes, fr_to_le_bytes, Fr, Hasher, PoseidonHasher};
use rand::{rngs::StdRng, Rng, SeedableRng};
use semaphore_rs_trees::cascading::CascadingMerkleTree;
use semaphore_rs_trees::proof::Branch;
use tree_core::persistent::Durability;
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_engines::{DbConfig, DbTree, Engine};

const DEPTH: u8 = 30;
const LEAVES: u64 = 1 << 16;
const CHUNK: u64 = 1 << 12;

struct SemaphorePoseidon;

impl semaphore_rs_hasher::Hasher for SemaphorePoseidon {
    type Hash = [u8; 32];

    fn hash_node(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
        let left = fr_from_le_bytes(left).unwrap();
        let right = fr_from_le_bytes(right).unwrap();
        fr_to_le_bytes(&PoseidonHasher::hash_pair(&left, &right))
    }
}

fn leaf(i: u64) -> Fr {
    Fr::from(i * 7 + 1)
}

fn build<T: MerkleTree<Hasher = PoseidonHasher>>(tree: &mut T) {
    for start in (0..LEAVES).step_by(CHUNK as usize) {
        tree.set_range(start, (start..start + CHUNK).map(leaf))
            .unwrap();
    }
}

fn reference() -> CascadingMerkleTree<SemaphorePoseidon> {
    let mut tree =
        CascadingMerkleTree::<SemaphorePoseidon>::new(Vec::new(), usize::from(DEPTH), &[0; 32]);
    let leaves: Vec<[u8; 32]> = (0..LEAVES).map(|i| fr_to_le_bytes(&leaf(i))).collect();
    tree.extend_from_slice(&leaves);
    tree
}

/// Root and the proofs of sampled indices (present leaves, the last one, empty ones past it and
/// the last index of the capacity) against the reference.
fn assert_equals_reference<T: MerkleTree<Hasher = PoseidonHasher>>(
    name: &str,
    tree: &T,
    reference: &CascadingMerkleTree<SemaphorePoseidon>,
) {
    assert_eq!(
        fr_to_le_bytes(&tree.root()),
        reference.root(),
        "{name}: root"
    );
    let mut rng = StdRng::seed_from_u64(30);
    let mut indices: Vec<u64> = (0..40).map(|_| rng.gen_range(0..LEAVES)).collect();
    indices.extend([0, LEAVES - 1]);
    // Past the last leaf the reference gives no proofs (it panics); ours prove the empty leaf.
    for index in [LEAVES, LEAVES + 17, (1 << DEPTH) - 1] {
        let proof = tree.proof(index).unwrap();
        assert!(
            tree.verify_proof(&proof, &Fr::from(0u64)),
            "{name}: empty slot {index}"
        );
    }
    for index in indices {
        let ours = tree.proof(index).unwrap();
        let theirs = reference.proof(usize::try_from(index).unwrap());
        assert_eq!(theirs.0.len(), usize::from(DEPTH), "{name}: proof length");
        for (level, (sibling, branch)) in ours.path_elements().iter().zip(&theirs.0).enumerate() {
            let (value, right) = match branch {
                Branch::Left(v) => (v, false),
                Branch::Right(v) => (v, true),
            };
            assert_eq!(
                &fr_to_le_bytes(sibling),
                value,
                "{name}: proof {index}, level {level}"
            );
            assert_eq!(
                ours.path_index()[level] == 1,
                right,
                "{name}: direction {index}/{level}"
            );
        }
        let leaf = tree.get(index).unwrap();
        assert!(
            tree.verify_proof(&ours, &leaf),
            "{name}: proof {index} verifies"
        );
    }
}

#[test]
fn depth_30_trees_equal_semaphore_rs_cascading_tree() {
    let reference = reference();
    let depth = Depth::new(DEPTH).unwrap();

    let mut memory = OptimalMerkleTree::<PoseidonHasher>::new(depth);
    build(&mut memory);
    assert_equals_reference("memory", &memory, &reference);

    for engine in [Engine::Redb, Engine::Sled] {
        let dir = tempfile::tempdir().unwrap();
        let config = DbConfig::new(dir.path())
            .engine(engine)
            .durability(Durability::Periodic { every_ms: 500 });
        {
            let mut tree = DbTree::<PoseidonHasher>::open(&config, depth).unwrap();
            build(&mut tree);
            assert_equals_reference(engine.name(), &tree, &reference);
            tree.close().unwrap();
        }
        let reopened = DbTree::<PoseidonHasher>::open(&config, depth).unwrap();
        assert_eq!(reopened.next_index(), LEAVES);
        assert_equals_reference(engine.name(), &reopened, &reference);
    }
}
