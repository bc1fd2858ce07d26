//! What a kernel runs over any field in lanes ([`Lanes`]): the prime field's `Fp8` and
//! `Fq2x8` (`c0 + c1·u`, Karatsuba over two `Fp8<Fq>`), with their conversions, gathers and
//! scatters. Checked lane by lane against ark-ff in the tests below.

use core::arch::x86_64::{__m256i, __mmask8, _mm512_i32gather_epi64, _mm512_mask_i32scatter_epi64};

use ark_bn254::{Fq, Fq2};
use ark_ff::batch_inversion;

use crate::{LaneField, PrimeLanes, LIMBS};

use super::fp::{add, add_wide, canonical, mul, square, sub, sub_wide, Fp8};

/// Eight `Fq2` elements, `c0 + c1·u` with `u² = -1`.
#[derive(Clone, Copy)]
pub(super) struct Fq2x8 {
    c0: Fp8<Fq>,
    c1: Fp8<Fq>,
}

/// Eight elements of a field in lanes, as the pair-addition kernel needs them.
pub(super) trait Lanes: Copy {
    /// The field, whose lane form this is.
    type Field: LaneField;
    /// The modulus of the prime field under it (tests write lazy forms with it).
    #[cfg(test)]
    const MODULUS52: crate::Limbs;

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
    const MODULUS52: crate::Limbs = F::MODULUS52;

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
    const MODULUS52: crate::Limbs = Fq::MODULUS52;

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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::avx512::detected;
    use crate::LIMB_MASK;
    use ark_ff::{Field, Zero};
    use ark_std::UniformRand;

    /// Runs `op` on lanes and `reference` on ark-ff, lane by lane, for edge and random values.
    pub(in crate::avx512) fn check<L: Lanes>(
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

    pub(in crate::avx512) fn edges<F: Field>() -> Vec<F> {
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

    #[test]
    fn scalar_field_lanes_equal_ark_ff() {
        if !detected() {
            eprintln!("no AVX-512 IFMA on this CPU: lane arithmetic not tested here");
            return;
        }
        use ark_bn254::Fr;
        check::<Fp8<Fr>>(|a, b| unsafe { add(a, b) }, |a, b| a + b, &edges::<Fr>());
        the_kernel_operations::<Fp8<Fr>>();
    }
}
