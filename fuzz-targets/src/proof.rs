//! Proof decoding and verification: Merkle proofs from bytes and from RLN's path parts, and
//! Groth16 RLN proofs from bytes.
//!
//! Invariants: Merkle proof bytes decode only at their own depth and re-encode to the same bytes;
//! the path bits of a decoded proof rebuild it; a proof verifies only against the root it folds
//! to; RLN proof bytes of any length other than 128 are refused; nothing panics.

use arbitrary::{Arbitrary, Unstructured};
use hasher::PoseidonHasher;
use rln_glue::verifier::{proof_from_bytes, proof_to_bytes, PROOF_LEN};
use tree_core::testing::MixHasher;
use tree_core::{Depth, MerkleProof, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

/// Decodes `data` as every proof kind.
pub fn run(data: &[u8]) {
    merkle::<MixHasher>(data);
    merkle::<PoseidonHasher>(data);
    if let Ok(proof) = proof_from_bytes(data) {
        assert_eq!(
            data.len(),
            PROOF_LEN,
            "an RLN proof of the wrong length was accepted"
        );
        let _ = proof_to_bytes(&proof);
    }
    let mut u = Unstructured::new(data);
    let siblings: Vec<u64> = Vec::arbitrary(&mut u).unwrap_or_default();
    let bits: Vec<u8> = Vec::arbitrary(&mut u).unwrap_or_default();
    if let Ok(proof) = MerkleProof::<MixHasher>::from_path(siblings.clone(), &bits) {
        assert_eq!(proof.path_index(), bits, "path bits do not round-trip");
        assert_eq!(proof.path_elements(), siblings.as_slice());
    }
}

fn merkle<H: hasher::DigestCodec>(data: &[u8]) {
    let Some(&depth) = data.first() else {
        return;
    };
    for asked in [depth, depth.wrapping_add(1)] {
        let Ok(depth) = Depth::new(asked) else {
            continue;
        };
        let Ok(proof) = MerkleProof::<H>::from_bytes(data, depth) else {
            continue;
        };
        assert_eq!(proof.len(), usize::from(depth.get()));
        assert_eq!(proof.to_bytes(), data, "proof bytes do not round-trip");
        let leaf = H::empty_leaf();
        let root = proof.compute_root(&leaf);
        assert!(proof.verify(&root, &leaf));
        let rebuilt =
            MerkleProof::<H>::from_path(proof.path_elements().to_vec(), &proof.path_index());
        assert_eq!(
            rebuilt.ok().as_ref(),
            Some(&proof),
            "path bits do not rebuild the proof"
        );
    }
}

/// Proofs from a small tree, and 128-byte strings.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![vec![0u8; PROOF_LEN], vec![0xff; PROOF_LEN]];
    let Ok(depth) = Depth::new(6) else {
        return seeds;
    };
    let mut tree = OptimalMerkleTree::<MixHasher>::new(depth);
    let _ = tree.set_range(0, 1..=20u64);
    let mut poseidon = OptimalMerkleTree::<PoseidonHasher>::new(depth);
    let _ = poseidon.set_range(0, (1..=20u64).map(hasher::Fr::from));
    for index in [0, 5, 19, 63] {
        if let Ok(proof) = tree.proof(index) {
            seeds.push(proof.to_bytes());
        }
        if let Ok(proof) = poseidon.proof(index) {
            seeds.push(proof.to_bytes());
        }
    }
    seeds
}
