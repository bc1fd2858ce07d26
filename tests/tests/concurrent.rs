//! Readers during writes: every (root, leaf, proof) a reader gets is from one state, while a
//! writer applies random batches through the shared handle.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hasher::{Fr, PoseidonHasher};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tree_core::persistent::{KvStore, PersistentTree};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, UpdateBatch};
use tree_redb::{RedbConfig, RedbMerkleTree};
use tree_sled::{SharedTree, SledConfig, SledMerkleTree};

#[test]
fn readers_never_see_a_torn_state() {
    let depth = Depth::new(16).unwrap();
    readers_during_writes(
        SledMerkleTree::<PoseidonHasher>::open(&SledConfig::temporary(), depth).unwrap(),
    );
}

/// The same on redb, whose reads share one read transaction per commit.
#[test]
fn readers_never_see_a_torn_state_on_redb() {
    let dir = tempfile::tempdir().unwrap();
    let depth = Depth::new(16).unwrap();
    readers_during_writes(
        RedbMerkleTree::<PoseidonHasher>::open(&RedbConfig::new(dir.path()), depth).unwrap(),
    );
}

fn readers_during_writes<S: KvStore + Send + Sync + 'static>(
    mut tree: PersistentTree<PoseidonHasher, S>,
) {
    tree.set_range(0, (1..=512u64).map(Fr::from)).unwrap();
    let shared = Arc::new(SharedTree::new(tree));
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, torn) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (shared, stop, reads, torn) =
                (shared.clone(), stop.clone(), reads.clone(), torn.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(r);
                while !stop.load(Ordering::Relaxed) {
                    let (root, leaf, proof) = shared.read(|t| {
                        let i = rng.gen_range(0..t.next_index());
                        (t.root(), t.get(i).unwrap(), t.proof(i).unwrap())
                    });
                    if proof.compute_root(&leaf) != root {
                        torn.fetch_add(1, Ordering::Relaxed);
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(7);
    let mut roots = Vec::new();
    for _ in 0..40 {
        // Let the readers in between batches: with Poseidon on IFMA lanes the 40 batches can
        // finish before the reader threads are even scheduled on two cores.
        let target = reads.load(Ordering::Relaxed) + 3;
        while reads.load(Ordering::Relaxed) < target {
            std::thread::yield_now();
        }
        let next = shared.read(|t| t.next_index());
        let mut batch = UpdateBatch::new();
        batch.set_range(
            next,
            (0..rng.gen_range(1..200u64)).map(|i| Fr::from(next * 1000 + i)),
        );
        for _ in 0..rng.gen_range(0..20) {
            batch.set(rng.gen_range(0..next), Fr::from(rng.gen::<u64>()));
        }
        shared.apply(batch).unwrap();
        roots.push(shared.read(|t| t.root()));
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 100, "readers barely ran");
    assert_eq!(torn.load(Ordering::Relaxed), 0, "inconsistent reads");
    roots.dedup();
    assert_eq!(roots.len(), 40, "every batch changed the root");
    let tree = Arc::try_unwrap(shared).ok().unwrap().into_inner();
    assert!(tree.verify_integrity().unwrap().is_empty());
}

/// A batch prepared before another write is stale: publishing it is a `Conflict` that changes
/// nothing, and preparing again succeeds.
#[test]
fn a_stale_prepared_batch_is_a_conflict_and_changes_nothing() {
    let depth = Depth::new(8).unwrap();
    let mut tree = SledMerkleTree::<PoseidonHasher>::open(&SledConfig::temporary(), depth).unwrap();
    let mut first = UpdateBatch::new();
    first.set(0, Fr::from(1u64));
    let stale = tree.prepare(first.clone()).unwrap();
    tree.set(1, Fr::from(2u64)).unwrap();
    let (root, commits) = (tree.root(), tree.commits());
    assert!(matches!(
        tree.publish(stale),
        Err(tree_sled::SledTreeError::Tree(
            tree_core::TreeError::Conflict
        ))
    ));
    assert_eq!((tree.root(), tree.commits()), (root, commits));
    let fresh = tree.prepare(first).unwrap();
    tree.publish(fresh).unwrap();
    assert_eq!(tree.get(0).unwrap(), Fr::from(1u64));
}
