//! Our RLN primitives against zerokit `rln` 3.0.0 on random inputs: identity keys, rate
//! commitments, external nullifiers, hash_to_field, shares, nullifiers, roots, slashing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ark_std::rand::{rngs::StdRng, Rng, SeedableRng};
use ark_std::UniformRand;
use hasher::Fr;
use rln::prelude::{
    compute_id_secret, hash_to_field_be, hash_to_field_le, ExtendedIdentityKeys as ZkExtended,
    Hasher as ZkHasher, IdentityKeys as ZkKeys, PoseidonHash, RLNMerkleProof, RLNProofValues,
    RLNWitnessInput, SecretFr,
};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_be as ours_be, hash_to_field_le as ours_le, id_commitment,
    rate_commitment, recover_secret, share, ExtendedIdentityKeys, IdentityKeys, IdentitySecret,
    RlnError,
};
use rln_glue::witness::{RlnWitness, WitnessError};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

const CASES: usize = 1000;

#[test]
fn keys_commitments_and_hash_to_field_equal_zerokit() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..CASES {
        let theirs = ZkKeys::generate::<PoseidonHash, _>(&mut rng);
        let ours = IdentityKeys::from_secret(IdentitySecret::new(*theirs.identity_secret()));
        assert_eq!(ours.id_commitment(), theirs.id_commitment());

        let extended = ZkExtended::generate::<PoseidonHash, _>(&mut rng);
        let ours = ExtendedIdentityKeys::from_parts(
            IdentitySecret::new(*extended.identity_trapdoor()),
            IdentitySecret::new(*extended.identity_nullifier()),
        );
        assert_eq!(ours.keys().secret().expose(), *extended.identity_secret());
        assert_eq!(ours.keys().id_commitment(), extended.id_commitment());

        let (a, b) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        assert_eq!(
            rate_commitment(a, b),
            ZkHasher::<PoseidonHash>::hash_pair(a, b)
        );
        assert_eq!(
            external_nullifier(a, b),
            ZkHasher::<PoseidonHash>::hash_pair(a, b)
        );

        let len = rng.gen_range(0..100);
        let signal: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        assert_eq!(ours_le(&signal), hash_to_field_le(&signal));
        assert_eq!(ours_be(&signal), hash_to_field_be(&signal));
    }
}

/// Witnesses from our tree give the proof values zerokit computes from the same witness.
#[test]
fn proof_values_and_slashing_equal_zerokit() {
    let mut rng = StdRng::seed_from_u64(11);
    let depth = Depth::new(20).unwrap();
    let mut tree = OptimalMerkleTree::new(depth);
    let members: Vec<(IdentitySecret, u64)> = (0..64)
        .map(|_| {
            (
                IdentitySecret::new(Fr::rand(&mut rng)),
                rng.gen_range(1..100u64),
            )
        })
        .collect();
    let leaves: Vec<Fr> = members
        .iter()
        .map(|(s, limit)| rate_commitment(id_commitment(s), Fr::from(*limit)))
        .collect();
    tree.set_range(0, leaves).unwrap();
    for case in 0..CASES {
        let index = rng.gen_range(0..members.len());
        let (secret, limit) = &members[index];
        let message_id = Fr::from(rng.gen_range(0..*limit));
        let limit = &Fr::from(*limit);
        let (x, ext) = (Fr::rand(&mut rng), Fr::rand(&mut rng));
        let ours =
            RlnWitness::from_tree(&tree, index as u64, secret, *limit, message_id, x, ext).unwrap();
        let values = ours.public_values();
        if case % 10 == 0 {
            let mut raw = secret.expose();
            let theirs = RLNWitnessInput::new_single()
                .identity_secret(SecretFr::from(&mut raw))
                .user_message_limit(*limit)
                .merkle_proof(RLNMerkleProof::new(
                    ours.path_elements.clone(),
                    ours.identity_path_index.clone(),
                ))
                .x(x)
                .external_nullifier(ext)
                .message_id(message_id)
                .build()
                .unwrap();
            let expected = RLNProofValues::from_witness::<PoseidonHash>(&theirs);
            assert_eq!(values.root, expected.root());
            assert_eq!(values.root, tree.root());
            assert_eq!(Some(values.y), expected.y());
            assert_eq!(Some(values.nullifier), expected.nullifier());
        }
        // Slashing: a second message in the same epoch with the same message id.
        let first = share(secret, ext, message_id, x);
        let second = share(secret, ext, message_id, Fr::rand(&mut rng));
        let recovered = recover_secret(&first, &second).unwrap();
        assert_eq!(recovered, *secret);
        let theirs = compute_id_secret((first.x, first.y), (second.x, second.y)).unwrap();
        assert_eq!(recovered.expose(), *theirs);
    }
}

#[test]
fn bad_witnesses_and_shares_are_typed_errors() {
    let depth = Depth::new(10).unwrap();
    let mut tree = OptimalMerkleTree::new(depth);
    let secret = IdentitySecret::new(Fr::from(5u64));
    let limit = Fr::from(3u64);
    tree.update_next(rate_commitment(id_commitment(&secret), limit))
        .unwrap();
    tree.update_next(Fr::from(77u64)).unwrap();
    let build = |tree: &OptimalMerkleTree<hasher::PoseidonHasher>, index: u64, message_id: u64| {
        RlnWitness::from_tree(
            tree,
            index,
            &secret,
            limit,
            Fr::from(message_id),
            Fr::from(1u64),
            Fr::from(2u64),
        )
    };
    assert!(build(&tree, 0, 2).is_ok());
    assert!(matches!(
        build(&tree, 0, 3),
        Err(WitnessError::MessageIdOutOfRange)
    ));
    assert!(matches!(
        build(&tree, 1, 0),
        Err(WitnessError::LeafMismatch { index: 1 })
    ));
    assert!(matches!(
        build(&tree, 2, 0),
        Err(WitnessError::NoMember {
            index: 2,
            next_index: 2
        })
    ));
    let json = build(&tree, 0, 1).unwrap().to_circom_json();
    assert_eq!(json["identitySecret"], "5");
    assert_eq!(json["pathElements"].as_array().unwrap().len(), 10);
    assert_eq!(json["identityPathIndex"][0], 0);
    tree.delete(0).unwrap();
    assert!(matches!(
        build(&tree, 0, 0),
        Err(WitnessError::LeafMismatch { index: 0 })
    ));

    let a = share(&secret, Fr::from(9u64), Fr::from(0u64), Fr::from(4u64));
    assert_eq!(recover_secret(&a, &a), Err(RlnError::SameSignal));
    let other_epoch = share(&secret, Fr::from(10u64), Fr::from(0u64), Fr::from(5u64));
    assert_eq!(
        recover_secret(&a, &other_epoch),
        Err(RlnError::ExternalNullifierMismatch)
    );
    let other_id = share(&secret, Fr::from(9u64), Fr::from(1u64), Fr::from(5u64));
    assert_eq!(
        recover_secret(&a, &other_id),
        Err(RlnError::NullifierMismatch)
    );
    assert_eq!(format!("{secret:?}"), "IdentitySecret(<redacted>)");
}
