//! The bodies of Canopy's fuzz targets, shared by two drivers:
//!
//! - `fuzz/` (its own workspace, cargo-fuzz layout) runs them under libFuzzer on nightly:
//!   `cd fuzz && cargo +nightly fuzz run tree_ops`;
//! - [`runner`] runs them on stable for a bounded number of inputs (random bytes and mutations
//!   of valid seeds), which `cargo test --workspace` does on every CI run so the targets never
//!   rot.
//!
//! A target returns normally for every input; a panic (a failed assertion, or a panic inside
//! Canopy) is a finding.
//!
//! ```
//! use fuzz_targets::{runner, TARGETS};
//! for target in TARGETS {
//!     let stats = runner::run(target, 50, 7);
//!     assert_eq!(stats.crashes, 0, "{}", target.name);
//! }
//! ```

// A fuzz target reports a finding by panicking; that is its whole interface.
#![allow(clippy::panic)]

pub mod msm;
pub mod node;
pub mod ops;
pub mod poseidon2_lanes;
pub mod poseidon_lanes;
pub mod proof;
pub mod rln_batch;
pub mod runner;
pub mod snapshot;
pub mod witness_graph;

/// A fuzz target: its name (as in `fuzz/fuzz_targets/`), its body, and valid inputs to mutate.
pub struct Target {
    /// The cargo-fuzz target name.
    pub name: &'static str,
    /// Runs one input; panics on a finding.
    pub run: fn(&[u8]),
    /// Valid inputs the stable runner mutates (cargo-fuzz finds its own).
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "node_decoding",
        run: node::run,
        seeds: node::seeds,
    },
    Target {
        name: "snapshot_import",
        run: snapshot::run,
        seeds: snapshot::seeds,
    },
    Target {
        name: "proof_decoding",
        run: proof::run,
        seeds: proof::seeds,
    },
    Target {
        name: "witness_graph",
        run: witness_graph::run,
        seeds: witness_graph::seeds,
    },
    Target {
        name: "rln_batch",
        run: rln_batch::run,
        seeds: rln_batch::seeds,
    },
    Target {
        name: "msm",
        run: msm::run,
        seeds: msm::seeds,
    },
    Target {
        name: "poseidon_lanes",
        run: poseidon_lanes::run,
        seeds: poseidon_lanes::seeds,
    },
    Target {
        name: "poseidon2_lanes",
        run: poseidon2_lanes::run,
        seeds: poseidon2_lanes::seeds,
    },
    Target {
        name: "tree_ops",
        run: ops::run,
        seeds: ops::seeds,
    },
];
