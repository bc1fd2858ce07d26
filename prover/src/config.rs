//! How a [`CircomProver`](crate::CircomProver) builds its tables.

use serde::{Deserialize, Serialize};

use crate::Arithmetic;

/// The prover's start-up choices: how much memory its fixed-base tables may take, and the
/// arithmetic their bucket additions run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProverConfig {
    /// Most heap bytes the five tables may take together (default 16 MiB). Each table gets the
    /// fastest window for its size; while the sum exceeds the budget, the largest table keeps
    /// its shifts every one more window (fewer points per base, one more bucket set to reduce;
    /// [`MsmConfig::shift_every`](crate::MsmConfig::shift_every)). 0: no shifts, the bases
    /// alone, however many bytes their copies take (a Pippenger MSM over each query: a
    /// millisecond to build, proofs about a fifth slower).
    pub table_budget_bytes: usize,
    /// The bucket additions' arithmetic.
    pub arithmetic: Arithmetic,
}

impl Default for ProverConfig {
    fn default() -> Self {
        Self {
            table_budget_bytes: 16 << 20,
            arithmetic: Arithmetic::Auto,
        }
    }
}
