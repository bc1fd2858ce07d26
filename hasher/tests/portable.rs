//! The portable path is selectable on any CPU, and a CPU without the lanes refuses them. Its own
//! test binary: the choice is process-wide.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use hasher::{
    hash_pairs, ifma_available, lane_permutations, poseidon_arithmetic, poseidon_light,
    set_poseidon_arithmetic, Arithmetic, Fr, LanesError,
};

#[test]
fn portable_is_selectable_and_ifma_is_checked() {
    let left: Vec<Fr> = (0..20u64).map(Fr::from).collect();
    let right: Vec<Fr> = (100..120u64).map(Fr::from).collect();
    let want: Vec<Fr> = left
        .iter()
        .zip(&right)
        .map(|(l, r)| poseidon_light(&[*l, *r]).unwrap())
        .collect();

    set_poseidon_arithmetic(Arithmetic::Portable).unwrap();
    assert_eq!(poseidon_arithmetic(), Arithmetic::Portable);
    let before = lane_permutations();
    let mut out = vec![Fr::from(0u64); 20];
    hash_pairs(&left, &right, &mut out);
    assert_eq!(out, want);
    assert_eq!(lane_permutations(), before, "portable: no lane ran");

    let ifma = set_poseidon_arithmetic(Arithmetic::Ifma);
    if ifma_available() {
        assert_eq!(ifma, Ok(()));
        hash_pairs(&left, &right, &mut out);
        assert_eq!(out, want);
        assert!(lane_permutations() >= before + 20, "ifma: the lanes ran");
    } else {
        assert_eq!(ifma, Err(LanesError::NoIfma));
        assert_eq!(poseidon_arithmetic(), Arithmetic::Portable, "unchanged");
    }
    set_poseidon_arithmetic(Arithmetic::Auto).unwrap();
}
