//! Poseidon on lanes: eight permutations at once over BN254's `Fr`, in the optimised round
//! structure the caller derived (pushed constants, sparse partial-round matrices).
//!
//! This module turns the constants into lane form ([`LaneRounds`]) and holds the safe entry
//! point; the rounds run in the `avx512::poseidon` kernel. The caller (the `hasher` crate's `FastPoseidon`) owns the derivation of the
//! constants from circomlib's parameters and hands them over as [`PoseidonRounds`], so there is
//! one source of the round structure's constants and this crate only evaluates it.

use core::marker::PhantomData;

use crate::lane_rounds::LaneRounds;
use crate::{LaneField, LanesError, Limbs, PrimeLanes, LIMBS};

/// One permutation's optimised round structure, as field elements:
///
/// 1. each of `first`: add the constants, S-box every word, multiply by `mds`;
/// 2. each partial round but the last: add `partial[r]` to word 0, S-box word 0, multiply by
///    the sparse matrix `[[row], [col₁, 1, 0…], [col₂, 0, 1…]…]` of `sparse[r] = (row, col)`;
/// 3. the last partial round: add its constant, S-box word 0, multiply by `closing`;
/// 4. each of `late`: as in 1.
#[derive(Debug, Clone, Copy)]
pub struct PoseidonRounds<'a, F, const T: usize> {
    /// Constants of the full rounds before the partial ones.
    pub first: &'a [[F; T]],
    /// The dense MDS matrix of the full rounds.
    pub mds: &'a [[F; T]; T],
    /// The one constant each partial round adds to word 0.
    pub partial: &'a [F],
    /// `(row, col)` of the sparse matrices of every partial round but the last.
    pub sparse: &'a [([F; T], [F; T])],
    /// The dense matrix of the last partial round.
    pub closing: &'a [[F; T]; T],
    /// Constants of the full rounds after the partial ones.
    pub late: &'a [[F; T]],
}

/// The widest permutation the lanes take: a matrix row's sum of `T` products is reduced once,
/// which needs `T·2p·p < 2^260·p` (and accumulators below 2^64); 16 keeps both with room.
pub const MAX_WIDTH: usize = 16;

/// A Poseidon permutation of width `T` in lane form, ready to run eight states at a time.
#[derive(Debug, Clone)]
pub struct PoseidonLanes<F, const T: usize> {
    rounds: LaneRounds<T>,
    field: PhantomData<F>,
}

pub(crate) fn limbs<F: LaneField>(x: &F) -> Limbs {
    let mut out = [0; LIMBS];
    x.encode(&mut out);
    out
}

pub(crate) fn vector<F: LaneField, const T: usize>(v: &[F; T]) -> [Limbs; T] {
    core::array::from_fn(|i| limbs(&v[i]))
}

fn matrix<F: LaneField, const T: usize>(m: &[[F; T]; T]) -> [[Limbs; T]; T] {
    core::array::from_fn(|i| vector(&m[i]))
}

/// `2^k mod p` as a plain (not Montgomery) integer in limbs.
pub(crate) fn power_of_two<F: PrimeLanes>(k: u64) -> Limbs {
    crate::split52(F::from(2u64).pow([k]).into_bigint().0)
}

impl<F: PrimeLanes, const T: usize> PoseidonLanes<F, T> {
    /// The lane form of `rounds`.
    ///
    /// # Errors
    /// [`LanesError::RoundShape`] unless there is exactly one more partial-round constant than
    /// sparse matrices; [`LanesError::Width`] for a width outside `2..=MAX_WIDTH`.
    pub fn new(rounds: PoseidonRounds<'_, F, T>) -> Result<Self, LanesError> {
        if !(2..=MAX_WIDTH).contains(&T) {
            return Err(LanesError::Width(T));
        }
        if rounds.partial.len() != rounds.sparse.len() + 1 {
            return Err(LanesError::RoundShape {
                partial: rounds.partial.len(),
                sparse: rounds.sparse.len(),
            });
        }
        Ok(Self {
            rounds: LaneRounds {
                first: rounds.first.iter().map(vector).collect(),
                mds: matrix(rounds.mds),
                partial: rounds.partial.iter().map(limbs).collect(),
                sparse_row: rounds.sparse.iter().map(|(row, _)| vector(row)).collect(),
                sparse_col: rounds.sparse.iter().map(|(_, col)| vector(col)).collect(),
                closing: matrix(rounds.closing),
                late: rounds.late.iter().map(vector).collect(),
                to_lane: power_of_two::<F>(264),
                from_lane: power_of_two::<F>(256),
            },
            field: PhantomData,
        })
    }

    /// `out[i] = permutation(states[i])[0]` for `i < min(states.len(), out.len())`, eight
    /// permutations at a time on IFMA lanes (a last group shorter than eight is padded and its
    /// padding discarded). `false`, with nothing written, where the CPU lacks the lanes: the
    /// caller then runs its scalar path.
    #[must_use]
    pub fn permute_first(&self, states: &[[F; T]], out: &mut [F]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            crate::avx512::poseidon::permute_first(&self.rounds, states, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (states, out);
            false
        }
    }
}
