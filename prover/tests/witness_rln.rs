//! Our witness-graph evaluator on rln 3.0.0's shipped `graph.bin` and our prover on rln's
//! shipped proving key. A circom key has no C rows, so an assignment is checked the only way
//! that counts: the proof made from it verifies under arkworks' and zerokit's verifiers against
//! the RLN values computed independently (rln-glue's Poseidon and tree, tested against zerokit
//! elsewhere).

use ark_bn254::Fr;
use ark_ff::Zero;
use hasher::PoseidonHasher;
use prover::rln::RlnCircuit;
use prover::WitnessError;
use rln_glue::primitives::IdentitySecret;
use rln_glue::primitives::{external_nullifier, hash_to_field_le, id_commitment, rate_commitment};
use rln_glue::witness::{RlnWitness, MEMBER_INPUTS};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

mod common;

#[test]
fn rln_witness_has_the_public_signals() {
    let graph = RlnCircuit::load().unwrap().graph;
    let (pk, matrices) = &**rln::circuit::default_zkey_single();
    // One query point per wire; L covers the private wires.
    assert_eq!(graph.wires(), pk.a_query.len());
    assert_eq!(
        pk.l_query.len(),
        graph.wires() - matrices.num_instance_variables
    );

    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20).unwrap());
    let secrets: Vec<IdentitySecret> = (1..=5u64)
        .map(|i| IdentitySecret::new(Fr::from(i * 7919)))
        .collect();
    for s in &secrets {
        tree.update_next(rate_commitment(id_commitment(s), Fr::from(10u64)))
            .unwrap();
    }
    for (index, message_id) in [(0usize, 0u64), (3, 9), (4, 5)] {
        let w = RlnWitness::from_tree(
            &tree,
            index as u64,
            &secrets[index],
            Fr::from(10u64),
            Fr::from(message_id),
            hash_to_field_le(format!("message {index}").as_bytes()),
            external_nullifier(Fr::from(7u64), hash_to_field_le(b"witness test")),
        )
        .unwrap();
        let z = graph.witness(&w.circuit_inputs()).unwrap();
        assert_eq!(z[0], Fr::from(1u8));
        assert_eq!(z[1..6], w.public_values().as_inputs(), "public signals");
        assert_eq!(z[2], tree.root());
    }
}

#[test]
fn bad_inputs_are_typed_errors() {
    let graph = RlnCircuit::load().unwrap().graph;
    let zero = [Fr::zero()];
    assert!(matches!(
        graph.witness(&[("nope", &zero)]),
        Err(WitnessError::UnknownInput(_))
    ));
    assert!(matches!(
        graph.witness(&[("pathElements", &zero)]),
        Err(WitnessError::InputLength {
            expected: 20,
            got: 1,
            ..
        })
    ));
    assert!(matches!(
        graph.witness(&[("x", &zero)]),
        Err(WitnessError::MissingInput(_))
    ));
    let names: Vec<&str> = graph.inputs().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 7, "{names:?}");
}

#[test]
fn proofs_from_our_witness_verify_under_arkworks_and_zerokit() {
    use ark_groth16::{prepare_verifying_key, Groth16};

    let RlnCircuit { graph, prover } = RlnCircuit::load().unwrap();
    let (pk, _) = &**rln::circuit::default_zkey_single();
    let pvk = prepare_verifying_key(&pk.vk);
    let zerokit = rln::prelude::RLNBuilder::stateless().build();

    let w = common::lone_member_witness(
        77,
        4242,
        10,
        3,
        hash_to_field_le(b"hello"),
        external_nullifier(Fr::from(1u64), hash_to_field_le(b"proof test")),
    );
    let z = graph.witness(&w.circuit_inputs()).unwrap();
    let public = w.public_values();
    let mut rng = rand::rngs::OsRng;
    let proof = prover.prove(&z, &mut rng).unwrap();
    assert!(Groth16::<ark_bn254::Bn254>::verify_proof(&pvk, &proof, &public.as_inputs()).unwrap());
    assert!(
        zerokit.verify(&proof, &public.to_zerokit()).unwrap(),
        "zerokit's verifier"
    );
    // Fresh blinding: a second proof of the same witness differs and verifies too.
    let again = prover.prove(&z, &mut rng).unwrap();
    assert_ne!(again, proof);
    assert!(Groth16::<ark_bn254::Bn254>::verify_proof(&pvk, &again, &public.as_inputs()).unwrap());
    // The wrong public values do not verify.
    let mut wrong = public.as_inputs();
    wrong[0] += Fr::from(1u8);
    assert!(!Groth16::<ark_bn254::Bn254>::verify_proof(&pvk, &proof, &wrong).unwrap());
}

#[test]
fn partial_proofs_finish_to_the_same_verifying_proofs() {
    use ark_groth16::{prepare_verifying_key, Groth16};

    let RlnCircuit { graph, prover } = RlnCircuit::load().unwrap();
    let pvk = prepare_verifying_key(&rln::circuit::default_zkey_single().0.vk);
    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20).unwrap());
    let secret = IdentitySecret::new(Fr::from(99u64));
    tree.set(5, rate_commitment(id_commitment(&secret), Fr::from(10u64)))
        .unwrap();
    let message = |k: u64| {
        RlnWitness::from_tree(
            &tree,
            5,
            &secret,
            Fr::from(10u64),
            Fr::from(k % 10),
            hash_to_field_le(format!("message {k}").as_bytes()),
            external_nullifier(Fr::from(k), hash_to_field_le(b"partial")),
        )
        .unwrap()
    };
    // What the member fixes: secret, limit, path.
    let first = message(0).circuit_inputs();
    let member: Vec<(&str, &[Fr])> = first
        .iter()
        .filter(|(n, _)| MEMBER_INPUTS.contains(n))
        .map(|(n, v)| (*n, v.as_slice()))
        .collect();
    let known = graph.partial_witness(&member).unwrap();
    let fixed = known.iter().filter(|v| v.is_some()).count();
    assert!(
        fixed > known.len() / 2 && fixed < known.len(),
        "{fixed} of {} wires fixed",
        known.len()
    );
    let partial = prover.partial(&known).unwrap();
    let mut rng = rand::rngs::OsRng;
    for k in 1..4 {
        let w = message(k);
        let z = graph.witness(&w.circuit_inputs()).unwrap();
        for (wire, value) in known.iter().enumerate() {
            if let Some(v) = value {
                assert_eq!(*v, z[wire], "a known wire keeps its value");
            }
        }
        let proof = prover.finish(&partial, &z, &mut rng).unwrap();
        assert!(Groth16::<ark_bn254::Bn254>::verify_proof(
            &pvk,
            &proof,
            &w.public_values().as_inputs()
        )
        .unwrap());
    }
    // Another member's assignment does not finish this member's partial proof.
    let other = IdentitySecret::new(Fr::from(100u64));
    tree.set(6, rate_commitment(id_commitment(&other), Fr::from(10u64)))
        .unwrap();
    let w = RlnWitness::from_tree(
        &tree,
        6,
        &other,
        Fr::from(10u64),
        Fr::from(1u64),
        Fr::from(2u64),
        Fr::from(3u64),
    )
    .unwrap();
    let z = graph.witness(&w.circuit_inputs()).unwrap();
    assert!(matches!(
        prover.finish(&partial, &z, &mut rng),
        Err(prover::ProverError::PartialMismatch { .. })
    ));
}

#[test]
fn a_table_budget_thins_the_shifts_and_proofs_still_verify() {
    use ark_groth16::{prepare_verifying_key, Groth16};
    use prover::{Arithmetic, ProverConfig, ProverError};

    let default = RlnCircuit::load().unwrap();
    let default_bytes = default.prover.table_bytes();
    assert!(default_bytes <= ProverConfig::default().table_budget_bytes);
    // Half what the default tables take (on either arithmetic), on the portable path: the
    // whole prover on ark-ff, on any CPU.
    let config = ProverConfig {
        table_budget_bytes: default_bytes / 2,
        arithmetic: Arithmetic::Portable,
    };
    assert!(config.table_budget_bytes < default_bytes);
    let RlnCircuit { graph, prover } = RlnCircuit::load_with(&config).unwrap();
    assert!(prover.table_bytes() <= config.table_budget_bytes);
    let (pk, _) = &**rln::circuit::default_zkey_single();
    let pvk = prepare_verifying_key(&pk.vk);
    let w = common::lone_member_witness(
        5,
        99,
        3,
        2,
        hash_to_field_le(b"budget"),
        external_nullifier(Fr::from(4u64), hash_to_field_le(b"budget test")),
    );
    let z = graph.witness(&w.circuit_inputs()).unwrap();
    let proof = prover.prove(&z, &mut rand::rngs::OsRng).unwrap();
    let public = w.public_values().as_inputs();
    assert!(Groth16::<ark_bn254::Bn254>::verify_proof(&pvk, &proof, &public).unwrap());
    // No window is wide enough for a mebibyte.
    let tiny = ProverConfig {
        table_budget_bytes: 1 << 20,
        ..ProverConfig::default()
    };
    assert!(matches!(
        RlnCircuit::load_with(&tiny),
        Err(ProverError::TableBudget { budget, .. }) if budget == 1 << 20
    ));
}

/// A budget of 0 builds no tables: the prover holds only the key's points, sums with
/// arkworks' MSMs, and its proofs (whole, and partial then finished) verify.
#[test]
fn a_zero_budget_proves_without_tables() {
    use ark_groth16::{prepare_verifying_key, Groth16};
    use prover::ProverConfig;

    let none = ProverConfig {
        table_budget_bytes: 0,
        ..ProverConfig::default()
    };
    let RlnCircuit { graph, prover } = RlnCircuit::load_with(&none).unwrap();
    let (pk, _) = &**rln::circuit::default_zkey_single();
    // A copy of each query's points that are not the identity, nothing more.
    let finite = |q: &[ark_bn254::G1Affine]| q.iter().filter(|p| !p.infinity).count();
    let points = finite(&pk.a_query) + finite(&pk.b_g1_query) + finite(&pk.h_query);
    let points = points + finite(&pk.l_query);
    let g2_points = pk.b_g2_query.iter().filter(|p| !p.infinity).count();
    let g1 = std::mem::size_of::<ark_bn254::G1Affine>();
    let g2 = std::mem::size_of::<ark_bn254::G2Affine>();
    let expected = if prover::lanes::ifma_available() {
        // Lane form: 2·5 words a G1 point, twice that for G2.
        points * 80 + g2_points * 160
    } else {
        points * g1 + g2_points * g2
    };
    assert_eq!(prover.table_bytes(), expected, "only the key's own points");
    let pvk = prepare_verifying_key(&pk.vk);
    let w = common::lone_member_witness(
        6,
        99,
        3,
        2,
        hash_to_field_le(b"no tables"),
        external_nullifier(Fr::from(4u64), hash_to_field_le(b"no tables test")),
    );
    let z = graph.witness(&w.circuit_inputs()).unwrap();
    let public = w.public_values().as_inputs();
    let proof = prover.prove(&z, &mut rand::rngs::OsRng).unwrap();
    assert!(Groth16::<ark_bn254::Bn254>::verify_proof(&pvk, &proof, &public).unwrap());
    // Known wires summed first (a member's share), the rest at finish.
    let known: Vec<Option<Fr>> = z
        .iter()
        .enumerate()
        .map(|(i, v)| (i % 3 == 0).then_some(*v))
        .collect();
    let partial = prover.partial(&known).unwrap();
    let proof = prover.finish(&partial, &z, &mut rand::rngs::OsRng).unwrap();
    assert!(Groth16::<ark_bn254::Bn254>::verify_proof(&pvk, &proof, &public).unwrap());
}
