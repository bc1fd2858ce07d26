//! Poseidon2 on lanes: eight permutations at once over BN254's `Fr`, for the widths the
//! field's trees and sponges use (t = 2, 3, 4).
//!
//! Poseidon2 needs no derived round structure: its external rounds multiply by a fixed cheap
//! matrix (`circ(2, 1)`, `circ(2, 1, 1)`, or the paper's 4×4 `M4`), evaluated here as additions,
//! and its internal rounds by `J + diag(d)`, a sum plus one product per word (for t = 2, 3 the
//! diagonal is `1, 2` and `1, 1, 2`: additions only). The caller (the `hasher` crate's
//! `Poseidon2`) owns the constants and hands them over as [`Poseidon2Rounds`]; the rounds run in
//! the `avx512::poseidon2` kernel.

use core::marker::PhantomData;

use crate::lane_rounds::Poseidon2LaneRounds;
use crate::poseidon::{limbs, power_of_two, vector};
use crate::{LanesError, PrimeLanes};

/// One Poseidon2 permutation's constants, as field elements:
///
/// 1. the external matrix once;
/// 2. each of `first`: add the constants, S-box every word, the external matrix;
/// 3. each of `internal`: add the constant to word 0, S-box word 0, the internal matrix
///    `J + diag(diagonal)` (every word plus the sum of all words, word `i` first multiplied by
///    `diagonal[i]`);
/// 4. each of `last`: as in 2.
#[derive(Debug, Clone, Copy)]
pub struct Poseidon2Rounds<'a, F, const T: usize> {
    /// Constants of the external rounds before the internal ones.
    pub first: &'a [[F; T]],
    /// The one constant each internal round adds to word 0.
    pub internal: &'a [F],
    /// Constants of the external rounds after the internal ones.
    pub last: &'a [[F; T]],
    /// The internal matrix's diagonal minus one (`1, 2` for t = 2; `1, 1, 2` for t = 3, which
    /// the kernel evaluates as additions).
    pub diagonal: &'a [F; T],
}

/// A Poseidon2 permutation of width `T` (2, 3 or 4) in lane form, ready to run eight states at a
/// time.
#[derive(Debug, Clone)]
pub struct Poseidon2Lanes<F, const T: usize> {
    rounds: Poseidon2LaneRounds<T>,
    field: PhantomData<F>,
}

impl<F: PrimeLanes, const T: usize> Poseidon2Lanes<F, T> {
    /// The lane form of `rounds`.
    ///
    /// # Errors
    /// [`LanesError::Poseidon2Width`] for a width other than 2, 3 or 4, and for t = 2, 3 a
    /// diagonal other than the standard one (the kernel hard-wires it);
    /// [`LanesError::Poseidon2Shape`] unless there are as many external rounds after the internal
    /// ones as before.
    pub fn new(rounds: Poseidon2Rounds<'_, F, T>) -> Result<Self, LanesError> {
        let standard = |d: &[u64]| {
            d.iter()
                .zip(rounds.diagonal)
                .all(|(&want, have)| F::from(want) == *have)
        };
        let diagonal_ok = match T {
            2 => standard(&[1, 2]),
            3 => standard(&[1, 1, 2]),
            4 => true,
            _ => false,
        };
        if !diagonal_ok {
            return Err(LanesError::Poseidon2Width(T));
        }
        if rounds.first.len() != rounds.last.len() {
            return Err(LanesError::Poseidon2Shape {
                first: rounds.first.len(),
                last: rounds.last.len(),
            });
        }
        Ok(Self {
            rounds: Poseidon2LaneRounds {
                first: rounds.first.iter().map(vector).collect(),
                internal: rounds.internal.iter().map(limbs).collect(),
                last: rounds.last.iter().map(vector).collect(),
                diagonal: vector(rounds.diagonal),
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
            crate::avx512::poseidon2::permute_first(&self.rounds, states, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (states, out);
            false
        }
    }
}
