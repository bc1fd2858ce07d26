//! The vendored circuit files are zerokit's: the arkzkey parses to exactly the proving key and
//! matrices rln 3.0.0 loads from its own copy (and rln 2.0.2 ships the same bytes; the C harness
//! in librln/ proves it by cross-verification), and hostile key bytes get an error, never an
//! allocation the input did not pay for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use prover::rln::{Zkey, ARKZKEY, GRAPH};
use prover::{ProverError, WitnessGraph};

#[test]
fn the_vendored_key_is_the_one_zerokit_loads() {
    let ours = Zkey::from_bytes(ARKZKEY).unwrap();
    let (pk, matrices) = &**rln::circuit::default_zkey_single();
    assert_eq!(&ours.pk, pk);
    assert_eq!(ours.num_instance_variables, matrices.num_instance_variables);
    assert_eq!(ours.a, matrices.a);
    assert_eq!(ours.b, matrices.b);
    let graph = WitnessGraph::from_bytes(GRAPH).unwrap();
    ours.check_graph(&graph).unwrap();
    let depth = graph
        .inputs()
        .find(|(name, _)| *name == "pathElements")
        .map(|(_, n)| n);
    assert_eq!(depth, Some(20));
}

#[test]
fn hostile_key_bytes_are_refused() {
    assert!(matches!(
        Zkey::from_bytes(&[]),
        Err(ProverError::KeyShape(_))
    ));
    // Cut anywhere: refused.
    for cut in [1, 63, 64, 500, ARKZKEY.len() / 2, ARKZKEY.len() - 1] {
        assert!(Zkey::from_bytes(&ARKZKEY[..cut]).is_err(), "cut at {cut}");
    }
    // A list prefix claiming 2^60 points (gamma_abc_g1's, after four points of the key):
    // refused before anything is reserved for it.
    let at = 64 + 3 * 128;
    let mut hostile = ARKZKEY[..at + 8].to_vec();
    hostile[at..at + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    hostile.extend_from_slice(&[0u8; 64]);
    let err = Zkey::from_bytes(&hostile).unwrap_err();
    assert!(err.to_string().contains("items"), "{err}");
    // Another graph than the key's: refused.
    let other = WitnessGraph::from_bytes(GRAPH).unwrap();
    let mut smaller = Zkey::from_bytes(ARKZKEY).unwrap();
    smaller.pk.a_query.pop();
    assert!(smaller.check_graph(&other).is_err());
}
