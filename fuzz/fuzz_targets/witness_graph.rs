#![no_main]
//! libFuzzer driver for `fuzz_targets::witness_graph` (see that module for the invariants).

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_targets::witness_graph::run(data));
