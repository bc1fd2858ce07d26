//! `FastPoseidon`: the same circomlib permutation as light-poseidon, allocation-free.
//!
//! light-poseidon builds a new `Vec` for the state after every MDS multiplication (65 per hash
//! at t = 3) and computes x^5 with a generic `pow`. This keeps the state in a `[Fr; T]` on the
//! stack and computes x^5 as two squarings and a multiplication. The round constants and MDS
//! matrix are taken once from light-poseidon's circomlib parameters (nothing pasted), so the
//! function is the same and only the evaluation differs. Sparse partial rounds (the Poseidon
//! paper's appendix B) are the next step.

use std::sync::OnceLock;

use ark_ff::{Field, Zero};
use light_poseidon::parameters::bn254_x5::get_poseidon_parameters;

use crate::poseidon::{fr_from_le_bytes, fr_to_le_bytes, poseidon, Fr, PoseidonError};
use crate::{DecodeError, DigestCodec, Hasher};

/// The permutation of width `T` (`T - 1` inputs).
#[derive(Debug, Clone)]
pub struct FastPoseidon<const T: usize> {
    ark: Vec<[Fr; T]>,
    mds: [[Fr; T]; T],
    full_rounds: usize,
    partial_rounds: usize,
}

impl<const T: usize> FastPoseidon<T> {
    /// Loads circomlib's parameters for width `T` from light-poseidon.
    ///
    /// # Errors
    /// light-poseidon's error for an unsupported width, or `InvalidWidthCircom` when its
    /// parameters do not have the expected shape (x^5, `T`×`T` MDS).
    pub fn new() -> Result<Self, PoseidonError> {
        let shape_error = || PoseidonError::InvalidWidthCircom {
            width: T,
            max_limit: light_poseidon::MAX_X5_LEN,
        };
        let width = u8::try_from(T).map_err(|_| shape_error())?;
        let params = get_poseidon_parameters::<Fr>(width)?;
        if params.width != T || params.alpha != 5 || params.mds.len() != T {
            return Err(shape_error());
        }
        let mut mds = [[Fr::zero(); T]; T];
        for (row, source) in mds.iter_mut().zip(&params.mds) {
            if source.len() != T {
                return Err(shape_error());
            }
            row.copy_from_slice(source);
        }
        let ark: Vec<[Fr; T]> = params
            .ark
            .chunks_exact(T)
            .map(|c| {
                let mut round = [Fr::zero(); T];
                round.copy_from_slice(c);
                round
            })
            .collect();
        if ark.len() != params.full_rounds + params.partial_rounds {
            return Err(shape_error());
        }
        Ok(Self {
            ark,
            mds,
            full_rounds: params.full_rounds,
            partial_rounds: params.partial_rounds,
        })
    }

    #[inline(always)]
    fn sbox(x: &mut Fr) {
        let x4 = x.square().square();
        *x *= x4;
    }

    /// Applies the permutation to `state` in place.
    pub fn permute(&self, state: &mut [Fr; T]) {
        let half = self.full_rounds / 2;
        let partial_end = half + self.partial_rounds;
        for (round, constants) in self.ark.iter().enumerate() {
            for (x, c) in state.iter_mut().zip(constants) {
                *x += c;
            }
            if round < half || round >= partial_end {
                state.iter_mut().for_each(Self::sbox);
            } else {
                Self::sbox(&mut state[0]);
            }
            let old = *state;
            for (x, row) in state.iter_mut().zip(&self.mds) {
                let mut acc = Fr::zero();
                for (m, v) in row.iter().zip(&old) {
                    acc += *m * v;
                }
                *x = acc;
            }
        }
    }

    /// circomlib `Poseidon(T - 1)` of `inputs`; `None` unless exactly `T - 1` inputs.
    #[must_use]
    pub fn hash(&self, inputs: &[Fr]) -> Option<Fr> {
        if inputs.len() + 1 != T {
            return None;
        }
        let mut state = [Fr::zero(); T];
        state[1..].copy_from_slice(inputs);
        self.permute(&mut state);
        Some(state[0])
    }
}

static WIDTH_2: OnceLock<Option<FastPoseidon<2>>> = OnceLock::new();
static WIDTH_3: OnceLock<Option<FastPoseidon<3>>> = OnceLock::new();
static WIDTH_4: OnceLock<Option<FastPoseidon<4>>> = OnceLock::new();

/// The shared permutation of width `T`, built on first use (parameters are read-only, so one
/// instance serves every thread).
fn width<const T: usize>(
    cell: &'static OnceLock<Option<FastPoseidon<T>>>,
) -> Result<&'static FastPoseidon<T>, PoseidonError> {
    cell.get_or_init(|| FastPoseidon::new().ok())
        .as_ref()
        .ok_or(PoseidonError::InvalidWidthCircom {
            width: T,
            max_limit: light_poseidon::MAX_X5_LEN,
        })
}

/// circomlib Poseidon of 1..=[`POSEIDON_MAX_INPUTS`](crate::POSEIDON_MAX_INPUTS) inputs: the
/// allocation-free permutation for 1–3 inputs (the tree and every RLN primitive), light-poseidon
/// beyond. Same results as [`poseidon()`].
///
/// # Errors
/// As [`poseidon()`].
pub fn poseidon_fast(inputs: &[Fr]) -> Result<Fr, PoseidonError> {
    let result = match inputs.len() {
        1 => width(&WIDTH_2)?.hash(inputs),
        2 => width(&WIDTH_3)?.hash(inputs),
        3 => width(&WIDTH_4)?.hash(inputs),
        _ => return poseidon(inputs),
    };
    result.ok_or(PoseidonError::InvalidNumberOfInputs {
        inputs: inputs.len(),
        max_limit: crate::POSEIDON_MAX_INPUTS,
        width: inputs.len() + 1,
    })
}

/// [`PoseidonHasher`](crate::PoseidonHasher)'s function evaluated with [`FastPoseidon`]: same
/// digests, same `ID` (a database written by either opens with the other), same codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FastPoseidonHasher;

impl Hasher for FastPoseidonHasher {
    type Digest = Fr;
    const ID: &'static str = crate::PoseidonHasher::ID;

    fn hash_pair(left: &Fr, right: &Fr) -> Fr {
        match width(&WIDTH_3) {
            Ok(p) => {
                let mut state = [Fr::zero(), *left, *right];
                p.permute(&mut state);
                state[0]
            }
            Err(_) => unreachable!("circomlib parameters for width 3 always load"),
        }
    }
}

impl DigestCodec for FastPoseidonHasher {
    const LEN: usize = 32;

    fn encode(digest: &Fr, out: &mut [u8]) {
        out[..32].copy_from_slice(&fr_to_le_bytes(digest));
    }

    fn decode(bytes: &[u8]) -> Result<Fr, DecodeError> {
        fr_from_le_bytes(bytes)
    }
}
