//! Test support shared by the prover's integration tests.

// Test setup: a failure here is a broken test, reported where it happens.
#![allow(clippy::expect_used)]

use ark_bn254::Fr;
use hasher::PoseidonHasher;
use rln_glue::primitives::{id_commitment, rate_commitment, IdentitySecret};
use rln_glue::witness::RlnWitness;
use tree_core::{Depth, MerkleTreeExt, OptimalMerkleTree};

/// The witness of the one member of a depth-20 tree (at `index`, its secret `secret`, its rate
/// `limit`) for message `message_id` with signal hash `x` under `external_nullifier`.
pub fn lone_member_witness(
    index: u64,
    secret: u64,
    limit: u64,
    message_id: u64,
    x: Fr,
    external_nullifier: Fr,
) -> RlnWitness {
    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20).expect("depth"));
    let secret = IdentitySecret::new(Fr::from(secret));
    tree.set(
        index,
        rate_commitment(id_commitment(&secret), Fr::from(limit)),
    )
    .expect("set");
    RlnWitness::from_tree(
        &tree,
        index,
        &secret,
        Fr::from(limit),
        Fr::from(message_id),
        x,
        external_nullifier,
    )
    .expect("witness")
}
