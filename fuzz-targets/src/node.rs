//! Node and header decoding: a valid stored tree with some of its keys overwritten or removed by
//! the input, then opened and read through every accessor.
//!
//! Invariants: decoding a digest accepts exactly the canonical encodings; opening and reading
//! never panic; when the reopened tree reports no integrity issue, its proofs verify against its
//! root.

use arbitrary::{Arbitrary, Unstructured};
use hasher::{DigestCodec, Keccak256Hasher, PoseidonHasher};
use tree_core::persistent::layout::{
    COMMITS_KEY, DEPTH_KEY, DIGEST_LEN_KEY, FORMAT_VERSION_KEY, HASHER_KEY, HISTORY_KEY,
    METADATA_KEY, NEXT_INDEX_KEY,
};
use tree_core::testing::MixHasher;
use tree_core::{Depth, History, MerkleTree, MerkleTreeExt, RehashConfig};
use tree_sled::{KvStore, MemStore, SledMerkleTree, StoreBatch};

const HEADER_KEYS: &[&[u8]] = &[
    FORMAT_VERSION_KEY,
    DEPTH_KEY,
    HASHER_KEY,
    DIGEST_LEN_KEY,
    NEXT_INDEX_KEY,
    METADATA_KEY,
    HISTORY_KEY,
    COMMITS_KEY,
];

/// Digest decoding accepts exactly what encoding produces.
fn check_codec<H: DigestCodec>(bytes: &[u8]) {
    if let Ok(digest) = H::decode(bytes) {
        assert_eq!(
            H::encode_to_vec(&digest),
            bytes,
            "{}: non-canonical bytes accepted",
            H::ID
        );
    }
}

/// A small valid tree with checkpoints, in a store; returns the store and every key it holds.
fn base(seed: u8) -> (MemStore, Vec<Vec<u8>>) {
    let store = MemStore::new();
    let tree = Depth::new(4 + seed % 3).ok().and_then(|depth| {
        SledMerkleTree::<MixHasher, _>::open_store(
            store.clone(),
            depth,
            RehashConfig::default(),
            tree_core::persistent::NodeCache::top(2),
        )
        .ok()
    });
    if let Some(mut tree) = tree {
        let _ = tree.set_range(0, (1..=9).map(|i| i * 7 + u64::from(seed)));
        let _ = tree.checkpoint(1);
        let _ = tree.delete(3);
        let _ = tree.set(12, 99);
        let _ = tree.checkpoint(2);
        let _ = tree.set_metadata(b"block");
    }
    let mut keys = Vec::new();
    let Ok(()) = store.scan_prefix(&[], &mut |key, _| keys.push(key.to_vec()));
    (store, keys)
}

/// The input: which base tree, then (key choice, new value or removal) edits.
pub fn run(data: &[u8]) {
    check_codec::<PoseidonHasher>(data);
    check_codec::<Keccak256Hasher>(data);
    let mut u = Unstructured::new(data);
    let Ok(seed) = u8::arbitrary(&mut u) else {
        return;
    };
    let (store, keys) = base(seed);
    let mut batch = StoreBatch::default();
    let edits = u.int_in_range(0..=4u8).unwrap_or(0);
    for _ in 0..edits {
        let key: Vec<u8> = match u.int_in_range(0..=3u8).unwrap_or(0) {
            0 => HEADER_KEYS[usize::from(u.int_in_range(0..=7u8).unwrap_or(0))].to_vec(),
            1 | 2 if !keys.is_empty() => {
                let i = u.choose_index(keys.len()).unwrap_or(0);
                keys[i].clone()
            }
            _ => Vec::<u8>::arbitrary(&mut u).unwrap_or_default(),
        };
        if bool::arbitrary(&mut u).unwrap_or(false) {
            batch.remove(&key);
        } else {
            batch.insert(&key, Vec::<u8>::arbitrary(&mut u).unwrap_or_default());
        }
    }
    let Ok(()) = store.commit(batch);
    read_everything(&store);
    if let Ok(depth) = Depth::new(u8::arbitrary(&mut u).unwrap_or(4) % 70) {
        // Another requested depth, too: a typed error or the tree, never a panic.
        let _ = SledMerkleTree::<MixHasher, _>::open_store(
            store,
            depth,
            RehashConfig::default(),
            tree_core::persistent::NodeCache::top(2),
        );
    }
}

fn read_everything(store: &MemStore) {
    let depth = match store.get(DEPTH_KEY) {
        Ok(Some(bytes)) if bytes.len() == 1 => bytes[0],
        _ => 4,
    };
    let Ok(depth) = Depth::new(depth) else {
        return;
    };
    let Ok(mut tree) = SledMerkleTree::<MixHasher, _>::open_store(
        store.clone(),
        depth,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    ) else {
        return;
    };
    let root = tree.root();
    let _ = tree.metadata();
    let _ = tree.empty_leaves_indices();
    let consistent = tree
        .verify_integrity()
        .is_ok_and(|issues| issues.is_empty());
    let limit = tree.next_index().min(32) + 1;
    for index in 0..limit {
        let (leaf, proof) = (tree.get(index), tree.proof(index));
        if let (true, Ok(leaf), Ok(proof)) = (consistent, leaf, proof) {
            assert!(
                proof.verify(&root, &leaf),
                "a tree without integrity issues gave a proof that does not verify"
            );
        }
    }
    if let Ok(checkpoints) = tree.checkpoints() {
        for c in &checkpoints {
            let _ = tree.proof_at(&c.root, 0);
        }
        if let Some(first) = checkpoints.first() {
            let _ = tree.rewind_to(first.id);
        }
    }
    let _ = tree.set(0, 5);
}

/// Inputs that select each base tree with a few edits.
pub fn seeds() -> Vec<Vec<u8>> {
    (0u8..6)
        .map(|seed| vec![seed, 2, 0, 3, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8])
        .collect()
}
