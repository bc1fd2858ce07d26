//! Real RLN proofs over our trees through zerokit's prover (rln 3.0.0, its shipped depth-20
//! circuit): proof values equal our primitives, zerokit's stateless verifier accepts them against
//! our roots, a removed member's old proof is refused against the new root alone and accepted
//! against a window that still holds the old one. Proofs take ~0.5 s each: kept few.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ark_std::rand::{rngs::StdRng, SeedableRng};
use ark_std::UniformRand;
use hasher::{Fr, PoseidonHasher};
use rln::prelude::{
    PoseidonHash, RLNBuilder, RLNMerkleProof, RLNProofValues, RLNWitnessInput, SecretFr,
    VerifyProofError,
};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::verifier::{proof_from_bytes, proof_to_bytes, RlnVerifier, VerifyError, PROOF_LEN};
use rln_glue::witness::PublicValues;
use rln_glue::witness::RlnWitness;
use rln_glue::zerokit::{ZerokitProof, ZerokitTree};
use tree_core::{Depth, FullMerkleTree, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_core::{History, HistoryConfig};
use tree_sled::{SledConfig, SledMerkleTree};
use zerokit_utils::merkle_tree::{FullMerkleTree as ZkFull, ZerokitMerkleProof, ZerokitMerkleTree};

const LIMIT: u64 = 10;

struct Members {
    secrets: Vec<IdentitySecret>,
    leaves: Vec<Fr>,
}

fn members(n: usize) -> Members {
    let mut rng = StdRng::seed_from_u64(2026);
    let secrets: Vec<IdentitySecret> = (0..n)
        .map(|_| IdentitySecret::new(Fr::rand(&mut rng)))
        .collect();
    let leaves = secrets
        .iter()
        .map(|s| rate_commitment(id_commitment(s), Fr::from(LIMIT)))
        .collect();
    Members { secrets, leaves }
}

/// Our witness in zerokit's type, checked against zerokit's own serialization of a witness built
/// field by field.
fn zk_witness(w: &RlnWitness) -> RLNWitnessInput {
    use ark_serialize::CanonicalSerialize;
    let mut secret = w.identity_secret.expose();
    let by_hand = RLNWitnessInput::new_single()
        .identity_secret(SecretFr::from(&mut secret))
        .user_message_limit(w.user_message_limit)
        .merkle_proof(RLNMerkleProof::new(
            w.path_elements.clone(),
            w.identity_path_index.clone(),
        ))
        .x(w.x)
        .external_nullifier(w.external_nullifier)
        .message_id(w.message_id)
        .build()
        .unwrap();
    let mut bytes = Vec::new();
    by_hand.serialize_compressed(&mut bytes).unwrap();
    assert_eq!(w.to_zerokit_bytes_le().unwrap(), bytes);
    w.to_zerokit().unwrap()
}

fn message(
    tree: &impl MerkleTree<Hasher = PoseidonHasher, Error = impl std::error::Error + 'static>,
    m: &Members,
    index: u64,
) -> RlnWitness {
    let x = hash_to_field_le(b"hello waku");
    let ext = external_nullifier(Fr::from(1234u64), hash_to_field_le(b"canopy-test"));
    RlnWitness::from_tree(
        tree,
        index,
        &m.secrets[index as usize],
        Fr::from(LIMIT),
        Fr::from(1u64),
        x,
        ext,
    )
    .unwrap()
}

#[test]
fn proof_over_the_sled_tree_and_root_window() {
    let m = members(16);
    let dir = tempfile::tempdir().unwrap();
    let mut tree = SledMerkleTree::<PoseidonHasher>::open(
        &SledConfig::new(dir.path()),
        Depth::new(20).unwrap(),
    )
    .unwrap();
    tree.override_range(0, m.leaves.iter().copied(), [])
        .unwrap(); // one atomic batch
    let witness = message(&tree, &m, 5);
    let ours = witness.public_values();

    let mut rln = RLNBuilder::stateful().tree(ZerokitTree(tree)).build();
    let old_root = rln.get_root();
    assert_eq!(old_root, ours.root);
    // The stateful instance's Merkle proof is ours, and equals the witness path.
    let proof: ZerokitProof = rln.get_merkle_proof(5).unwrap();
    assert_eq!(proof.get_path_elements(), witness.path_elements);
    assert_eq!(proof.get_path_index(), witness.identity_path_index);

    let (zk_proof, values) = rln.generate_proof(&zk_witness(&witness)).unwrap();
    assert_eq!(values.root(), ours.root);
    assert_eq!(values.y(), Some(ours.y));
    assert_eq!(values.nullifier(), Some(ours.nullifier));

    let verifier = RLNBuilder::stateless().build();
    assert!(verifier
        .verify_with_roots(&zk_proof, &values, &ours.x, &[old_root])
        .unwrap());
    // Tampered signal and unknown root are refused.
    assert!(matches!(
        verifier.verify_with_roots(&zk_proof, &values, &(ours.x + Fr::from(1u64)), &[old_root]),
        Err(VerifyProofError::InvalidSignal)
    ));

    // The member is removed: the old proof is refused against the new root alone, accepted
    // against a window that still holds the old root.
    rln.delete_leaf(5).unwrap();
    let new_root = rln.get_root();
    assert_ne!(new_root, old_root);
    assert!(matches!(
        verifier.verify_with_roots(&zk_proof, &values, &ours.x, &[new_root]),
        Err(VerifyProofError::InvalidRoot)
    ));
    assert!(verifier
        .verify_with_roots(&zk_proof, &values, &ours.x, &[new_root, old_root])
        .unwrap());
}

/// The same member's witness from our three trees and from zerokit's FullMerkleTree holding the
/// same leaves is identical, and a proof made through each of them is accepted.
#[test]
fn same_witness_from_every_tree_and_zerokit() {
    let m = members(8);
    let depth = Depth::new(20).unwrap();
    let mut optimal = OptimalMerkleTree::<PoseidonHasher>::new(depth);
    let mut full = FullMerkleTree::<PoseidonHasher>::new(depth).unwrap();
    let mut sled = SledMerkleTree::<PoseidonHasher>::open(&SledConfig::temporary(), depth).unwrap();
    optimal.set_range(0, m.leaves.iter().copied()).unwrap();
    full.set_range(0, m.leaves.iter().copied()).unwrap();
    sled.set_range(0, m.leaves.iter().copied()).unwrap();
    let mut theirs = ZkFull::<PoseidonHash>::default(20).unwrap();
    theirs.set_range(0, m.leaves.iter().copied()).unwrap();

    let w = message(&optimal, &m, 3);
    assert_eq!(message(&full, &m, 3), w);
    assert_eq!(message(&sled, &m, 3), w);
    let zk = theirs.proof(3).unwrap();
    assert_eq!(zk.get_path_elements(), w.path_elements);
    assert_eq!(zk.get_path_index(), w.identity_path_index);

    // A proof from each tree, through a stateful RLN over it, each accepted by zerokit's
    // stateless verifier against the common root.
    let root = optimal.root();
    let verifier = RLNBuilder::stateless().build();
    let check = |proof_and_values: (rln::prelude::Proof, RLNProofValues)| {
        let (proof, values) = proof_and_values;
        assert_eq!(values.root(), root);
        assert!(verifier
            .verify_with_roots(&proof, &values, &w.x, &[root])
            .unwrap());
    };
    let zk_w = zk_witness(&w);
    check(
        RLNBuilder::stateful()
            .tree(ZerokitTree(optimal))
            .build()
            .generate_proof(&zk_w)
            .unwrap(),
    );
    check(
        RLNBuilder::stateful()
            .tree(ZerokitTree(full))
            .build()
            .generate_proof(&zk_w)
            .unwrap(),
    );
    check(
        RLNBuilder::stateful()
            .tree(ZerokitTree(sled))
            .build()
            .generate_proof(&zk_w)
            .unwrap(),
    );
    check(
        RLNBuilder::stateful()
            .tree(theirs)
            .build()
            .generate_proof(&zk_w)
            .unwrap(),
    );
}

/// The verifier that needs only the verifying key accepts exactly what zerokit's verifier
/// accepts: the real proof, and none of its tampered variants; the window check gives typed
/// verdicts against the sled tree's persisted root window.
#[test]
fn vk_only_verifier_agrees_with_zerokit_and_checks_the_window() {
    let m = members(4);
    let mut tree =
        SledMerkleTree::<PoseidonHasher>::open(&SledConfig::temporary(), Depth::new(20).unwrap())
            .unwrap();
    tree.set_range(0, m.leaves.iter().copied()).unwrap();
    tree.checkpoint(1).unwrap();
    let witness = message(&tree, &m, 2);
    let prover = RLNBuilder::stateless().build();
    let (proof, values) = prover.generate_proof(&zk_witness(&witness)).unwrap();
    let ours = witness.public_values();
    assert_eq!(values.root(), ours.root);

    let verifier = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes()).unwrap();
    let one = Fr::from(1u64);
    let variants: Vec<(&str, PublicValues)> = vec![
        ("original", ours),
        (
            "wrong root",
            PublicValues {
                root: ours.root + one,
                ..ours
            },
        ),
        (
            "wrong x",
            PublicValues {
                x: ours.x + one,
                ..ours
            },
        ),
        (
            "tampered y",
            PublicValues {
                y: ours.y + one,
                ..ours
            },
        ),
        (
            "tampered nullifier",
            PublicValues {
                nullifier: ours.nullifier + one,
                ..ours
            },
        ),
        (
            "tampered external nullifier",
            PublicValues {
                external_nullifier: ours.external_nullifier + one,
                ..ours
            },
        ),
        // Wrong public-input order: root and y swapped.
        (
            "swapped order",
            PublicValues {
                y: ours.root,
                root: ours.y,
                ..ours
            },
        ),
    ];
    for (name, v) in &variants {
        let theirs = v.to_zerokit();
        let zerokit_says = prover.verify(&proof, &theirs).unwrap_or(false);
        assert_eq!(
            verifier.verify_inputs(&proof, &v.as_inputs()),
            zerokit_says,
            "{name}"
        );
        assert_eq!(zerokit_says, *name == "original", "{name}");
    }
    // Proof bytes: a round trip, and a wrong length is a typed error.
    let bytes = proof_to_bytes(&proof);
    assert_eq!(bytes.len(), PROOF_LEN);
    assert_eq!(proof_from_bytes(&bytes).unwrap(), proof);
    assert!(matches!(
        proof_from_bytes(&bytes[..100]),
        Err(VerifyError::MalformedProof { found: 100 })
    ));
    assert!(matches!(
        RlnVerifier::from_bytes(&[1, 2, 3]),
        Err(VerifyError::MalformedKey)
    ));

    // The window: the member is removed in block 2; the old root stays acceptable for a window of
    // 2 roots, and after a restart; with a window of 1 it is an unknown root.
    assert!(verifier
        .verify_against(&proof, &ours, &ours.x, &tree)
        .is_ok());
    tree.delete(2).unwrap();
    tree.checkpoint(2).unwrap();
    tree.set_history_config(HistoryConfig {
        max_checkpoints: 8,
        root_window: 2,
    })
    .unwrap();
    assert!(verifier
        .verify_against(&proof, &ours, &ours.x, &tree)
        .is_ok());
    assert!(matches!(
        verifier.verify_against(&proof, &ours, &(ours.x + one), &tree),
        Err(VerifyError::SignalMismatch)
    ));
    let forged = PublicValues {
        nullifier: ours.nullifier + one,
        ..ours
    };
    assert!(matches!(
        verifier.verify_against(&proof, &forged, &ours.x, &tree),
        Err(VerifyError::BadProof)
    ));
    tree.set_history_config(HistoryConfig {
        max_checkpoints: 8,
        root_window: 1,
    })
    .unwrap();
    assert!(matches!(
        verifier.verify_against(&proof, &ours, &ours.x, &tree),
        Err(VerifyError::UnknownRoot)
    ));
}

/// Slashing from real proofs: two messages in one epoch with the same message id reveal the
/// member's secret.
#[test]
fn two_messages_with_one_message_id_reveal_the_secret() {
    let m = members(4);
    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20).unwrap());
    tree.set_range(0, m.leaves.iter().copied()).unwrap();
    let first = message(&tree, &m, 1);
    let mut second = first.clone();
    second.x = hash_to_field_le(b"a second message, same epoch and message id");
    let prover = RLNBuilder::stateless().build();
    let (_, v1) = prover.generate_proof(&zk_witness(&first)).unwrap();
    let (_, v2) = prover.generate_proof(&zk_witness(&second)).unwrap();
    assert_eq!(v1.nullifier(), v2.nullifier());
    let share = |v: &RLNProofValues| rln_glue::primitives::Share {
        x: v.x(),
        y: v.y().unwrap(),
        nullifier: v.nullifier().unwrap(),
        external_nullifier: v.external_nullifier(),
    };
    let secret = rln_glue::primitives::recover_secret(&share(&v1), &share(&v2)).unwrap();
    assert_eq!(secret, m.secrets[1]);
}
