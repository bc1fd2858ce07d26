#![no_main]
//! libFuzzer driver for `fuzz_targets::poseidon2_lanes` (see that module for the invariants).

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::poseidon2_lanes::run(data));
