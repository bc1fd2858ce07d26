//! `FastPoseidon`: circomlib's Poseidon permutation in its optimised round structure.
//!
//! light-poseidon (and zerokit) evaluate every round as "add constants, S-box, multiply by the
//! dense MDS matrix" on a heap `Vec`. In the partial rounds only `state[0]` goes through the
//! S-box, which the Poseidon paper (appendix B) exploits twice:
//!
//! 1. **Constants.** A constant added to `state[1..]` before a partial S-box passes through it
//!    unchanged, so it can be pushed through the MDS matrix into the next round. After the push
//!    every partial round adds one scalar, and the first full round of the second half absorbs
//!    what is left.
//! 2. **Sparse matrices.** Any matrix `N` factors as `P · Q` with `P = diag(1, N̂)` (`N̂` its
//!    lower-right block) and `Q = [[N₀₀, N₀ⱼ], [ŵ, I]]`, `ŵ = N̂⁻¹ N_{j0}`. `P` fixes `state[0]`,
//!    so it commutes with a partial round and moves into the next round's matrix (`M · P`),
//!    which is factored again. Each partial round then multiplies by a sparse `Q` (`2t − 1`
//!    multiplications instead of `t²`); one dense matrix closes the partial rounds.
//!
//! Both transformations are derived here, once, from light-poseidon's circomlib constants
//! (nothing is pasted), and [`FastPoseidon::permute_reference`] keeps the textbook evaluation so
//! tests can compare the two on the same parameters. For t = 3 a hash costs 604 multiplications
//! instead of 828 ([`FastPoseidon::multiplications`]).
//!
//! [`FastPoseidon::permute_batch`] runs `K` independent permutations step by step, so the
//! multiplications of different hashes overlap in the CPU pipeline; [`PoseidonHasher`] uses it
//! for whole tree levels.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use ark_ff::{Field, Zero};
use field_lanes::{ifma_available, Arithmetic, LanesError, PoseidonLanes, PoseidonRounds};
use light_poseidon::parameters::bn254_x5::get_poseidon_parameters;

use crate::poseidon::{fr_from_le_bytes, fr_to_le_bytes, poseidon_light, Fr, PoseidonError};
use crate::{DecodeError, DigestCodec, Hasher};

/// How many permutations [`PoseidonHasher::hash_level`] interleaves. Measured with
/// `cargo bench -p hasher --bench hash_pair -- interleave` (docs/benchmarks.md, "Hashing"): on this
/// project's 2-core AMD EPYC, widths 1–8 are within 3% of each other (ark-ff's 4-limb
/// Montgomery multiplication already keeps the pipeline busy), so the simplest wins. Re-measure
/// on a wider core before raising it.
pub const INTERLEAVE: usize = 1;

/// A sparse partial-round matrix `[[row₀, row₁ …], [col₁, 1, 0 …], [col₂, 0, 1 …] …]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparseMatrix<const T: usize> {
    /// The dense first row.
    pub row: [Fr; T],
    /// The first column below the diagonal (`col[0]` is unused and zero).
    pub col: [Fr; T],
}

impl<const T: usize> SparseMatrix<T> {
    #[inline(always)]
    fn apply(&self, state: &mut [Fr; T]) {
        let first = state[0];
        let mut acc = self.row[0] * first;
        for ((x, r), c) in state.iter_mut().zip(&self.row).zip(&self.col).skip(1) {
            acc += *r * *x;
            *x += *c * first;
        }
        state[0] = acc;
    }

    /// The same matrix written out densely (for tests of the factorisation).
    #[must_use]
    pub fn to_dense(&self) -> [[Fr; T]; T] {
        let mut dense = [[Fr::zero(); T]; T];
        dense[0] = self.row;
        for (i, row) in dense.iter_mut().enumerate().skip(1) {
            row[0] = self.col[i];
            row[i] = Fr::from(1u64);
        }
        dense
    }
}

/// The permutation of width `T` (`T - 1` inputs), with both its textbook and its optimised
/// round constants.
#[derive(Debug, Clone)]
pub struct FastPoseidon<const T: usize> {
    /// circomlib's round constants and MDS matrix, as published.
    ark: Vec<[Fr; T]>,
    mds: [[Fr; T]; T],
    full_rounds: usize,
    partial_rounds: usize,
    /// Optimised: constants of the second half's full rounds (the first absorbs the push).
    late_ark: Vec<[Fr; T]>,
    /// Optimised: the one scalar each partial round adds to `state[0]`.
    partial_ark: Vec<Fr>,
    /// Optimised: the sparse matrices of partial rounds `0 .. R_P - 1`.
    sparse: Vec<SparseMatrix<T>>,
    /// Optimised: the dense matrix of the last partial round.
    closing: [[Fr; T]; T],
    /// The same optimised structure in lane form, for eight permutations at a time on IFMA.
    lanes: PoseidonLanes<Fr, T>,
}

/// `a · b` for `T`×`T` matrices.
fn mat_mul<const T: usize>(a: &[[Fr; T]; T], b: &[[Fr; T]; T]) -> [[Fr; T]; T] {
    let mut out = [[Fr::zero(); T]; T];
    for (i, row) in out.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = (0..T).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    out
}

/// `m · v`.
#[inline(always)]
fn mat_vec<const T: usize>(m: &[[Fr; T]; T], v: &[Fr; T]) -> [Fr; T] {
    let mut out = [Fr::zero(); T];
    for (x, row) in out.iter_mut().zip(m) {
        let mut acc = row[0] * v[0];
        for j in 1..T {
            acc += row[j] * v[j];
        }
        *x = acc;
    }
    out
}

/// Solves `a · x = b` by Gaussian elimination; `None` when `a` is singular.
fn solve(mut a: Vec<Vec<Fr>>, mut b: Vec<Fr>) -> Option<Vec<Fr>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).find(|&r| !a[r][col].is_zero())?;
        a.swap(col, pivot);
        b.swap(col, pivot);
        let inv = a[col][col].inverse()?;
        for r in 0..n {
            if r != col && !a[r][col].is_zero() {
                let factor = a[r][col] * inv;
                let pivot_row = a[col].clone();
                for (x, p) in a[r].iter_mut().zip(&pivot_row).skip(col) {
                    *x -= factor * p;
                }
                let sub = factor * b[col];
                b[r] -= sub;
            }
        }
    }
    Some(
        (0..n)
            .map(|i| b[i] * a[i][i].inverse().unwrap_or_default())
            .collect(),
    )
}

/// Factors `n = P · Q` with `P = diag(1, n̂)` and `Q` sparse; `None` when `n̂` is singular.
fn factor<const T: usize>(n: &[[Fr; T]; T]) -> Option<([[Fr; T]; T], SparseMatrix<T>)> {
    let block: Vec<Vec<Fr>> = n[1..].iter().map(|row| row[1..].to_vec()).collect();
    let column: Vec<Fr> = n[1..].iter().map(|row| row[0]).collect();
    let w = solve(block, column)?;
    let mut p = *n;
    p[0] = [Fr::zero(); T];
    p[0][0] = Fr::from(1u64);
    for row in &mut p[1..] {
        row[0] = Fr::zero();
    }
    let mut col = [Fr::zero(); T];
    col[1..].copy_from_slice(&w);
    Some((p, SparseMatrix { row: n[0], col }))
}

impl<const T: usize> FastPoseidon<T> {
    /// Loads circomlib's parameters for width `T` from light-poseidon and derives the optimised
    /// constants.
    ///
    /// # Errors
    /// light-poseidon's error for an unsupported width, or `InvalidWidthCircom` when its
    /// parameters do not have the expected shape (x^5, `T`×`T` MDS, invertible blocks).
    pub fn new() -> Result<Self, PoseidonError> {
        let shape_error = || PoseidonError::InvalidWidthCircom {
            width: T,
            max_limit: light_poseidon::MAX_X5_LEN,
        };
        let width = u8::try_from(T).map_err(|_| shape_error())?;
        let params = get_poseidon_parameters::<Fr>(width)?;
        if T < 2
            || params.width != T
            || params.alpha != 5
            || params.mds.len() != T
            || params.full_rounds % 2 != 0
            || params.partial_rounds == 0
        {
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
        Self::derive(ark, mds, params.full_rounds, params.partial_rounds).ok_or_else(shape_error)
    }

    /// Derives the optimised round structure from textbook parameters.
    fn derive(
        ark: Vec<[Fr; T]>,
        mds: [[Fr; T]; T],
        full_rounds: usize,
        partial_rounds: usize,
    ) -> Option<Self> {
        let half = full_rounds / 2;
        // 1. Push each partial round's constants for state[1..] through the S-box and the MDS
        //    matrix into the next round.
        let mut carry = [Fr::zero(); T];
        let mut partial_ark = Vec::with_capacity(partial_rounds);
        for constants in &ark[half..half + partial_rounds] {
            let mut c = *constants;
            for (x, k) in c.iter_mut().zip(&carry) {
                *x += k;
            }
            partial_ark.push(c[0]);
            c[0] = Fr::zero();
            carry = mat_vec(&mds, &c);
        }
        let mut late_ark = ark[half + partial_rounds..].to_vec();
        for (x, k) in late_ark.first_mut()?.iter_mut().zip(&carry) {
            *x += k;
        }
        // 2. Factor each partial round's matrix into P · Q and move P into the next round.
        let mut pending = mds;
        let mut sparse = Vec::with_capacity(partial_rounds - 1);
        for _ in 1..partial_rounds {
            let (p, q) = factor(&pending)?;
            sparse.push(q);
            pending = mat_mul(&mds, &p);
        }
        let sparse_pairs: Vec<([Fr; T], [Fr; T])> = sparse.iter().map(|q| (q.row, q.col)).collect();
        let lanes = PoseidonLanes::new(PoseidonRounds {
            first: &ark[..half],
            mds: &mds,
            partial: &partial_ark,
            sparse: &sparse_pairs,
            closing: &pending,
            late: &late_ark,
        })
        .ok()?;
        Some(Self {
            ark,
            mds,
            full_rounds,
            partial_rounds,
            late_ark,
            partial_ark,
            sparse,
            closing: pending,
            lanes,
        })
    }

    /// The MDS matrix.
    #[must_use]
    pub fn mds(&self) -> &[[Fr; T]; T] {
        &self.mds
    }

    /// The sparse matrices of the partial rounds, in round order (one fewer than `R_P`).
    #[must_use]
    pub fn sparse_matrices(&self) -> &[SparseMatrix<T>] {
        &self.sparse
    }

    /// The dense matrix that closes the partial rounds.
    #[must_use]
    pub fn closing_matrix(&self) -> &[[Fr; T]; T] {
        &self.closing
    }

    /// Field multiplications (squarings included) per permutation: `(optimised, textbook)`.
    #[must_use]
    pub fn multiplications(&self) -> (usize, usize) {
        let (rf, rp) = (self.full_rounds, self.partial_rounds);
        let full = rf * (3 * T + T * T);
        let textbook = full + rp * (3 + T * T);
        let optimised = full + rp * 3 + (rp - 1) * (2 * T - 1) + T * T;
        (optimised, textbook)
    }

    #[inline(always)]
    fn sbox(x: &mut Fr) {
        let x4 = x.square().square();
        *x *= x4;
    }

    #[inline(always)]
    fn full_round(state: &mut [Fr; T], constants: &[Fr; T], mds: &[[Fr; T]; T]) {
        for (x, c) in state.iter_mut().zip(constants) {
            *x += c;
            Self::sbox(x);
        }
        *state = mat_vec(mds, state);
    }

    /// Applies the permutation to `state` in place, in the optimised round structure.
    pub fn permute(&self, state: &mut [Fr; T]) {
        self.permute_batch(std::array::from_mut(state));
    }

    /// Applies the permutation to `K` independent states, interleaved step by step so their
    /// multiplications overlap; the same result as `K` calls of [`permute`](Self::permute).
    pub fn permute_batch<const K: usize>(&self, states: &mut [[Fr; T]; K]) {
        let half = self.full_rounds / 2;
        for constants in &self.ark[..half] {
            for state in states.iter_mut() {
                Self::full_round(state, constants, &self.mds);
            }
        }
        for (constant, matrix) in self.partial_ark.iter().zip(&self.sparse) {
            for state in states.iter_mut() {
                state[0] += constant;
                Self::sbox(&mut state[0]);
                matrix.apply(state);
            }
        }
        if let Some(constant) = self.partial_ark.last() {
            for state in states.iter_mut() {
                state[0] += constant;
                Self::sbox(&mut state[0]);
                *state = mat_vec(&self.closing, state);
            }
        }
        for constants in &self.late_ark {
            for state in states.iter_mut() {
                Self::full_round(state, constants, &self.mds);
            }
        }
    }

    /// The textbook evaluation (constants and dense MDS every round), kept as the reference the
    /// optimised structure is tested against.
    pub fn permute_reference(&self, state: &mut [Fr; T]) {
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
            *state = mat_vec(&self.mds, state);
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

    /// `out[i] = permutation(states[i])[0]` for `i < min(states.len(), out.len())`: on IFMA
    /// lanes, eight at a time, when [`poseidon_arithmetic`] allows it, this CPU has them and
    /// there are at least [`LANE_MIN_BATCH`] states; else `INTERLEAVE` at a time on ark-ff.
    pub fn permute_first_many(&self, states: &[[Fr; T]], out: &mut [Fr]) {
        let n = states.len().min(out.len());
        if n >= LANE_MIN_BATCH
            && lanes_selected()
            && self.lanes.permute_first(&states[..n], &mut out[..n])
        {
            count_lane_permutations(n);
            return;
        }
        self.permute_first_scalar(&states[..n], &mut out[..n]);
    }

    /// [`permute_first_many`](Self::permute_first_many) on ark-ff whatever the CPU: the portable
    /// path, `INTERLEAVE` permutations at a time.
    pub fn permute_first_scalar(&self, states: &[[Fr; T]], out: &mut [Fr]) {
        self.permute_first_interleaved::<INTERLEAVE>(states, out);
    }

    /// [`permute_first_scalar`](Self::permute_first_scalar) with an explicit interleave width
    /// `K` (for measuring the best one): `K` permutations step by step, the rest one by one.
    pub fn permute_first_interleaved<const K: usize>(&self, states: &[[Fr; T]], out: &mut [Fr]) {
        let mut blocks = out.chunks_exact_mut(K);
        let mut inputs = states.chunks_exact(K);
        for (block, input) in (&mut blocks).zip(&mut inputs) {
            let mut batch = [[Fr::zero(); T]; K];
            batch.copy_from_slice(input);
            self.permute_batch(&mut batch);
            for (o, state) in block.iter_mut().zip(&batch) {
                *o = state[0];
            }
        }
        for (o, state) in blocks.into_remainder().iter_mut().zip(inputs.remainder()) {
            let mut state = *state;
            self.permute(&mut state);
            *o = state[0];
        }
    }
}

/// The smallest batch [`FastPoseidon::permute_first_many`] runs on lanes: a lane kernel run
/// costs the same for one state as for eight, and one lane run (eight permutations) costs a
/// little more than one scalar permutation, so lanes pay from two states on (measured with
/// `cargo bench -p hasher --bench hash_pair -- lanes`, docs/benchmarks.md "Hashing").
pub const LANE_MIN_BATCH: usize = 2;

/// Which arithmetic batches use: 0 Auto, 1 Portable, 2 Ifma (checked when set).
static ARITHMETIC: AtomicU8 = AtomicU8::new(0);
/// Permutations run on lanes in this process.
static LANE_PERMUTATIONS: AtomicU64 = AtomicU64::new(0);

/// Chooses, for the whole process, the arithmetic batched Poseidon runs on
/// ([`Arithmetic::Auto`] unless set): [`Arithmetic::Portable`] forces ark-ff, for comparisons
/// and for tests of the portable path on a CPU that has the lanes.
///
/// # Errors
/// [`LanesError::NoIfma`] for [`Arithmetic::Ifma`] on a CPU without the lanes (nothing changes).
pub fn set_poseidon_arithmetic(choice: Arithmetic) -> Result<(), LanesError> {
    choice.uses_lanes()?;
    let code = match choice {
        Arithmetic::Auto => 0,
        Arithmetic::Portable => 1,
        Arithmetic::Ifma => 2,
    };
    ARITHMETIC.store(code, Ordering::Relaxed);
    Ok(())
}

/// The arithmetic batched Poseidon runs on (see [`set_poseidon_arithmetic`]).
#[must_use]
pub fn poseidon_arithmetic() -> Arithmetic {
    match ARITHMETIC.load(Ordering::Relaxed) {
        1 => Arithmetic::Portable,
        2 => Arithmetic::Ifma,
        _ => Arithmetic::Auto,
    }
}

/// How many Poseidon permutations this process has run on IFMA lanes: whether a test run
/// exercised the lane path (the reliability report prints it).
#[must_use]
pub fn lane_permutations() -> u64 {
    LANE_PERMUTATIONS.load(Ordering::Relaxed)
}

/// Counts `n` permutations (Poseidon or Poseidon2) run on lanes, for [`lane_permutations`].
pub(crate) fn count_lane_permutations(n: usize) {
    LANE_PERMUTATIONS.fetch_add(n as u64, Ordering::Relaxed);
}

/// Whether batches run on lanes: selected (not forced portable) and present on this CPU.
pub(crate) fn lanes_selected() -> bool {
    poseidon_arithmetic() != Arithmetic::Portable && ifma_available()
}

static WIDTH_2: OnceLock<Option<FastPoseidon<2>>> = OnceLock::new();
static WIDTH_3: OnceLock<Option<FastPoseidon<3>>> = OnceLock::new();
static WIDTH_4: OnceLock<Option<FastPoseidon<4>>> = OnceLock::new();

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

/// circomlib's `Poseidon(n)` of `inputs` (1..=[`POSEIDON_MAX_INPUTS`](crate::POSEIDON_MAX_INPUTS)
/// elements): [`FastPoseidon`] for 1–3 inputs (the tree and every RLN primitive),
/// light-poseidon beyond. Same results as [`poseidon_light`].
///
/// # Errors
/// [`PoseidonError::InvalidNumberOfInputs`] when `inputs` is empty or too long.
pub fn poseidon(inputs: &[Fr]) -> Result<Fr, PoseidonError> {
    let result = match inputs.len() {
        1 => width(&WIDTH_2)?.hash(inputs),
        2 => width(&WIDTH_3)?.hash(inputs),
        3 => width(&WIDTH_4)?.hash(inputs),
        _ => return poseidon_light(inputs),
    };
    result.ok_or(PoseidonError::InvalidNumberOfInputs {
        inputs: inputs.len(),
        max_limit: crate::POSEIDON_MAX_INPUTS,
        width: inputs.len() + 1,
    })
}

/// `out[i] = Poseidon([left[i], right[i]])` for the shortest of the three slices: eight at a
/// time on IFMA lanes where selected and present, `INTERLEAVE` at a time on ark-ff otherwise.
pub fn hash_pairs(left: &[Fr], right: &[Fr], out: &mut [Fr]) {
    let n = out.len().min(left.len()).min(right.len());
    batched(&mut out[..n], |i| (left[i], right[i]));
}

/// `out[i] = Poseidon([left[i], right[i]])` for the shortest of the three slices, always on
/// ark-ff, `K` permutations interleaved (for measuring the best width, and the lanes against it).
pub fn hash_pairs_interleaved<const K: usize>(left: &[Fr], right: &[Fr], out: &mut [Fr]) {
    let n = out.len().min(left.len()).min(right.len());
    interleaved::<K>(&mut out[..n], |i| (left[i], right[i]));
}

/// `out[i] = Poseidon([pair(i)])` for every `i < out.len()`, `K` permutations at a time on
/// ark-ff.
fn interleaved<const K: usize>(out: &mut [Fr], pair: impl Fn(usize) -> (Fr, Fr)) {
    in_blocks(out, pair, circom_state, |states, block| {
        width3().permute_first_interleaved::<K>(states, block);
    });
}

/// `out[i] = Poseidon([pair(i)])` for every `i < out.len()`, through
/// [`FastPoseidon::permute_first_many`] (lanes where selected and present).
fn batched(out: &mut [Fr], pair: impl Fn(usize) -> (Fr, Fr)) {
    in_blocks(out, pair, circom_state, |states, block| {
        width3().permute_first_many(states, block);
    });
}

/// Fills blocks of states `state(pair(i))` on the stack and hands each, with its slice of `out`,
/// to `hash` (which writes `out` from the states): the one blocking of every pair hasher here,
/// Poseidon's `[0, l, r]` and Poseidon2's states alike.
pub(crate) fn in_blocks<const T: usize>(
    out: &mut [Fr],
    pair: impl Fn(usize) -> (Fr, Fr),
    state: impl Fn(Fr, Fr) -> [Fr; T],
    hash: impl Fn(&[[Fr; T]], &mut [Fr]),
) {
    const BLOCK: usize = 64;
    let mut states = [[Fr::zero(); T]; BLOCK];
    for (b, block) in out.chunks_mut(BLOCK).enumerate() {
        for (k, s) in states.iter_mut().take(block.len()).enumerate() {
            let (l, r) = pair(b * BLOCK + k);
            *s = state(l, r);
        }
        hash(&states[..block.len()], block);
    }
}

/// Poseidon's state for a pair: `[0, l, r]`.
fn circom_state(l: Fr, r: Fr) -> [Fr; 3] {
    [Fr::zero(), l, r]
}

fn width3() -> &'static FastPoseidon<3> {
    let Ok(p) = width(&WIDTH_3) else {
        unreachable!("circomlib parameters for width 3 always load (tested)")
    };
    p
}

/// Poseidon over BN254 as a tree hasher, evaluated with [`FastPoseidon`]: `hash_pair(l, r) =
/// Poseidon([l, r])`, empty leaf 0, and whole levels hashed eight at a time on IFMA lanes where
/// the CPU has them (`INTERLEAVE` at a time on ark-ff elsewhere). This is the default hasher of
/// every Canopy tree.
///
/// Nodes encode as 32 bytes little-endian (what zerokit writes); decoding rejects values at or
/// above the field modulus. Same digests, `ID` and codec as
/// [`LightPoseidonHasher`](crate::LightPoseidonHasher), so a database written by either opens
/// with the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoseidonHasher;

impl Hasher for PoseidonHasher {
    type Digest = Fr;
    const ID: &'static str = crate::poseidon::POSEIDON_ID;

    const BATCH: usize = 8;

    fn hash_pair(left: &Fr, right: &Fr) -> Fr {
        let mut state = [Fr::zero(), *left, *right];
        width3().permute(&mut state);
        state[0]
    }

    fn hash_level(children: &[Fr], parents: &mut [Fr]) {
        let n = parents.len().min(children.len() / 2);
        batched(&mut parents[..n], |i| {
            (children[2 * i], children[2 * i + 1])
        });
    }
}

impl DigestCodec for PoseidonHasher {
    const LEN: usize = 32;

    fn encode(digest: &Fr, out: &mut [u8]) {
        out[..32].copy_from_slice(&fr_to_le_bytes(digest));
    }

    fn decode(bytes: &[u8]) -> Result<Fr, DecodeError> {
        fr_from_le_bytes(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_std::{rand::SeedableRng, UniformRand};

    /// The sparse factorisation is exact: with the S-boxes taken out, the partial rounds'
    /// matrices multiply back to `M^{R_P}`.
    fn factorisation_is_exact<const T: usize>() {
        let p = FastPoseidon::<T>::new().unwrap();
        assert_eq!(p.sparse_matrices().len(), p.partial_rounds - 1);
        let mut product = *p.closing_matrix();
        for q in p.sparse_matrices().iter().rev() {
            product = mat_mul(&product, &q.to_dense());
        }
        let mut power = p.mds;
        for _ in 1..p.partial_rounds {
            power = mat_mul(&power, &p.mds);
        }
        assert_eq!(product, power, "t = {T}");
    }

    /// The optimised structure (pushed constants, sparse matrices, interleaving) computes the
    /// textbook permutation on random states, not only on hash inputs with `state[0] = 0`.
    fn optimised_equals_textbook<const T: usize>() {
        let p = FastPoseidon::<T>::new().unwrap();
        let mut rng = ark_std::rand::rngs::StdRng::seed_from_u64(T as u64);
        for _ in 0..200 {
            let mut batch = [[Fr::zero(); T]; 3];
            for state in &mut batch {
                state.iter_mut().for_each(|x| *x = Fr::rand(&mut rng));
            }
            let mut expected = batch;
            expected.iter_mut().for_each(|s| p.permute_reference(s));
            let mut single = batch;
            single.iter_mut().for_each(|s| p.permute(s));
            p.permute_batch(&mut batch);
            assert_eq!(single, expected, "t = {T}");
            assert_eq!(batch, expected, "t = {T}");
        }
    }

    #[test]
    fn derivation_for_every_width() {
        factorisation_is_exact::<2>();
        factorisation_is_exact::<3>();
        factorisation_is_exact::<4>();
        optimised_equals_textbook::<2>();
        optimised_equals_textbook::<3>();
        optimised_equals_textbook::<4>();
    }

    #[test]
    fn solve_rejects_singular_and_solves_regular() {
        let one = Fr::from(1u64);
        assert_eq!(
            solve(vec![vec![one, one], vec![one, one]], vec![one, one]),
            None
        );
        let (a, b) = (Fr::from(2u64), Fr::from(3u64));
        // [[0, 2], [3, 0]] x = [4, 9] needs a row swap: x = [3, 2].
        let x = solve(
            vec![vec![Fr::zero(), a], vec![b, Fr::zero()]],
            vec![Fr::from(4u64), Fr::from(9u64)],
        );
        assert_eq!(x, Some(vec![b, a]));
    }

    #[test]
    fn multiplication_counts() {
        // t = 3: 8 full rounds of 3 S-boxes (3 each) and a 3×3 MDS; 57 partial rounds.
        let p = FastPoseidon::<3>::new().unwrap();
        assert_eq!(p.multiplications(), (604, 828));
    }

    #[test]
    fn batch_helpers_cover_remainders() {
        let values: Vec<Fr> = (0..23u64).map(Fr::from).collect();
        let mut out = vec![Fr::zero(); 11];
        PoseidonHasher::hash_level(&values, &mut out);
        let mut pairs = vec![Fr::zero(); 7];
        hash_pairs_interleaved::<3>(&values[..7], &values[7..20], &mut pairs);
        for i in 0..11 {
            let want = poseidon_light(&[values[2 * i], values[2 * i + 1]]).unwrap();
            assert_eq!(out[i], want);
        }
        for i in 0..7 {
            assert_eq!(
                pairs[i],
                poseidon_light(&[values[i], values[7 + i]]).unwrap()
            );
        }
        // Too few children: only the parents they determine are written.
        let mut short = vec![Fr::from(99u64); 3];
        PoseidonHasher::hash_level(&values[..4], &mut short);
        assert_eq!(short[2], Fr::from(99u64));
        assert_eq!(short[1], out[1]);
    }
}
