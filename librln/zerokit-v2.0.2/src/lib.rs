//! Links zerokit's `rln` 2.0.2 into a static library; its `#[no_mangle]` C functions come along.
pub use rln;
