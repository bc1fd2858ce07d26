//! Eight elements of a prime field in IFMA lanes (`Fp8`): five 52-bit limbs per lane,
//! Montgomery form `x·2^260 mod p`, lazy values below 2p; the products, sums, squares and
//! reductions every kernel builds on.

use core::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_cmplt_epi64_mask, _mm512_loadu_si512,
    _mm512_madd52hi_epu64, _mm512_madd52lo_epu64, _mm512_mask_blend_epi64, _mm512_set1_epi64,
    _mm512_setzero_si512, _mm512_srai_epi64, _mm512_srli_epi64, _mm512_storeu_si512,
    _mm512_sub_epi64,
};
use core::marker::PhantomData;

use crate::{Limbs, PrimeLanes, LIMBS, LIMB_MASK};

use super::detected;

/// Eight elements of a prime field: limb `i` of lane `j` is `limbs[i]`'s 64-bit lane `j`.
pub(super) struct Fp8<F>(pub(super) [__m512i; LIMBS], PhantomData<F>);

// Manual: a derive would ask `F: Copy` of the marker, which the lanes do not need.
impl<F> Clone for Fp8<F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F> Copy for Fp8<F> {}

#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn splat_u64(value: u64) -> __m512i {
    // Bits reinterpreted: the lanes are unsigned.
    _mm512_set1_epi64(value.cast_signed())
}

impl<F: PrimeLanes> Fp8<F> {
    #[inline]
    pub(super) fn new(limbs: [__m512i; LIMBS]) -> Self {
        Fp8(limbs, PhantomData)
    }

    /// All eight lanes set to one lane-form element.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn splat(limbs: &Limbs) -> Self {
        Self::new(core::array::from_fn(|i| splat_u64(limbs[i])))
    }

    /// Lane `j` of limb `i` from `limbs[i][j]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn load(limbs: &[[u64; 8]; LIMBS]) -> Self {
        // SAFETY: unaligned loads of 64 bytes from 64-byte arrays.
        Self::new(core::array::from_fn(|i| unsafe {
            _mm512_loadu_si512(limbs[i].as_ptr().cast())
        }))
    }

    /// Limb `i` of lane `j` into `[i][j]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(super) fn store(self) -> [[u64; 8]; LIMBS] {
        let mut limbs = [[0_u64; 8]; LIMBS];
        for (limb, v) in limbs.iter_mut().zip(self.0) {
            // SAFETY: an unaligned store of 64 bytes into a 64-byte array.
            unsafe { _mm512_storeu_si512(limb.as_mut_ptr().cast(), v) };
        }
        limbs
    }
}

/// Carries propagated: limbs of either sign below 2^62 in, every limb but the top one below
/// 2^52 out (the top one too when the value is below 2^260).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn normalize(mut t: [__m512i; LIMBS]) -> [__m512i; LIMBS] {
    let mask = splat_u64(LIMB_MASK);
    for j in 0..LIMBS - 1 {
        let carry = _mm512_srai_epi64::<52>(t[j]);
        t[j] = _mm512_and_si512(t[j], mask);
        t[j + 1] = _mm512_add_epi64(t[j + 1], carry);
    }
    t
}

/// `t - m` unless that borrows (normalized `t` below `2m`).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn subtract_below(t: [__m512i; LIMBS], m: &Limbs) -> [__m512i; LIMBS] {
    let mask = splat_u64(LIMB_MASK);
    let mut s = [_mm512_setzero_si512(); LIMBS];
    let mut borrow = _mm512_setzero_si512();
    for j in 0..LIMBS {
        let v = _mm512_add_epi64(_mm512_sub_epi64(t[j], splat_u64(m[j])), borrow);
        if j + 1 < LIMBS {
            borrow = _mm512_srai_epi64::<52>(v);
            s[j] = _mm512_and_si512(v, mask);
        } else {
            s[j] = v;
        }
    }
    // A negative top limb means t < m: keep t.
    let keep = _mm512_cmplt_epi64_mask(s[LIMBS - 1], _mm512_setzero_si512());
    core::array::from_fn(|j| _mm512_mask_blend_epi64(keep, s[j], t[j]))
}

/// The canonical form (below p) of a lazy value (below 2p).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn canonical<F: PrimeLanes>(a: Fp8<F>) -> Fp8<F> {
    Fp8::new(subtract_below(a.0, &F::MODULUS52))
}

/// `a + b`, lazy (below 2p) for lazy inputs.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn add<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    let sum = normalize(core::array::from_fn(|j| _mm512_add_epi64(a.0[j], b.0[j])));
    Fp8::new(subtract_below(sum, &F::TWICE_MODULUS52))
}

/// `a - b`, lazy for lazy inputs: `a + 2p - b` lies in `(0, 4p)`; its limbs may go negative,
/// which `normalize`'s signed carries take.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn sub<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    Fp8::new(subtract_below(sub_wide(a, b).0, &F::TWICE_MODULUS52))
}

/// `a + b` left below 8p (lazy inputs below 4p), for a multiplication only.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn add_wide<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    Fp8::new(normalize(core::array::from_fn(|j| {
        _mm512_add_epi64(a.0[j], b.0[j])
    })))
}

/// `a - b` left in `(0, 4p)` (lazy inputs), for a multiplication only.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn sub_wide<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    Fp8::new(normalize(core::array::from_fn(|j| {
        _mm512_sub_epi64(
            _mm512_add_epi64(a.0[j], splat_u64(F::TWICE_MODULUS52[j])),
            b.0[j],
        )
    })))
}

/// Montgomery product `a·b/2^260 mod p`, lazy: for `a·b < 64p²` (both below 8p, or one below
/// 2p and the other below 32p) the result `(a·b + m·p)/2^260 < (64p² + 2^260·p)/2^260 < 2p`,
/// as 64p < 2^260; so it needs no subtraction at all, and wide operands cost nothing either.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn mul<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    let zero = _mm512_setzero_si512();
    let p_inv = splat_u64(F::P_INV52);
    let p: [__m512i; LIMBS] = core::array::from_fn(|j| splat_u64(F::MODULUS52[j]));
    let mut t = [zero; LIMBS + 1];
    for i in 0..LIMBS {
        for j in 0..LIMBS {
            t[j] = _mm512_madd52lo_epu64(t[j], a.0[i], b.0[j]);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], a.0[i], b.0[j]);
        }
        // m = t0·(-1/p) mod 2^52 makes t0 + m·p0 ≡ 0 mod 2^52: the row shifts out exactly.
        let m = _mm512_madd52lo_epu64(zero, t[0], p_inv);
        for j in 0..LIMBS {
            t[j] = _mm512_madd52lo_epu64(t[j], m, p[j]);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], m, p[j]);
        }
        let carry = _mm512_srli_epi64::<52>(t[0]);
        t = [_mm512_add_epi64(t[1], carry), t[2], t[3], t[4], t[5], zero];
    }
    Fp8::new(normalize([t[0], t[1], t[2], t[3], t[4]]))
}

/// `a · c` for a constant `c` in lane form (below p).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn mul_const<F: PrimeLanes>(a: Fp8<F>, c: &Limbs) -> Fp8<F> {
    mul(a, Fp8::splat(c))
}

/// `t += a·b` without reduction: ten 64-bit accumulators of 52-bit halves (a product adds at
/// most ten halves to any one).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn mul_accumulate<F: PrimeLanes>(t: &mut [__m512i; 2 * LIMBS], a: Fp8<F>, b: Fp8<F>) {
    for i in 0..LIMBS {
        for j in 0..LIMBS {
            t[i + j] = _mm512_madd52lo_epu64(t[i + j], a.0[i], b.0[j]);
            t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], a.0[i], b.0[j]);
        }
    }
}

/// Montgomery reduction of an unreduced sum `t < 2^260·p` (in accumulators below 2^58): the
/// result `(t + m·p)/2^260 < 2p`, lazy. What [`mul`] does row by row, done once for a whole
/// sum of products.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn reduce<F: PrimeLanes>(mut t: [__m512i; 2 * LIMBS]) -> Fp8<F> {
    let zero = _mm512_setzero_si512();
    let p_inv = splat_u64(F::P_INV52);
    let p: [__m512i; LIMBS] = core::array::from_fn(|j| splat_u64(F::MODULUS52[j]));
    for i in 0..LIMBS {
        let m = _mm512_madd52lo_epu64(zero, t[i], p_inv);
        for j in 0..LIMBS {
            t[i + j] = _mm512_madd52lo_epu64(t[i + j], m, p[j]);
            t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], m, p[j]);
        }
        // t[i] ≡ 0 mod 2^52 now: only its carry moves on.
        t[i + 1] = _mm512_add_epi64(t[i + 1], _mm512_srli_epi64::<52>(t[i]));
    }
    Fp8::new(normalize([t[5], t[6], t[7], t[8], t[9]]))
}

/// `a²`, lazy: the ten cross products once and doubled, the five squares, one reduction (30
/// multiply-accumulates for the product instead of 50).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn square<F: PrimeLanes>(a: Fp8<F>) -> Fp8<F> {
    let mut t = [_mm512_setzero_si512(); 2 * LIMBS];
    for i in 0..LIMBS {
        for j in i + 1..LIMBS {
            t[i + j] = _mm512_madd52lo_epu64(t[i + j], a.0[i], a.0[j]);
            t[i + j + 1] = _mm512_madd52hi_epu64(t[i + j + 1], a.0[i], a.0[j]);
        }
    }
    for x in &mut t {
        *x = _mm512_add_epi64(*x, *x);
    }
    for i in 0..LIMBS {
        t[2 * i] = _mm512_madd52lo_epu64(t[2 * i], a.0[i], a.0[i]);
        t[2 * i + 1] = _mm512_madd52hi_epu64(t[2 * i + 1], a.0[i], a.0[i]);
    }
    reduce(t)
}

/// `x^(2^n)` by `n` dependent lane products (squarings, or general products of a value with
/// itself), all eight lanes the same: the latency of one lane product, for the measurement of
/// what lanes can do for a single dependent chain (`cargo bench -p field-lanes`).
#[target_feature(enable = "avx512f,avx512ifma")]
pub(super) fn power_chain_lanes<F: PrimeLanes>(x: F, n: usize, dedicated_square: bool) -> F {
    let mut limbs = [0; LIMBS];
    x.encode(&mut limbs);
    let mut v = Fp8::<F>::splat(&limbs);
    for _ in 0..n {
        v = if dedicated_square {
            square(v)
        } else {
            mul(v, v)
        };
    }
    let lanes = canonical(v).store();
    let lane0: Limbs = core::array::from_fn(|i| lanes[i][0]);
    F::decode(&lane0)
}

/// [`power_chain_lanes`] behind the CPU check: `None` without the lanes.
pub(crate) fn power_chain<F: PrimeLanes>(x: F, n: usize, dedicated_square: bool) -> Option<F> {
    if !detected() {
        return None;
    }
    // SAFETY: the CPU features were detected just above; the kernel touches only locals.
    Some(unsafe { power_chain_lanes(x, n, dedicated_square) })
}
