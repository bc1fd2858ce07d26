//! Shared helpers for Canopy's cross-crate tests (under `tests/tests/`).

use hasher::Fr;

/// Proptest case count: `PROPTEST_CASES` when set, else `default`.
#[must_use]
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A Poseidon leaf from a small seed (seed 0 is the empty leaf).
#[must_use]
pub fn fr_leaf(seed: u64) -> Fr {
    Fr::from(seed)
}
