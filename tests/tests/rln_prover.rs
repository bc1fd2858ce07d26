//! Canopy's own RLN prover (`rln_glue::proving`, the `prover` crate on rln 3.0.0's shipped
//! circuit and key): for random members of a tree, messages and epochs, every proof verifies
//! under zerokit's verifier, arkworks' Groth16 verifier and ours, against values computed
//! independently; two proofs of one witness differ; a proof does not verify for other values.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::LazyLock;

use ark_groth16::{prepare_verifying_key, Groth16, PreparedVerifyingKey};
use hasher::{Fr, PoseidonHasher};
use proptest::prelude::*;
use rln::prelude::{ArkGroth16Backend, PoseidonHash, RLNBuilder, Stateless, RLN};
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::proving::RlnProver;
use rln_glue::verifier::RlnVerifier;
use rln_glue::witness::RlnWitness;
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

const LIMIT: u64 = 20;

struct Setup {
    prover: RlnProver,
    zerokit: RLN<Stateless, ArkGroth16Backend<PoseidonHash>>,
    ours: RlnVerifier,
    arkworks: PreparedVerifyingKey<ark_bn254::Bn254>,
}

static SETUP: LazyLock<Setup> = LazyLock::new(|| Setup {
    prover: RlnProver::load().expect("rln circuit"),
    zerokit: RLNBuilder::stateless().build(),
    ours: RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes()).expect("vk"),
    arkworks: prepare_verifying_key(&rln::prelude::default_zkey_single().0.vk),
});

proptest! {
    // Each case is one witness and two proofs (~0.2 s in this profile); the default is sized
    // for CI, more with PROPTEST_CASES.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).map_or(6, |n: u32| (n / 32).max(6))
    ))]
    #[test]
    fn random_members_messages_and_epochs(
        secrets in prop::collection::vec(1u64..u64::MAX, 1..6),
        pick in any::<prop::sample::Index>(),
        first_index in 0u64..(1 << 20) - 8,
        message_id in 0..LIMIT,
        message in prop::collection::vec(any::<u8>(), 0..64),
        epoch in any::<u64>(),
    ) {
        let setup = &*SETUP;
        let secrets: Vec<IdentitySecret> =
            secrets.iter().map(|&s| IdentitySecret::new(Fr::from(s))).collect();
        let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20).unwrap());
        let leaves = secrets.iter().map(|s| rate_commitment(id_commitment(s), Fr::from(LIMIT)));
        tree.set_range(first_index, leaves).unwrap();
        let k = pick.index(secrets.len());
        let index = first_index + k as u64;
        let witness = RlnWitness::from_tree(
            &tree,
            index,
            &secrets[k],
            Fr::from(LIMIT),
            Fr::from(message_id),
            hash_to_field_le(&message),
            external_nullifier(Fr::from(epoch), hash_to_field_le(b"rln prover property")),
        )
        .unwrap();
        let mut rng = rand::rngs::OsRng;
        let (proof, values) = setup.prover.prove(&witness, &mut rng).unwrap();
        prop_assert_eq!(values, witness.public_values());
        prop_assert_eq!(values.root, tree.root());
        prop_assert!(setup.zerokit.verify(&proof, &values.to_zerokit()).unwrap());
        prop_assert!(Groth16::<ark_bn254::Bn254>::verify_proof(&setup.arkworks, &proof, &values.as_inputs()).unwrap());
        prop_assert!(setup.ours.verify_inputs(&proof, &values.as_inputs()));

        let (again, _) = setup.prover.prove(&witness, &mut rng).unwrap();
        prop_assert_ne!(&again, &proof);
        prop_assert!(setup.ours.verify_inputs(&again, &values.as_inputs()));

        let mut other = values.as_inputs();
        other[1] += Fr::from(1u8); // another root
        prop_assert!(!setup.ours.verify_inputs(&proof, &other));
        let moved = rln_glue::witness::PublicValues { root: other[1], ..values };
        prop_assert!(!setup.zerokit.verify(&proof, &moved.to_zerokit()).unwrap_or(false));
    }
}
