#![no_main]
//! libFuzzer driver for `fuzz_targets::proof` (see that module for the invariants).

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::proof::run(data));
