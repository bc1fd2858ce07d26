//! The IFMA lanes: BN254 base-field arithmetic on eight elements at once (`vpmadd52luq` /
//! `vpmadd52huq`), and the batch-affine pair addition the bucket sums run on them.
//!
//! The only module of the workspace allowed `unsafe`: every intrinsic needs AVX-512F and
//! AVX-512 IFMA, which [`detected`] checks at run time before the one safe entry point per
//! field ([`add_pairs_fq`], [`add_pairs_fq2`]) calls in, and the gathers and scatters read and
//! write only where that entry point has checked the indices.
//!
//! Values in flight are lazy: limbs below 2^52, value below 2p (what a Montgomery product of
//! two such values gives without a final subtraction, as 2^260 > 64p); what the kernel stores
//! or inverts is made canonical (below p) first, so stored points compare and decode exactly.
//! Montgomery multiplication interleaves the five reduction steps
//! with the schoolbook rows (CIOS): each row adds `a_i·b` and `m·p` to six 64-bit accumulators,
//! which stay below 2^58 (five rows of at most four 52-bit halves each, plus carries), so no
//! intermediate carry propagation is needed until the end; the result is below 2p.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::arch::x86_64::{
    __m256i, __m512i, __mmask8, _mm256_loadu_si256, _mm512_add_epi64, _mm512_and_si512,
    _mm512_cmplt_epi64_mask, _mm512_i32gather_epi64, _mm512_loadu_si512, _mm512_madd52hi_epu64,
    _mm512_madd52lo_epu64, _mm512_mask_blend_epi64, _mm512_mask_i32scatter_epi64,
    _mm512_set1_epi64, _mm512_setzero_si512, _mm512_srai_epi64, _mm512_srli_epi64,
    _mm512_storeu_si512, _mm512_sub_epi64,
};

use ark_bn254::{Fq, Fq2};
use ark_ff::{batch_inversion, One};

use super::{LaneField, FQ_WORDS, LIMB_MASK, MODULUS};

/// `-p^-1 mod 2^52`, the Montgomery reduction's multiplier.
const P_INV: u64 = 0x20782e4866389;

/// Whether the CPU has AVX-512F and AVX-512 IFMA (cached by std after the first call).
pub(super) fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512ifma")
}

/// Eight elements of a field in lanes.
trait Lanes: Copy {
    /// The field, whose lane form this is.
    type Field: LaneField;

    /// All eight lanes set to one element.
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn splat(value: &Self::Field) -> Self {
        let mut words = [0_u64; 2 * FQ_WORDS];
        value.encode(&mut words);
        // SAFETY: the caller has AVX-512F.
        unsafe { Self::from_words(&[words; 8]) }
    }

    /// Lane `j` from `words[j]` (lane form).
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn from_words(words: &[[u64; 2 * FQ_WORDS]; 8]) -> Self;

    /// Lane `j` into `words[j]`.
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn to_words(self) -> [[u64; 2 * FQ_WORDS]; 8];

    /// Lane `j` loaded from `base + offsets[j]` words.
    ///
    /// # Safety
    /// AVX-512F; `base + offsets[j] .. + WORDS` in bounds of one allocation for every lane.
    unsafe fn gather(base: *const u64, offsets: __m256i) -> Self;

    /// Lane `j` stored to `base + offsets[j]` words, for the lanes in `mask`.
    ///
    /// # Safety
    /// AVX-512F; `base + offsets[j] .. + WORDS` in bounds and writable for every lane in
    /// `mask`.
    unsafe fn scatter(self, base: *mut u64, offsets: __m256i, mask: __mmask8);

    /// The canonical form of lazy lanes.
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn canonical(self) -> Self;
    /// # Safety
    /// AVX-512F and AVX-512 IFMA.
    unsafe fn sub(self, other: Self) -> Self;
    /// `self - other` left below 4p, for a multiplication only (saves the reduction).
    ///
    /// # Safety
    /// AVX-512F and AVX-512 IFMA.
    unsafe fn sub_wide(self, other: Self) -> Self;
    /// # Safety
    /// AVX-512F and AVX-512 IFMA.
    unsafe fn mul(self, other: Self) -> Self;
    /// # Safety
    /// AVX-512F and AVX-512 IFMA.
    unsafe fn square(self) -> Self;

    /// The lanes' inverses (ark-ff's batch inversion: eight per kernel call, not worth lanes);
    /// a zero lane stays zero.
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn invert(self) -> Self {
        // SAFETY: the caller has AVX-512F.
        let words = unsafe { self.canonical().to_words() };
        let mut values: Vec<Self::Field> = words.iter().map(|w| Self::Field::decode(w)).collect();
        batch_inversion(&mut values);
        let mut out = [[0_u64; 2 * FQ_WORDS]; 8];
        for (value, lane) in values.iter().zip(&mut out) {
            value.encode(lane);
        }
        // SAFETY: the caller has AVX-512F.
        unsafe { Self::from_words(&out) }
    }
}

/// Eight `Fq` elements: limb `i` of lane `j` is `limbs[i]`'s 64-bit lane `j`.
#[derive(Clone, Copy)]
struct Fq8([__m512i; FQ_WORDS]);

/// Eight `Fq2` elements, `c0 + c1·u` with `u² = -1`.
#[derive(Clone, Copy)]
struct Fq2x8 {
    c0: Fq8,
    c1: Fq8,
}

#[inline]
#[target_feature(enable = "avx512f")]
fn splat_u64(value: u64) -> __m512i {
    // Bits reinterpreted: the lanes are unsigned.
    _mm512_set1_epi64(value.cast_signed())
}

/// `2p` in 52-bit limbs: the bound lazy values stay below.
const TWICE_MODULUS: [u64; FQ_WORDS] = [
    0x1182db0f9fa8e,
    0x22d0e3951a784,
    0x302b0bb2f02d5,
    0x405370a08b6d0,
    0x60c89ce5c263,
];

/// Carries propagated: limbs of either sign below 2^62 in, every limb but the top one below
/// 2^52 out (the top one too when the value is below 2^260).
#[inline]
#[target_feature(enable = "avx512f")]
fn normalize(mut t: [__m512i; FQ_WORDS]) -> [__m512i; FQ_WORDS] {
    let mask = splat_u64(LIMB_MASK);
    for j in 0..FQ_WORDS - 1 {
        let carry = _mm512_srai_epi64::<52>(t[j]);
        t[j] = _mm512_and_si512(t[j], mask);
        t[j + 1] = _mm512_add_epi64(t[j + 1], carry);
    }
    t
}

/// `t - m` unless that borrows (normalized `t` below `2m`).
#[inline]
#[target_feature(enable = "avx512f")]
fn subtract_below(t: [__m512i; FQ_WORDS], m: &[u64; FQ_WORDS]) -> Fq8 {
    let mask = splat_u64(LIMB_MASK);
    let mut s = [_mm512_setzero_si512(); FQ_WORDS];
    let mut borrow = _mm512_setzero_si512();
    for j in 0..FQ_WORDS {
        let v = _mm512_add_epi64(_mm512_sub_epi64(t[j], splat_u64(m[j])), borrow);
        if j + 1 < FQ_WORDS {
            borrow = _mm512_srai_epi64::<52>(v);
            s[j] = _mm512_and_si512(v, mask);
        } else {
            s[j] = v;
        }
    }
    // A negative top limb means t < m: keep t.
    let keep = _mm512_cmplt_epi64_mask(s[FQ_WORDS - 1], _mm512_setzero_si512());
    Fq8(core::array::from_fn(|j| {
        _mm512_mask_blend_epi64(keep, s[j], t[j])
    }))
}

/// The canonical form (below p) of a lazy value (below 2p).
#[inline]
#[target_feature(enable = "avx512f")]
fn fq_canonical(a: Fq8) -> Fq8 {
    subtract_below(a.0, &MODULUS)
}

/// `a + b`, lazy (below 2p) for lazy inputs.
#[inline]
#[target_feature(enable = "avx512f")]
fn fq_add(a: Fq8, b: Fq8) -> Fq8 {
    let sum = normalize(core::array::from_fn(|j| _mm512_add_epi64(a.0[j], b.0[j])));
    subtract_below(sum, &TWICE_MODULUS)
}

/// `a - b`, lazy for lazy inputs: `a + 2p - b` lies in `(0, 4p)`; its limbs may go negative,
/// which `normalize`'s signed carries take.
#[inline]
#[target_feature(enable = "avx512f")]
fn fq_sub(a: Fq8, b: Fq8) -> Fq8 {
    let difference = normalize(core::array::from_fn(|j| {
        _mm512_sub_epi64(
            _mm512_add_epi64(a.0[j], splat_u64(TWICE_MODULUS[j])),
            b.0[j],
        )
    }));
    subtract_below(difference, &TWICE_MODULUS)
}

/// `a + b` left below 8p (lazy inputs below 4p), for a multiplication only.
#[inline]
#[target_feature(enable = "avx512f")]
fn fq_add_wide(a: Fq8, b: Fq8) -> Fq8 {
    Fq8(normalize(core::array::from_fn(|j| {
        _mm512_add_epi64(a.0[j], b.0[j])
    })))
}

/// `a - b` left in `(0, 4p)` (lazy inputs), for a multiplication only.
#[inline]
#[target_feature(enable = "avx512f")]
fn fq_sub_wide(a: Fq8, b: Fq8) -> Fq8 {
    Fq8(normalize(core::array::from_fn(|j| {
        _mm512_sub_epi64(
            _mm512_add_epi64(a.0[j], splat_u64(TWICE_MODULUS[j])),
            b.0[j],
        )
    })))
}

/// Montgomery product `a·b/2^260 mod p`, lazy: for `a·b < 64p²` (both below 8p, or one below
/// 2p and the other below 32p) the result `(a·b + m·p)/2^260 < (64p² + 2^260·p)/2^260 < 2p`,
/// as 64p < 2^260; so it needs no subtraction at all, and wide operands cost nothing either.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn fq_mul(a: Fq8, b: Fq8) -> Fq8 {
    let zero = _mm512_setzero_si512();
    let p_inv = splat_u64(P_INV);
    let p: [__m512i; FQ_WORDS] = core::array::from_fn(|j| splat_u64(MODULUS[j]));
    let mut t = [zero; FQ_WORDS + 1];
    for i in 0..FQ_WORDS {
        for j in 0..FQ_WORDS {
            t[j] = _mm512_madd52lo_epu64(t[j], a.0[i], b.0[j]);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], a.0[i], b.0[j]);
        }
        // m = t0·(-1/p) mod 2^52 makes t0 + m·p0 ≡ 0 mod 2^52: the row shifts out exactly.
        let m = _mm512_madd52lo_epu64(zero, t[0], p_inv);
        for j in 0..FQ_WORDS {
            t[j] = _mm512_madd52lo_epu64(t[j], m, p[j]);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], m, p[j]);
        }
        let carry = _mm512_srli_epi64::<52>(t[0]);
        t = [_mm512_add_epi64(t[1], carry), t[2], t[3], t[4], t[5], zero];
    }
    Fq8(normalize([t[0], t[1], t[2], t[3], t[4]]))
}

impl Lanes for Fq8 {
    type Field = Fq;

    #[target_feature(enable = "avx512f")]
    unsafe fn from_words(words: &[[u64; 2 * FQ_WORDS]; 8]) -> Self {
        Fq8(core::array::from_fn(|i| {
            let limb: [u64; 8] = core::array::from_fn(|j| words[j][i]);
            // SAFETY: an unaligned load of 64 bytes from a 64-byte array.
            unsafe { _mm512_loadu_si512(limb.as_ptr().cast()) }
        }))
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn to_words(self) -> [[u64; 2 * FQ_WORDS]; 8] {
        let mut limbs = [[0_u64; 8]; FQ_WORDS];
        for (limb, v) in limbs.iter_mut().zip(self.0) {
            // SAFETY: an unaligned store of 64 bytes into a 64-byte array.
            unsafe { _mm512_storeu_si512(limb.as_mut_ptr().cast(), v) };
        }
        core::array::from_fn(|j| {
            core::array::from_fn(|i| if i < FQ_WORDS { limbs[i][j] } else { 0 })
        })
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn gather(base: *const u64, offsets: __m256i) -> Self {
        // SAFETY: the caller keeps `base + offsets[j] + i` (i < 5) in bounds for every lane.
        Fq8(core::array::from_fn(|i| unsafe {
            _mm512_i32gather_epi64::<8>(offsets, base.add(i).cast())
        }))
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn scatter(self, base: *mut u64, offsets: __m256i, mask: __mmask8) {
        for (i, limb) in self.0.into_iter().enumerate() {
            // SAFETY: the caller keeps `base + offsets[j] + i` in bounds for the masked lanes.
            unsafe { _mm512_mask_i32scatter_epi64::<8>(base.add(i).cast(), mask, offsets, limb) };
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn canonical(self) -> Self {
        fq_canonical(self)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub(self, other: Self) -> Self {
        fq_sub(self, other)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub_wide(self, other: Self) -> Self {
        fq_sub_wide(self, other)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul(self, other: Self) -> Self {
        fq_mul(self, other)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn square(self) -> Self {
        fq_mul(self, self)
    }
}

impl Lanes for Fq2x8 {
    type Field = Fq2;

    #[target_feature(enable = "avx512f")]
    unsafe fn from_words(words: &[[u64; 2 * FQ_WORDS]; 8]) -> Self {
        let high: [[u64; 2 * FQ_WORDS]; 8] = core::array::from_fn(|j| {
            core::array::from_fn(|i| {
                if i < FQ_WORDS {
                    words[j][FQ_WORDS + i]
                } else {
                    0
                }
            })
        });
        // SAFETY: this function's target features are the callees'.
        unsafe {
            Fq2x8 {
                c0: Fq8::from_words(words),
                c1: Fq8::from_words(&high),
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn to_words(self) -> [[u64; 2 * FQ_WORDS]; 8] {
        // SAFETY: this function's target features are the callees'.
        let (low, high) = unsafe { (self.c0.to_words(), self.c1.to_words()) };
        core::array::from_fn(|j| {
            core::array::from_fn(|i| {
                if i < FQ_WORDS {
                    low[j][i]
                } else {
                    high[j][i - FQ_WORDS]
                }
            })
        })
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn gather(base: *const u64, offsets: __m256i) -> Self {
        // SAFETY: the caller keeps all ten words of every lane's element in bounds.
        unsafe {
            Fq2x8 {
                c0: Fq8::gather(base, offsets),
                c1: Fq8::gather(base.add(FQ_WORDS), offsets),
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn scatter(self, base: *mut u64, offsets: __m256i, mask: __mmask8) {
        // SAFETY: the caller keeps all ten words of every masked lane's element in bounds.
        unsafe {
            self.c0.scatter(base, offsets, mask);
            self.c1.scatter(base.add(FQ_WORDS), offsets, mask);
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn canonical(self) -> Self {
        Fq2x8 {
            c0: fq_canonical(self.c0),
            c1: fq_canonical(self.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub(self, other: Self) -> Self {
        Fq2x8 {
            c0: fq_sub(self.c0, other.c0),
            c1: fq_sub(self.c1, other.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub_wide(self, other: Self) -> Self {
        Fq2x8 {
            c0: fq_sub_wide(self.c0, other.c0),
            c1: fq_sub_wide(self.c1, other.c1),
        }
    }

    /// Karatsuba: three base-field products.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul(self, other: Self) -> Self {
        let v0 = fq_mul(self.c0, other.c0);
        let v1 = fq_mul(self.c1, other.c1);
        // Coefficients below 4p (a wide difference) sum below 8p: still a valid operand.
        let s = fq_mul(
            fq_add_wide(self.c0, self.c1),
            fq_add_wide(other.c0, other.c1),
        );
        Fq2x8 {
            c0: fq_sub(v0, v1),
            c1: fq_sub(fq_sub(s, v0), v1),
        }
    }

    /// `(c0 + c1)(c0 - c1) + 2·c0·c1·u`: two base-field products. Lazy input (each coefficient
    /// below 2p), as `c0 - c1` must not go negative.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn square(self) -> Self {
        let cross = fq_mul(self.c0, self.c1);
        Fq2x8 {
            c0: fq_mul(fq_add_wide(self.c0, self.c1), fq_sub_wide(self.c0, self.c1)),
            c1: fq_add(cross, cross),
        }
    }
}

/// Word offsets of the points `indices` name, padded to whole groups of eight with the first
/// (a real pair keeps its lane's product nonzero; its lanes are masked off when storing).
fn word_offsets(indices: &[u32], stride: usize) -> Vec<i32> {
    let padded = indices.len().div_ceil(8) * 8;
    // The entry point checked that every offset fits an i32.
    let offset = |index: u32| i32::try_from(index as usize * stride).unwrap_or(0);
    let first = indices.first().copied().unwrap_or(0);
    let mut offsets: Vec<i32> = indices.iter().map(|&index| offset(index)).collect();
    offsets.resize(padded, offset(first));
    offsets
}

/// Batch-affine addition of pairs of points on lanes: lane `j` takes pairs `j, j+8, j+16, ...`,
/// runs its own prefix product of the denominators `x_q - x_p`, and the eight lane products are
/// inverted together; the backward pass peels one inverse per pair off its lane's product.
/// Six multiplications per pair.
///
/// # Safety
/// AVX-512F and AVX-512 IFMA; `pairs` and `dsts` of one length; points `pairs[t]` and
/// `pairs[t] + 1` lie in `points` and point `dsts[t]` in `out` (points of `2·WORDS` words);
/// every word offset fits an i32.
#[target_feature(enable = "avx512f,avx512ifma")]
unsafe fn add_pairs<L: Lanes>(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) {
    let words = L::Field::WORDS;
    let stride = 2 * words;
    let groups = pairs.len().div_ceil(8);
    if groups == 0 {
        return;
    }
    let (base, target) = (points.as_ptr(), out.as_mut_ptr());
    let (src, dst) = (word_offsets(pairs, stride), word_offsets(dsts, stride));
    let last_mask = u8::MAX >> (groups * 8 - pairs.len());
    let mut prefix: Vec<L> = Vec::with_capacity(groups);
    // SAFETY: the target features are this function's.
    let mut product = unsafe { L::splat(&L::Field::one()) };
    // SAFETY: the target features are this function's; every gather reads the x words (0 to
    // WORDS) of points `pairs[t]` and `pairs[t] + 1`, which the caller keeps in `points`, and
    // `base.add` stays inside it (at least one pair, so two points); `src` holds whole groups.
    unsafe {
        for g in 0..groups {
            let offsets = _mm256_loadu_si256(src.as_ptr().add(8 * g).cast());
            let xp = L::gather(base, offsets);
            let xq = L::gather(base.add(stride), offsets);
            prefix.push(product);
            product = product.mul(xq.sub_wide(xp));
        }
    }
    // SAFETY: the target features are this function's.
    let mut inverse = unsafe { product.invert() };
    // SAFETY: as above for the gathers (y at words WORDS to 2·WORDS, inside each point); the
    // scatters write point `dsts[t]` of `out` for the real lanes only (the last group's mask),
    // which the caller keeps in `out`.
    unsafe {
        for (g, before) in prefix.iter().enumerate().rev() {
            let offsets = _mm256_loadu_si256(src.as_ptr().add(8 * g).cast());
            let targets = _mm256_loadu_si256(dst.as_ptr().add(8 * g).cast());
            let mask = if g + 1 == groups { last_mask } else { u8::MAX };
            let xp = L::gather(base, offsets);
            let xq = L::gather(base.add(stride), offsets);
            let yp = L::gather(base.add(words), offsets);
            let yq = L::gather(base.add(stride + words), offsets);
            let inv = before.mul(inverse);
            inverse = inverse.mul(xq.sub_wide(xp));
            let lambda = yq.sub_wide(yp).mul(inv);
            let x = lambda.square().sub(xp).sub(xq);
            let y = lambda.mul(xp.sub_wide(x)).sub(yp);
            x.canonical().scatter(target, targets, mask);
            y.canonical().scatter(target.add(words), targets, mask);
        }
    }
}

/// Checks what [`add_pairs`] needs of its indices.
fn indices_fit(points: &[u64], pairs: &[u32], dsts: &[u32], out: &[u64], stride: usize) -> bool {
    let fits_i32 = |len: usize| i32::try_from(len).is_ok();
    let inside = |list: &[u32], span: usize, len: usize| {
        list.iter().all(|&i| {
            (i as usize + span)
                .checked_mul(stride)
                .is_some_and(|end| end <= len)
        })
    };
    pairs.len() == dsts.len()
        && fits_i32(points.len())
        && fits_i32(out.len())
        && inside(pairs, 2, points.len())
        && inside(dsts, 1, out.len())
}

/// [`add_pairs`] behind the checks it needs: `false` (nothing written) without the CPU
/// features or with an index out of range.
fn add_pairs_checked<L: Lanes>(
    points: &[u64],
    pairs: &[u32],
    dsts: &[u32],
    out: &mut [u64],
) -> bool {
    if !detected() || !indices_fit(points, pairs, dsts, out, 2 * L::Field::WORDS) {
        return false;
    }
    // SAFETY: the CPU features were detected and the indices checked just above.
    unsafe { add_pairs::<L>(points, pairs, dsts, out) };
    true
}

/// [`LaneField::add_pairs`] for `Fq`.
pub(super) fn add_pairs_fq(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
    add_pairs_checked::<Fq8>(points, pairs, dsts, out)
}

/// [`LaneField::add_pairs`] for `Fq2`.
pub(super) fn add_pairs_fq2(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
    add_pairs_checked::<Fq2x8>(points, pairs, dsts, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::{Field, Zero};
    use ark_std::UniformRand;

    /// Runs `op` on lanes and `reference` on ark-ff, lane by lane, for edge and random values.
    fn check<L: Lanes>(
        op: unsafe fn(L, L) -> L,
        reference: fn(L::Field, L::Field) -> L::Field,
        edge: &[L::Field],
    ) where
        L::Field: UniformRand,
    {
        let mut rng = ark_std::test_rng();
        let mut values: Vec<L::Field> = edge.to_vec();
        values.extend((0..64).map(|_| L::Field::rand(&mut rng)));
        // Odd lanes in their lazy form x + p (below 2p), as the kernel's products leave them.
        let lazy = |xs: &[L::Field]| {
            let mut words = [[0_u64; 2 * FQ_WORDS]; 8];
            for (j, (x, w)) in xs.iter().zip(&mut words).enumerate() {
                x.encode(w);
                if j % 2 == 1 {
                    for limbs in w[..L::Field::WORDS].chunks_exact_mut(FQ_WORDS) {
                        let mut carry = 0;
                        for (limb, m) in limbs.iter_mut().zip(MODULUS) {
                            let sum = *limb + m + carry;
                            (*limb, carry) = (sum & LIMB_MASK, sum >> 52);
                        }
                    }
                }
            }
            // SAFETY: the test runs only where `detected()` holds.
            unsafe { L::from_words(&words) }
        };
        for a in values.chunks(8).filter(|c| c.len() == 8) {
            for b in values.chunks(8).filter(|c| c.len() == 8) {
                // SAFETY: the test runs only where `detected()` holds.
                let got = unsafe { op(lazy(a), lazy(b)).canonical().to_words() };
                for j in 0..8 {
                    assert_eq!(L::Field::decode(&got[j]), reference(a[j], b[j]));
                    let limbs = &got[j][..L::Field::WORDS];
                    assert!(limbs.iter().all(|&l| l <= LIMB_MASK), "canonical limbs");
                }
            }
        }
    }

    fn edges<F: Field>() -> Vec<F> {
        let (one, two) = (F::one(), F::one().double());
        vec![
            F::zero(),
            one,
            -one,
            two,
            -two,
            two.inverse().unwrap_or(one),
            F::zero(),
            -one,
        ]
    }

    /// The operations the kernel runs, on lanes of `L` against ark-ff.
    fn the_kernel_operations<L: Lanes>()
    where
        L::Field: UniformRand,
    {
        let edges = edges::<L::Field>();
        check::<L>(L::sub, |a, b| a - b, &edges);
        check::<L>(L::mul, |a, b| a * b, &edges);
        check::<L>(
            |a, b| unsafe { a.sub_wide(b).mul(b.sub_wide(a)) },
            |a, b| -(a - b).square(),
            &edges,
        );
        check::<L>(|a, _| unsafe { a.square() }, |a, _| a.square(), &edges);
    }

    #[test]
    fn lanes_equal_ark_ff() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: lane arithmetic not tested here");
            return;
        }
        check::<Fq8>(|a, b| unsafe { fq_add(a, b) }, |a, b| a + b, &edges::<Fq>());
        the_kernel_operations::<Fq8>();
        the_kernel_operations::<Fq2x8>();
        let mut rng = ark_std::test_rng();
        let x: [Fq; 8] = core::array::from_fn(|j| {
            if j == 3 {
                Fq::zero()
            } else {
                Fq::rand(&mut rng)
            }
        });
        let mut words = [[0_u64; 2 * FQ_WORDS]; 8];
        for (v, w) in x.iter().zip(&mut words) {
            v.encode(w);
        }
        // SAFETY: `detected()` holds.
        let inverted = unsafe { Fq8::from_words(&words).invert().to_words() };
        for j in 0..8 {
            assert_eq!(
                Fq::decode(&inverted[j]),
                x[j].inverse().unwrap_or(Fq::zero())
            );
        }
    }

    #[test]
    fn refuses_indices_out_of_range() {
        let points = vec![0_u64; 4 * 2 * FQ_WORDS];
        let mut out = vec![0_u64; 2 * 2 * FQ_WORDS];
        assert!(add_pairs_fq(&points, &[2], &[1], &mut out), "in range");
        assert!(
            !add_pairs_fq(&points, &[3], &[0], &mut out),
            "second point past the end"
        );
        assert!(
            !add_pairs_fq(&points, &[0], &[2], &mut out),
            "destination past the end"
        );
        assert!(
            !add_pairs_fq(&points, &[0, 1], &[0], &mut out),
            "lengths differ"
        );
        assert!(
            !add_pairs_fq2(&points, &[1], &[0], &mut out),
            "Fq2 points are twice as long"
        );
    }
}
