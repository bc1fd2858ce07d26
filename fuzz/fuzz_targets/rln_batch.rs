#![no_main]
//! libFuzzer driver for `fuzz_targets::rln_batch` (see that module for the invariants).

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::rln_batch::run(data));
