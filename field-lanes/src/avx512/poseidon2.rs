//! The Poseidon2 permutation on eight states at once (`Fr` lanes), over the constants of
//! [`Poseidon2LaneRounds`]: the external matrices as addition chains, the internal one as a sum
//! plus (t = 4) one product with a constant per word.

use crate::lane_rounds::Poseidon2LaneRounds;
use crate::{Limbs, PrimeLanes};

use super::fp::{add, mul_const, Fp8};
use super::poseidon::{first_words, sbox};

/// `2x`, lazy.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn double<F: PrimeLanes>(x: Fp8<F>) -> Fp8<F> {
    add(x, x)
}

/// The external matrix: `circ(2, 1)`, `circ(2, 1, 1)`, or the paper's `M4` (its addition chain
/// of eight additions and four doublings). Every step is a lazy addition, so every value stays
/// below 2p.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn external<F: PrimeLanes, const T: usize>(s: &mut [Fp8<F>; T]) {
    match T {
        2 => {
            let sum = add(s[0], s[1]);
            s[0] = add(s[0], sum);
            s[1] = add(s[1], sum);
        }
        3 => {
            let sum = add(add(s[0], s[1]), s[2]);
            for x in s.iter_mut() {
                *x = add(*x, sum);
            }
        }
        4 => {
            let t0 = add(s[0], s[1]);
            let t1 = add(s[2], s[3]);
            let t2 = add(double(s[1]), t1);
            let t3 = add(double(s[3]), t0);
            let t4 = add(double(double(t1)), t3);
            let t5 = add(double(double(t0)), t2);
            s[0] = add(t3, t5);
            s[1] = t5;
            s[2] = add(t2, t4);
            s[3] = t4;
        }
        // `Poseidon2Lanes::new` takes no other width.
        _ => {}
    }
}

/// The internal matrix `J + diag(d)`: `[[2, 1], [1, 3]]`, `[[2, 1, 1], [1, 2, 1], [1, 1, 3]]`
/// (additions), or for t = 4 each word times its diagonal constant plus the sum.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn internal<F: PrimeLanes, const T: usize>(s: &mut [Fp8<F>; T], diagonal: &[Limbs; T]) {
    let mut sum = s[0];
    for x in &s[1..] {
        sum = add(sum, *x);
    }
    match T {
        2 | 3 => {
            for x in s[..T - 1].iter_mut() {
                *x = add(*x, sum);
            }
            s[T - 1] = add(double(s[T - 1]), sum);
        }
        _ => {
            for (x, d) in s.iter_mut().zip(diagonal) {
                *x = add(mul_const(*x, d), sum);
            }
        }
    }
}

/// One external round: constants, S-box on every word, the external matrix.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn external_round<F: PrimeLanes, const T: usize>(s: &mut [Fp8<F>; T], constants: &[Limbs; T]) {
    for (x, c) in s.iter_mut().zip(constants) {
        *x = sbox(add(*x, Fp8::splat(c)));
    }
    external(s);
}

/// The permutation on eight lazy states.
#[target_feature(enable = "avx512f,avx512ifma")]
fn permute8<F: PrimeLanes, const T: usize>(k: &Poseidon2LaneRounds<T>, s: &mut [Fp8<F>; T]) {
    external(s);
    for constants in &k.first {
        external_round(s, constants);
    }
    for constant in &k.internal {
        s[0] = sbox(add(s[0], Fp8::splat(constant)));
        internal(s, &k.diagonal);
    }
    for constants in &k.last {
        external_round(s, constants);
    }
}

/// [`Poseidon2Lanes::permute_first`](crate::Poseidon2Lanes::permute_first): `false` (nothing
/// written) without the CPU features.
pub(crate) fn permute_first<F: PrimeLanes, const T: usize>(
    k: &Poseidon2LaneRounds<T>,
    states: &[[F; T]],
    out: &mut [F],
) -> bool {
    first_words(k, permute8, (&k.to_lane, &k.from_lane), states, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::avx512::detected;
    use crate::avx512::lanes::tests::{check, edges};
    use crate::{LaneField, LIMBS};
    use ark_bn254::Fr;
    use ark_ff::{Field, One};

    const M4: [[u64; 4]; 4] = [[5, 7, 1, 3], [4, 6, 1, 1], [1, 3, 5, 7], [1, 1, 4, 6]];

    /// A t = 4 internal diagonal of large constants (inverses of small negatives).
    fn diagonal() -> [Fr; 4] {
        core::array::from_fn(|i| -Fr::from(3 + i as u64).inverse().unwrap_or_default())
    }

    fn state4<X: Copy>(a: X, b: X, sum: X) -> [X; 4] {
        [a, b, sum, b]
    }

    unsafe fn external4<const R: usize>(a: Fp8<Fr>, b: Fp8<Fr>) -> Fp8<Fr> {
        // SAFETY: called only where the test checked `detected()`.
        unsafe {
            let mut s = state4(a, b, add(a, b));
            external(&mut s);
            s[R]
        }
    }

    fn external4_dense<const R: usize>(a: Fr, b: Fr) -> Fr {
        let v = state4(a, b, a + b);
        (0..4).map(|j| Fr::from(M4[R][j]) * v[j]).sum()
    }

    unsafe fn internal4<const R: usize>(a: Fp8<Fr>, b: Fp8<Fr>) -> Fp8<Fr> {
        let mut lanes = [[0_u64; LIMBS]; 4];
        for (x, l) in diagonal().iter().zip(&mut lanes) {
            x.encode(l);
        }
        // SAFETY: called only where the test checked `detected()`.
        unsafe {
            let mut s = state4(a, b, add(a, b));
            internal(&mut s, &lanes);
            s[R]
        }
    }

    fn internal4_dense<const R: usize>(a: Fr, b: Fr) -> Fr {
        let v = state4(a, b, a + b);
        v[R] * diagonal()[R] + v.iter().sum::<Fr>()
    }

    unsafe fn internal3<const R: usize>(a: Fp8<Fr>, b: Fp8<Fr>) -> Fp8<Fr> {
        // SAFETY: called only where the test checked `detected()`.
        unsafe {
            let mut s = [a, b, add(a, b)];
            internal(&mut s, &[[0; LIMBS]; 3]);
            s[R]
        }
    }

    fn internal3_dense<const R: usize>(a: Fr, b: Fr) -> Fr {
        let v = [a, b, a + b];
        let d = [Fr::one(), Fr::one(), Fr::from(2u64)];
        v[R] * d[R] + v.iter().sum::<Fr>()
    }

    /// The matrices' addition chains against their dense definitions, on the edge values
    /// (0, 1, p − 1, …) and random ones, in canonical and lazy (below 2p) lanes.
    #[test]
    fn matrices_equal_their_dense_forms() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: the Poseidon2 kernel not tested here");
            return;
        }
        let edges = edges::<Fr>();
        check::<Fp8<Fr>>(external4::<0>, external4_dense::<0>, &edges);
        check::<Fp8<Fr>>(external4::<1>, external4_dense::<1>, &edges);
        check::<Fp8<Fr>>(external4::<2>, external4_dense::<2>, &edges);
        check::<Fp8<Fr>>(external4::<3>, external4_dense::<3>, &edges);
        check::<Fp8<Fr>>(internal4::<0>, internal4_dense::<0>, &edges);
        check::<Fp8<Fr>>(internal4::<3>, internal4_dense::<3>, &edges);
        check::<Fp8<Fr>>(internal3::<0>, internal3_dense::<0>, &edges);
        check::<Fp8<Fr>>(internal3::<2>, internal3_dense::<2>, &edges);
    }
}
