//! The Poseidon permutation on eight states at once (`Fr` lanes), in the optimised round
//! structure of [`LaneRounds`]: S-boxes, fused row sums reduced once, sparse partial rounds.

use core::arch::x86_64::_mm512_setzero_si512;

use crate::lane_rounds::LaneRounds;
use crate::{join52, split52, Limbs, PrimeLanes, LIMBS};

use super::detected;
use super::fp::{add, canonical, mul, mul_accumulate, mul_const, reduce, square, Fp8};

/// `x⁵`, lazy for a lazy `x` (Poseidon's and Poseidon2's S-box on BN254).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn sbox<F: PrimeLanes>(x: Fp8<F>) -> Fp8<F> {
    mul(x, square(square(x)))
}

/// `Σ s[j]·c[j]` for constants `c` (below p) and lazy `s`, with one reduction for the whole
/// sum: `Σ < T·2p·p < 2^260·p` for the widths Poseidon uses (checked when the rounds are built).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn dot<F: PrimeLanes, const T: usize>(s: &[Fp8<F>; T], c: &[Limbs; T]) -> Fp8<F> {
    let mut t = [_mm512_setzero_si512(); 2 * LIMBS];
    for (x, k) in s.iter().zip(c) {
        mul_accumulate(&mut t, *x, Fp8::splat(k));
    }
    reduce(t)
}

/// `m · s` for a constant matrix, lazy.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn dense<F: PrimeLanes, const T: usize>(m: &[[Limbs; T]; T], s: &[Fp8<F>; T]) -> [Fp8<F>; T] {
    core::array::from_fn(|i| dot(s, &m[i]))
}

/// One full round: constants, S-box on every word, the dense matrix.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn full_round<F: PrimeLanes, const T: usize>(
    s: &mut [Fp8<F>; T],
    constants: &[Limbs; T],
    mds: &[[Limbs; T]; T],
) {
    for (x, c) in s.iter_mut().zip(constants) {
        *x = sbox(add(*x, Fp8::splat(c)));
    }
    *s = dense(mds, s);
}

/// The permutation on eight lazy states, in the round structure of [`LaneRounds`]; every
/// value stays below 2p between operations, so every product is in range.
#[target_feature(enable = "avx512f,avx512ifma")]
fn permute8<F: PrimeLanes, const T: usize>(k: &LaneRounds<T>, s: &mut [Fp8<F>; T]) {
    for constants in &k.first {
        full_round(s, constants, &k.mds);
    }
    let sparse = k.sparse_row.iter().zip(&k.sparse_col);
    for (constant, (row, col)) in k.partial.iter().zip(sparse) {
        s[0] = sbox(add(s[0], Fp8::splat(constant)));
        let first = s[0];
        let acc = dot(s, row);
        for j in 1..T {
            s[j] = add(s[j], mul_const(first, &col[j]));
        }
        s[0] = acc;
    }
    if let Some(constant) = k.partial.last() {
        s[0] = sbox(add(s[0], Fp8::splat(constant)));
        *s = dense(&k.closing, s);
    }
    for constants in &k.late {
        full_round(s, constants, &k.mds);
    }
}

/// `out[i] = permutation(states[i])[0]` on a CPU with the lanes, for any permutation kernel:
/// states loaded eight at a time (a short last group padded with its first state, whose results
/// are dropped), turned from ark-ff's Montgomery form into ours with one lane product
/// (`to_lane`), run through `permute8`, and word 0 turned back (`from_lane`) and made canonical.
/// Shared by the Poseidon and Poseidon2 kernels.
#[target_feature(enable = "avx512f,avx512ifma")]
fn first_words_lanes<F: PrimeLanes, const T: usize, K>(
    kernel: &K,
    permute8: unsafe fn(&K, &mut [Fp8<F>; T]),
    (to_lane, from_lane): (&Limbs, &Limbs),
    states: &[[F; T]],
    out: &mut [F],
) {
    let n = states.len().min(out.len());
    for (group, outs) in states[..n].chunks(8).zip(out[..n].chunks_mut(8)) {
        let mut words = [[[0_u64; 8]; LIMBS]; T];
        for j in 0..8 {
            let Some(state) = group.get(j).or(group.first()) else {
                break;
            };
            for (word, x) in words.iter_mut().zip(state) {
                for (limb, value) in word.iter_mut().zip(split52(x.montgomery_words())) {
                    limb[j] = value;
                }
            }
        }
        let mut s: [Fp8<F>; T] = core::array::from_fn(|w| mul_const(Fp8::load(&words[w]), to_lane));
        // SAFETY: `permute8` is a kernel needing AVX-512F and AVX-512 IFMA, the features this
        // function is compiled for and its safe entry point detected before calling it.
        unsafe { permute8(kernel, &mut s) };
        let first = canonical(mul_const(s[0], from_lane)).store();
        for (j, o) in outs.iter_mut().enumerate() {
            let limbs: Limbs = core::array::from_fn(|i| first[i][j]);
            *o = F::from_montgomery_words(join52(&limbs));
        }
    }
}

/// A kernel's safe entry point: [`first_words_lanes`] where the CPU has the lanes; `false`
/// (nothing written) without them.
pub(super) fn first_words<F: PrimeLanes, const T: usize, K>(
    kernel: &K,
    permute8: unsafe fn(&K, &mut [Fp8<F>; T]),
    lane_form: (&Limbs, &Limbs),
    states: &[[F; T]],
    out: &mut [F],
) -> bool {
    if !detected() {
        return false;
    }
    // SAFETY: the CPU features were detected just above; the kernel touches only its arguments
    // and local arrays.
    unsafe { first_words_lanes(kernel, permute8, lane_form, states, out) };
    true
}

/// [`PoseidonLanes::permute_first`](crate::PoseidonLanes::permute_first): `false` (nothing
/// written) without the CPU features.
pub(crate) fn permute_first<F: PrimeLanes, const T: usize>(
    k: &LaneRounds<T>,
    states: &[[F; T]],
    out: &mut [F],
) -> bool {
    first_words(k, permute8, (&k.to_lane, &k.from_lane), states, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avx512::lanes::tests::{check, edges};
    use crate::LaneField;
    use ark_ff::Field;

    /// The kernel's fused forms: a sum of products with constants reduced once (the largest
    /// constant, p − 1, among them, against lazy lanes), and x⁵.
    #[test]
    fn fused_forms_equal_ark_ff() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: the Poseidon kernel not tested here");
            return;
        }
        use ark_bn254::Fr;
        fn constants() -> ([Fr; 3], [Limbs; 3]) {
            let c = [
                -Fr::from(1u64),
                Fr::from(7u64),
                -Fr::from(2u64).inverse().unwrap(),
            ];
            let mut limbs = [[0_u64; LIMBS]; 3];
            for (x, l) in c.iter().zip(&mut limbs) {
                x.encode(l);
            }
            (c, limbs)
        }
        check::<Fp8<Fr>>(
            |a, b| unsafe { dot(&[a, b, a], &constants().1) },
            |a, b| {
                let c = constants().0;
                a * c[0] + b * c[1] + a * c[2]
            },
            &edges::<Fr>(),
        );
        check::<Fp8<Fr>>(
            |a, _| unsafe { sbox(a) },
            |a, _| a.square().square() * a,
            &edges::<Fr>(),
        );
    }
}
