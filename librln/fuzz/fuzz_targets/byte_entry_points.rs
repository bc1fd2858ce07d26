#![no_main]
//! libFuzzer driver for `rln::fuzzing::byte_entry_points` (see that module for the invariants).

libfuzzer_sys::fuzz_target!(|data: &[u8]| rln::fuzzing::byte_entry_points(data));
