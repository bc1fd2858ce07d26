//! The IFMA lanes: BN254 field arithmetic on eight elements at once (`vpmadd52luq` /
//! `vpmadd52huq`), generic over the field ([`PrimeLanes`]: `Fq` or `Fr`), and the two kernels
//! that run on it: the batch-affine pair addition of the prover's bucket sums (`Fq`, `Fq2`) and
//! the Poseidon permutation (`Fr`).
//!
//! The only module of the workspace allowed `unsafe`: every intrinsic needs AVX-512F and
//! AVX-512 IFMA, which [`detected`] checks at run time before each safe entry point
//! ([`add_pairs_fq`], [`add_pairs_fq2`], [`permute_first`]) calls in; the gathers and scatters
//! read and write only where that entry point has checked the indices, and the loads and stores
//! touch only local arrays.
//!
//! Values in flight are lazy: limbs below 2^52, value below 2p (what a Montgomery product of
//! two such values gives without a final subtraction, as 2^260 > 64p); what a kernel stores,
//! inverts or hands back is made canonical (below p) first, so results compare and decode
//! exactly. Montgomery multiplication interleaves the five reduction steps with the schoolbook
//! rows (CIOS): each row adds `a_i·b` and `m·p` to six 64-bit accumulators, which stay below
//! 2^58 (five rows of at most four 52-bit halves each, plus carries), so no intermediate carry
//! propagation is needed until the end; the result is below 2p.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::arch::x86_64::{
    __m256i, __m512i, __mmask8, _mm256_loadu_si256, _mm512_add_epi64, _mm512_and_si512,
    _mm512_cmplt_epi64_mask, _mm512_i32gather_epi64, _mm512_loadu_si512, _mm512_madd52hi_epu64,
    _mm512_madd52lo_epu64, _mm512_mask_blend_epi64, _mm512_mask_i32scatter_epi64,
    _mm512_set1_epi64, _mm512_setzero_si512, _mm512_srai_epi64, _mm512_srli_epi64,
    _mm512_storeu_si512, _mm512_sub_epi64,
};
use core::marker::PhantomData;

use ark_bn254::{Fq, Fq2};
use ark_ff::{batch_inversion, One};

use crate::poseidon::PoseidonLanes;
use crate::{join52, split52, LaneField, Limbs, PrimeLanes, LIMBS, LIMB_MASK};

/// Whether the CPU has AVX-512F and AVX-512 IFMA (cached by std after the first call).
pub(crate) fn detected() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512ifma")
}

/// Eight elements of a prime field: limb `i` of lane `j` is `limbs[i]`'s 64-bit lane `j`.
struct Fp8<F>([__m512i; LIMBS], PhantomData<F>);

// Manual: a derive would ask `F: Copy` of the marker, which the lanes do not need.
impl<F> Clone for Fp8<F> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<F> Copy for Fp8<F> {}

/// Eight `Fq2` elements, `c0 + c1·u` with `u² = -1`.
#[derive(Clone, Copy)]
struct Fq2x8 {
    c0: Fp8<Fq>,
    c1: Fp8<Fq>,
}

#[inline]
#[target_feature(enable = "avx512f")]
fn splat_u64(value: u64) -> __m512i {
    // Bits reinterpreted: the lanes are unsigned.
    _mm512_set1_epi64(value.cast_signed())
}

impl<F: PrimeLanes> Fp8<F> {
    #[inline]
    fn new(limbs: [__m512i; LIMBS]) -> Self {
        Fp8(limbs, PhantomData)
    }

    /// All eight lanes set to one lane-form element.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn splat(limbs: &Limbs) -> Self {
        Self::new(core::array::from_fn(|i| splat_u64(limbs[i])))
    }

    /// Lane `j` of limb `i` from `limbs[i][j]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn load(limbs: &[[u64; 8]; LIMBS]) -> Self {
        // SAFETY: unaligned loads of 64 bytes from 64-byte arrays.
        Self::new(core::array::from_fn(|i| unsafe {
            _mm512_loadu_si512(limbs[i].as_ptr().cast())
        }))
    }

    /// Limb `i` of lane `j` into `[i][j]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn store(self) -> [[u64; 8]; LIMBS] {
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
fn normalize(mut t: [__m512i; LIMBS]) -> [__m512i; LIMBS] {
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
fn subtract_below(t: [__m512i; LIMBS], m: &Limbs) -> [__m512i; LIMBS] {
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
fn canonical<F: PrimeLanes>(a: Fp8<F>) -> Fp8<F> {
    Fp8::new(subtract_below(a.0, &F::MODULUS52))
}

/// `a + b`, lazy (below 2p) for lazy inputs.
#[inline]
#[target_feature(enable = "avx512f")]
fn add<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    let sum = normalize(core::array::from_fn(|j| _mm512_add_epi64(a.0[j], b.0[j])));
    Fp8::new(subtract_below(sum, &F::TWICE_MODULUS52))
}

/// `a - b`, lazy for lazy inputs: `a + 2p - b` lies in `(0, 4p)`; its limbs may go negative,
/// which `normalize`'s signed carries take.
#[inline]
#[target_feature(enable = "avx512f")]
fn sub<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    Fp8::new(subtract_below(sub_wide(a, b).0, &F::TWICE_MODULUS52))
}

/// `a + b` left below 8p (lazy inputs below 4p), for a multiplication only.
#[inline]
#[target_feature(enable = "avx512f")]
fn add_wide<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
    Fp8::new(normalize(core::array::from_fn(|j| {
        _mm512_add_epi64(a.0[j], b.0[j])
    })))
}

/// `a - b` left in `(0, 4p)` (lazy inputs), for a multiplication only.
#[inline]
#[target_feature(enable = "avx512f")]
fn sub_wide<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
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
fn mul<F: PrimeLanes>(a: Fp8<F>, b: Fp8<F>) -> Fp8<F> {
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
fn mul_const<F: PrimeLanes>(a: Fp8<F>, c: &Limbs) -> Fp8<F> {
    mul(a, Fp8::splat(c))
}

/// Eight elements of a field in lanes, as the pair-addition kernel needs them.
trait Lanes: Copy {
    /// The field, whose lane form this is.
    type Field: LaneField;
    /// The modulus of the prime field under it (tests write lazy forms with it).
    #[cfg(test)]
    const MODULUS52: Limbs;

    /// All eight lanes set to one element.
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn splat_field(value: &Self::Field) -> Self {
        let mut words = [0_u64; 2 * LIMBS];
        value.encode(&mut words);
        // SAFETY: the caller has AVX-512F.
        unsafe { Self::from_words(&[words; 8]) }
    }

    /// Lane `j` from `words[j]` (lane form).
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn from_words(words: &[[u64; 2 * LIMBS]; 8]) -> Self;

    /// Lane `j` into `words[j]`.
    ///
    /// # Safety
    /// AVX-512F.
    unsafe fn to_words(self) -> [[u64; 2 * LIMBS]; 8];

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
        let mut out = [[0_u64; 2 * LIMBS]; 8];
        for (value, lane) in values.iter().zip(&mut out) {
            value.encode(lane);
        }
        // SAFETY: the caller has AVX-512F.
        unsafe { Self::from_words(&out) }
    }
}

impl<F: PrimeLanes> Lanes for Fp8<F> {
    type Field = F;
    #[cfg(test)]
    const MODULUS52: Limbs = F::MODULUS52;

    #[target_feature(enable = "avx512f")]
    unsafe fn from_words(words: &[[u64; 2 * LIMBS]; 8]) -> Self {
        Fp8::load(&core::array::from_fn(|i| {
            core::array::from_fn(|j| words[j][i])
        }))
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn to_words(self) -> [[u64; 2 * LIMBS]; 8] {
        let limbs = self.store();
        core::array::from_fn(|j| core::array::from_fn(|i| if i < LIMBS { limbs[i][j] } else { 0 }))
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn gather(base: *const u64, offsets: __m256i) -> Self {
        // SAFETY: the caller keeps `base + offsets[j] + i` (i < 5) in bounds for every lane.
        Fp8::new(core::array::from_fn(|i| unsafe {
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
        canonical(self)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub(self, other: Self) -> Self {
        sub(self, other)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub_wide(self, other: Self) -> Self {
        sub_wide(self, other)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul(self, other: Self) -> Self {
        mul(self, other)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn square(self) -> Self {
        square(self)
    }
}

impl Lanes for Fq2x8 {
    type Field = Fq2;
    #[cfg(test)]
    const MODULUS52: Limbs = Fq::MODULUS52;

    #[target_feature(enable = "avx512f")]
    unsafe fn from_words(words: &[[u64; 2 * LIMBS]; 8]) -> Self {
        let high: [[u64; 2 * LIMBS]; 8] = core::array::from_fn(|j| {
            core::array::from_fn(|i| if i < LIMBS { words[j][LIMBS + i] } else { 0 })
        });
        // SAFETY: this function's target features are the callees'.
        unsafe {
            Fq2x8 {
                c0: Fp8::from_words(words),
                c1: Fp8::from_words(&high),
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn to_words(self) -> [[u64; 2 * LIMBS]; 8] {
        // SAFETY: this function's target features are the callees'.
        let (low, high) = unsafe { (self.c0.to_words(), self.c1.to_words()) };
        core::array::from_fn(|j| {
            core::array::from_fn(|i| {
                if i < LIMBS {
                    low[j][i]
                } else {
                    high[j][i - LIMBS]
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
                c0: Fp8::gather(base, offsets),
                c1: Fp8::gather(base.add(LIMBS), offsets),
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn scatter(self, base: *mut u64, offsets: __m256i, mask: __mmask8) {
        // SAFETY: the caller keeps all ten words of every masked lane's element in bounds.
        unsafe {
            self.c0.scatter(base, offsets, mask);
            self.c1.scatter(base.add(LIMBS), offsets, mask);
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn canonical(self) -> Self {
        Fq2x8 {
            c0: canonical(self.c0),
            c1: canonical(self.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub(self, other: Self) -> Self {
        Fq2x8 {
            c0: sub(self.c0, other.c0),
            c1: sub(self.c1, other.c1),
        }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn sub_wide(self, other: Self) -> Self {
        Fq2x8 {
            c0: sub_wide(self.c0, other.c0),
            c1: sub_wide(self.c1, other.c1),
        }
    }

    /// Karatsuba: three base-field products.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn mul(self, other: Self) -> Self {
        let v0 = mul(self.c0, other.c0);
        let v1 = mul(self.c1, other.c1);
        // Coefficients below 4p (a wide difference) sum below 8p: still a valid operand.
        let s = mul(add_wide(self.c0, self.c1), add_wide(other.c0, other.c1));
        Fq2x8 {
            c0: sub(v0, v1),
            c1: sub(sub(s, v0), v1),
        }
    }

    /// `(c0 + c1)(c0 - c1) + 2·c0·c1·u`: two base-field products. Lazy input (each coefficient
    /// below 2p), as `c0 - c1` must not go negative.
    #[inline]
    #[target_feature(enable = "avx512f,avx512ifma")]
    unsafe fn square(self) -> Self {
        let cross = mul(self.c0, self.c1);
        Fq2x8 {
            c0: mul(add_wide(self.c0, self.c1), sub_wide(self.c0, self.c1)),
            c1: add(cross, cross),
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
    let mut product = unsafe { L::splat_field(&L::Field::one()) };
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

/// Checks what [`add_pairs`] needs of its input: indices in range, offsets that fit an i32, and
/// distinct x within each pair (a zero denominator would turn its lane's whole product, and so
/// every inverse peeled off it, into zero: wrong sums reported as success).
fn pairs_fit(points: &[u64], pairs: &[u32], dsts: &[u32], out: &[u64], words: usize) -> bool {
    let stride = 2 * words;
    let fits_i32 = |len: usize| i32::try_from(len).is_ok();
    let inside = |list: &[u32], span: usize, len: usize| {
        list.iter().all(|&i| {
            (i as usize + span)
                .checked_mul(stride)
                .is_some_and(|end| end <= len)
        })
    };
    let distinct_x = || {
        pairs.iter().all(|&i| {
            let p = i as usize * stride;
            points.get(p..p + words) != points.get(p + stride..p + stride + words)
        })
    };
    pairs.len() == dsts.len()
        && fits_i32(points.len())
        && fits_i32(out.len())
        && inside(pairs, 2, points.len())
        && inside(dsts, 1, out.len())
        && distinct_x()
}

/// [`add_pairs`] behind the checks it needs: `false` (nothing written) without the CPU
/// features or with input it cannot take.
fn add_pairs_checked<L: Lanes>(
    points: &[u64],
    pairs: &[u32],
    dsts: &[u32],
    out: &mut [u64],
) -> bool {
    if !detected() || !pairs_fit(points, pairs, dsts, out, L::Field::WORDS) {
        return false;
    }
    // SAFETY: the CPU features were detected and the input checked just above.
    unsafe { add_pairs::<L>(points, pairs, dsts, out) };
    true
}

/// [`AffineLanes::add_pairs`](crate::AffineLanes::add_pairs) for `Fq`.
pub(crate) fn add_pairs_fq(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
    add_pairs_checked::<Fp8<Fq>>(points, pairs, dsts, out)
}

/// [`AffineLanes::add_pairs`](crate::AffineLanes::add_pairs) for `Fq2`.
pub(crate) fn add_pairs_fq2(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
    add_pairs_checked::<Fq2x8>(points, pairs, dsts, out)
}

/// `x⁵`, lazy for a lazy `x`.
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn sbox<F: PrimeLanes>(x: Fp8<F>) -> Fp8<F> {
    mul(x, square(square(x)))
}

/// `t += a·b` without reduction: ten 64-bit accumulators of 52-bit halves (a product adds at
/// most ten halves to any one).
#[inline]
#[target_feature(enable = "avx512f,avx512ifma")]
fn mul_accumulate<F: PrimeLanes>(t: &mut [__m512i; 2 * LIMBS], a: Fp8<F>, b: Fp8<F>) {
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
fn reduce<F: PrimeLanes>(mut t: [__m512i; 2 * LIMBS]) -> Fp8<F> {
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
fn square<F: PrimeLanes>(a: Fp8<F>) -> Fp8<F> {
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

/// The permutation on eight lazy states, in the round structure of [`PoseidonLanes`]; every
/// value stays below 2p between operations, so every product is in range.
#[target_feature(enable = "avx512f,avx512ifma")]
fn permute8<F: PrimeLanes, const T: usize>(k: &PoseidonLanes<F, T>, s: &mut [Fp8<F>; T]) {
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

/// [`PoseidonLanes::permute_first`] on a CPU with the lanes: eight states per kernel run,
/// converted to and from ark-ff's Montgomery form with one lane product each way.
#[target_feature(enable = "avx512f,avx512ifma")]
fn permute_first_lanes<F: PrimeLanes, const T: usize>(
    k: &PoseidonLanes<F, T>,
    states: &[[F; T]],
    out: &mut [F],
) {
    let n = states.len().min(out.len());
    for (group, outs) in states[..n].chunks(8).zip(out[..n].chunks_mut(8)) {
        let mut words = [[[0_u64; 8]; LIMBS]; T];
        for j in 0..8 {
            // Padding lanes repeat the group's first state; their results are dropped.
            let Some(state) = group.get(j).or(group.first()) else {
                break;
            };
            for (word, x) in words.iter_mut().zip(state) {
                for (limb, value) in word.iter_mut().zip(split52(x.montgomery_words())) {
                    limb[j] = value;
                }
            }
        }
        let mut s: [Fp8<F>; T] =
            core::array::from_fn(|w| mul_const(Fp8::load(&words[w]), &k.to_lane));
        permute8(k, &mut s);
        let first = canonical(mul_const(s[0], &k.from_lane)).store();
        for (j, o) in outs.iter_mut().enumerate() {
            let limbs: Limbs = core::array::from_fn(|i| first[i][j]);
            *o = F::from_montgomery_words(join52(&limbs));
        }
    }
}

/// [`PoseidonLanes::permute_first`]: `false` (nothing written) without the CPU features.
pub(crate) fn permute_first<F: PrimeLanes, const T: usize>(
    k: &PoseidonLanes<F, T>,
    states: &[[F; T]],
    out: &mut [F],
) -> bool {
    if !detected() {
        return false;
    }
    // SAFETY: the CPU features were detected just above; the kernel touches only its arguments
    // and local arrays.
    unsafe { permute_first_lanes(k, states, out) };
    true
}

/// `x^(2^n)` by `n` dependent lane products (squarings, or general products of a value with
/// itself), all eight lanes the same: the latency of one lane product, for the measurement of
/// what lanes can do for a single dependent chain (`cargo bench -p field-lanes`).
#[target_feature(enable = "avx512f,avx512ifma")]
fn power_chain_lanes<F: PrimeLanes>(x: F, n: usize, dedicated_square: bool) -> F {
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
            let mut words = [[0_u64; 2 * LIMBS]; 8];
            for (j, (x, w)) in xs.iter().zip(&mut words).enumerate() {
                x.encode(w);
                if j % 2 == 1 {
                    for limbs in w[..L::Field::WORDS].chunks_exact_mut(LIMBS) {
                        let mut carry = 0;
                        for (limb, m) in limbs.iter_mut().zip(L::MODULUS52) {
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
        check::<Fp8<Fq>>(|a, b| unsafe { add(a, b) }, |a, b| a + b, &edges::<Fq>());
        the_kernel_operations::<Fp8<Fq>>();
        the_kernel_operations::<Fq2x8>();
        let mut rng = ark_std::test_rng();
        let x: [Fq; 8] = core::array::from_fn(|j| {
            if j == 3 {
                Fq::zero()
            } else {
                Fq::rand(&mut rng)
            }
        });
        let mut words = [[0_u64; 2 * LIMBS]; 8];
        for (v, w) in x.iter().zip(&mut words) {
            v.encode(w);
        }
        // SAFETY: `detected()` holds.
        let inverted = unsafe { Fp8::<Fq>::from_words(&words).invert().to_words() };
        for j in 0..8 {
            assert_eq!(
                Fq::decode(&inverted[j]),
                x[j].inverse().unwrap_or(Fq::zero())
            );
        }
    }

    /// `count` distinct affine G1 points in lane form (`k·G` for k = 1..=count), and the points.
    fn g1_points(count: usize) -> (Vec<u64>, Vec<ark_bn254::G1Affine>) {
        use ark_ec::{AffineRepr, CurveGroup};
        let g = ark_bn254::G1Affine::generator();
        let points: Vec<ark_bn254::G1Affine> = (1..=count as u64)
            .map(|k| (g * ark_bn254::Fr::from(k * k + 7)).into_affine())
            .collect();
        let mut words = vec![0_u64; count * 2 * LIMBS];
        for (p, w) in points.iter().zip(words.chunks_exact_mut(2 * LIMBS)) {
            p.x.encode(&mut w[..LIMBS]);
            p.y.encode(&mut w[LIMBS..]);
        }
        (words, points)
    }

    #[test]
    fn refuses_input_it_cannot_take() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: add_pairs not tested here");
            return;
        }
        let (points, _) = g1_points(4);
        let mut out = vec![0_u64; 2 * 2 * LIMBS];
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
        // A pair with equal x (P and -P, or P twice): refused, nothing written.
        let mut twin = points.clone();
        twin.copy_within(0..LIMBS, 2 * LIMBS);
        let before = out.clone();
        assert!(!add_pairs_fq(&twin, &[2, 0], &[0, 1], &mut out), "equal x");
        assert_eq!(out, before, "nothing written");
    }

    /// Every pair of a batch whose length is not a multiple of eight sums right, and the padding
    /// lanes (which repeat pair 0) write nothing: sentinels around and between the destinations
    /// survive.
    #[test]
    fn tail_lanes_write_nothing() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: add_pairs not tested here");
            return;
        }
        let (points, affine) = g1_points(40);
        for count in [1_usize, 7, 9, 15, 17] {
            let index = |t: usize| u32::try_from(t).unwrap();
            let pairs: Vec<u32> = (0..count).map(|t| index(2 * t)).collect();
            // Destinations 1, 3, 5, ...: slot 0 (pair 0's would-be padding target) and every
            // even slot stay sentinels.
            let dsts: Vec<u32> = (0..count).map(|t| index(2 * t + 1)).collect();
            let sentinel = 0x5eed_5eed_5eed_u64;
            let mut out = vec![sentinel; (2 * count + 2) * 2 * LIMBS];
            assert!(add_pairs_fq(&points, &pairs, &dsts, &mut out));
            for (slot, point) in out.chunks_exact(2 * LIMBS).enumerate() {
                if slot % 2 == 0 || slot > 2 * count {
                    assert!(
                        point.iter().all(|&w| w == sentinel),
                        "slot {slot} of {count}"
                    );
                } else {
                    let t = slot / 2;
                    let want: ark_bn254::G1Affine = (affine[2 * t] + affine[2 * t + 1]).into();
                    let got = ark_bn254::G1Affine::new_unchecked(
                        Fq::decode(&point[..LIMBS]),
                        Fq::decode(&point[LIMBS..]),
                    );
                    assert_eq!(got, want, "pair {t} of {count}");
                }
            }
        }
    }

    #[test]
    fn scalar_field_lanes_equal_ark_ff() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: lane arithmetic not tested here");
            return;
        }
        use ark_bn254::Fr;
        check::<Fp8<Fr>>(|a, b| unsafe { add(a, b) }, |a, b| a + b, &edges::<Fr>());
        the_kernel_operations::<Fp8<Fr>>();
        // The Poseidon kernel's fused forms: a sum of products with constants reduced once (the
        // largest constant, p − 1, among them, against lazy lanes), and x⁵.
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
