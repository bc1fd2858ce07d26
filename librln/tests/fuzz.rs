//! The byte-taking entry points on stable: a real proof and partial proof as seeds, mutated
//! and random inputs through `rln::fuzzing::byte_entry_points` (`LIBRLN_FUZZ_EXECS`, default
//! 100,000), under the workspace's stable fuzz runner.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rln::ffi::*;
use safer_ffi::prelude::repr_c;

/// A proof of a member at index 0 of an empty depth-20 tree, and its member's partial proof.
fn real_proof() -> (Vec<u8>, Vec<u8>) {
    let rln = ffi_rln_new().ok.unwrap();
    let fr = |v: u8| {
        let mut b = vec![0u8; 32];
        b[0] = v;
        ffi_bytes_le_to_cfr(&b.into()).ok.unwrap()
    };
    let (secret, limit, id, x, en) = (fr(9), fr(10), fr(1), fr(2), fr(3));
    let mut path = ffi_vec_cfr_new(20);
    for _ in 0..20 {
        ffi_vec_cfr_push(&mut path, &secret);
    }
    let index: repr_c::Vec<u8> = vec![0u8; 20].into();
    let w = ffi_rln_witness_input_new(&secret, &limit, &id, &path, &index, &x, &en)
        .ok
        .unwrap();
    let p = ffi_generate_rln_proof(&rln, &w).ok.unwrap();
    let bytes = ffi_rln_proof_to_bytes_le(&p).ok.unwrap().to_vec();
    let pw = ffi_rln_partial_witness_input_new(&secret, &limit, &path, &index)
        .ok
        .unwrap();
    let pp = ffi_generate_partial_zk_proof(&rln, &pw).ok.unwrap();
    let partial = ffi_rln_partial_proof_to_bytes_le(&pp).ok.unwrap().to_vec();
    (bytes, partial)
}

#[test]
fn byte_entry_points_survive_a_bounded_stable_run() {
    let (proof, partial) = real_proof();
    assert_eq!(proof.len(), 290);
    // The seeds themselves pass (and their invariants hold).
    for seed in rln::fuzzing::seeds(&proof, &partial) {
        rln::fuzzing::byte_entry_points(&seed);
    }
    static SEEDS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(|| rln::fuzzing::seeds(&proof, &partial));
    let target = fuzz_targets::Target {
        name: "librln_byte_entry_points",
        run: rln::fuzzing::byte_entry_points,
        seeds: || SEEDS.get().cloned().unwrap_or_default(),
    };
    let execs = std::env::var("LIBRLN_FUZZ_EXECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let stats = fuzz_targets::runner::run(&target, execs, 0x11b_4e5);
    println!(
        "librln fuzz: {} execs, {} crashes",
        stats.execs, stats.crashes
    );
    if let Some(input) = &stats.first_crash {
        let path = std::env::temp_dir().join("librln-fuzz-crash.bin");
        std::fs::write(&path, input).unwrap();
        panic!(
            "{} crashes; the first input ({} bytes) is in {}",
            stats.crashes,
            input.len(),
            path.display()
        );
    }
}
