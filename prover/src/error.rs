//! The prover's typed errors.

/// What can go wrong building tables or proving.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProverError {
    /// A window width outside 2..=20 bits.
    #[error("window of {0} bits: expected 2..=20")]
    WindowBits(u32),
    /// More bases than a table can index (2^32 window shifts).
    #[error("{0} bases: the table of their window shifts would exceed 2^32 points")]
    TooManyBases(usize),
    /// IFMA lanes asked for on a CPU without AVX-512F and AVX-512 IFMA.
    #[error("Arithmetic::Ifma asked for, but this CPU lacks AVX-512F or AVX-512 IFMA")]
    NoIfma,
    /// Tables that cannot fit the memory budget even at the widest window.
    #[error("the tables need at least {needed} bytes; the budget is {budget}")]
    TableBudget {
        /// The smallest the tables can be.
        needed: usize,
        /// The budget.
        budget: usize,
    },
    /// A witness graph or its inputs were refused.
    #[error(transparent)]
    Witness(#[from] crate::WitnessError),
    /// A proving key whose queries, constraint rows and wire counts disagree.
    #[error("proving key: {0}")]
    KeyShape(String),
    /// An assignment that disagrees with a wire its partial proof fixed.
    #[error("wire {wire} differs from the partial proof's value")]
    PartialMismatch {
        /// The first wire that differs.
        wire: usize,
    },
    /// Scalars and bases of different lengths.
    #[error("{got} scalars for {expected} bases")]
    ScalarCount {
        /// Number of bases.
        expected: usize,
        /// Number of scalars given.
        got: usize,
    },
    /// A scalar whose GLV halves exceed 128 bits: ruled out by the lattice bound
    /// ([`crate::FixedBaseMsm`]'s split), reported rather than assumed.
    #[error("a scalar's GLV halves exceed 128 bits")]
    ScalarSplit,
}

impl From<field_lanes::LanesError> for ProverError {
    fn from(error: field_lanes::LanesError) -> Self {
        match error {
            field_lanes::LanesError::NoIfma => ProverError::NoIfma,
            // The prover builds no Poseidon rounds; keep the message if that ever changes.
            other => ProverError::KeyShape(other.to_string()),
        }
    }
}
