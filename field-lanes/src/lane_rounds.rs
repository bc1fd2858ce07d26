//! A Poseidon permutation's optimised round structure (and a Poseidon2 permutation's rounds) in
//! lane form: the constants the `avx512::poseidon` and `avx512::poseidon2` kernels evaluate, built by [`PoseidonLanes::new`](crate::PoseidonLanes::new).
//! Plain data, so the kernel and the safe type that owns it need not know each other.

use crate::Limbs;

/// The constants of [`PoseidonRounds`](crate::PoseidonRounds), each element as five 52-bit
/// limbs of its lane form.
#[derive(Debug, Clone)]
pub(crate) struct LaneRounds<const T: usize> {
    pub(crate) first: Vec<[Limbs; T]>,
    pub(crate) mds: [[Limbs; T]; T],
    pub(crate) partial: Vec<Limbs>,
    pub(crate) sparse_row: Vec<[Limbs; T]>,
    pub(crate) sparse_col: Vec<[Limbs; T]>,
    pub(crate) closing: [[Limbs; T]; T],
    pub(crate) late: Vec<[Limbs; T]>,
    /// `2^264 mod p` (a plain integer): a lane product with it turns ark-ff's Montgomery form
    /// (`x·2^256`) into ours (`x·2^260`).
    pub(crate) to_lane: Limbs,
    /// `2^256 mod p`: a lane product with it turns ours back into ark-ff's.
    pub(crate) from_lane: Limbs,
}

/// The constants of [`Poseidon2Rounds`](crate::Poseidon2Rounds) in lane form.
#[derive(Debug, Clone)]
pub(crate) struct Poseidon2LaneRounds<const T: usize> {
    pub(crate) first: Vec<[Limbs; T]>,
    pub(crate) internal: Vec<Limbs>,
    pub(crate) last: Vec<[Limbs; T]>,
    /// The internal matrix's diagonal minus one (used for t = 4; t = 2, 3 add instead).
    pub(crate) diagonal: [Limbs; T],
    /// As in [`LaneRounds::to_lane`].
    pub(crate) to_lane: Limbs,
    /// As in [`LaneRounds::from_lane`].
    pub(crate) from_lane: Limbs,
}
