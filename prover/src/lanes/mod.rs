//! Base-field arithmetic eight elements at a time on AVX-512 IFMA, for the batch-affine bucket
//! additions of [`FixedBaseMsm`](crate::FixedBaseMsm).
//!
//! An element of BN254's base field is held as five 52-bit limbs of its Montgomery form with
//! `R = 2^260` (what a 52-bit multiply-accumulate lane reduces against), each limb a `u64` word;
//! an `Fq2` element is its two coefficients, ten words. ark-ff's own form is `R = 2^256`, so
//! [`LaneField::encode`] multiplies by 16 on the way in and [`LaneField::decode`] by 1/16 on
//! the way out: one ark-ff multiplication each, paid once per table point and per bucket.
//!
//! This module is safe code: the encoding, the choice of [`Arithmetic`] and CPU detection.
//! The intrinsics live in `lanes/avx512.rs` alone (the one module of the workspace allowed `unsafe`),
//! behind run-time detection; the portable path (ark-ff) is always available, and
//! [`Arithmetic::Portable`] forces it.

use ark_bn254::{Fq, Fq2};
use ark_ff::{BigInt, Field, MontFp};
use serde::{Deserialize, Serialize};

#[cfg(target_arch = "x86_64")]
mod avx512;

/// Which arithmetic a [`FixedBaseMsm`](crate::FixedBaseMsm) sums its buckets with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arithmetic {
    /// IFMA lanes where the CPU has them, ark-ff otherwise.
    #[default]
    Auto,
    /// ark-ff on every CPU.
    Portable,
    /// IFMA lanes; refused where the CPU lacks AVX-512F or AVX-512 IFMA.
    Ifma,
}

impl Arithmetic {
    /// Whether this choice sums on IFMA lanes on this CPU.
    ///
    /// # Errors
    /// [`ProverError::NoIfma`](crate::ProverError::NoIfma) for [`Arithmetic::Ifma`] on a CPU
    /// without the lanes.
    pub fn uses_lanes(self) -> Result<bool, crate::ProverError> {
        match self {
            Arithmetic::Portable => Ok(false),
            Arithmetic::Auto => Ok(ifma_available()),
            Arithmetic::Ifma if ifma_available() => Ok(true),
            Arithmetic::Ifma => Err(crate::ProverError::NoIfma),
        }
    }
}

/// Whether this CPU has the AVX-512 IFMA lanes the fast path needs.
#[must_use]
pub fn ifma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx512::detected()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Words of one 52-bit-limbed `Fq`.
const FQ_WORDS: usize = 5;
/// Bits per limb.
const LIMB_BITS: usize = 52;
const LIMB_MASK: u64 = (1 << LIMB_BITS) - 1;
/// BN254's base-field modulus in 52-bit limbs, lowest first.
const MODULUS: [u64; FQ_WORDS] = [
    0x8c16d87cfd47,
    0x916871ca8d3c2,
    0x181585d97816a,
    0xa029b85045b68,
    0x30644e72e131,
];
/// `2^260 / 2^256`: ark-ff's Montgomery form times this is ours.
const SIXTEEN: Fq = MontFp!("16");
/// `1/16 mod p`: ours times this is ark-ff's.
const INV_SIXTEEN: Fq =
    MontFp!("12312136615409592312513603231707217237391675025980025810262583815737939742328");

/// A base field whose elements can be summed on IFMA lanes: BN254's `Fq` (G1) and `Fq2` (G2).
pub trait LaneField: Field {
    /// `u64` words of one element in lane form.
    const WORDS: usize;

    /// Writes this element's lane form (canonical: every limb below 2^52, the value below p)
    /// into `out[..WORDS]`.
    fn encode(&self, out: &mut [u64]);

    /// The element whose lane form is `words[..WORDS]`, as [`encode`](Self::encode) wrote it
    /// or the lanes computed it.
    fn decode(words: &[u64]) -> Self;

    /// Negates the lane-form element in `words[..WORDS]` in place.
    fn negate(words: &mut [u64]);

    /// For each `t`: `out[dsts[t]] = points[pairs[t]] + points[pairs[t] + 1]` on IFMA lanes,
    /// where points are affine `(x, y)` of `2·WORDS` words each and every pair has distinct,
    /// finite x. `false` (nothing written) where the CPU lacks the lanes or an index is out of
    /// range.
    #[doc(hidden)]
    fn add_pairs(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool;
}

impl LaneField for Fq {
    const WORDS: usize = FQ_WORDS;

    fn encode(&self, out: &mut [u64]) {
        let words = (*self * SIXTEEN).0 .0;
        for (i, limb) in out[..FQ_WORDS].iter_mut().enumerate() {
            let (word, shift) = (i * LIMB_BITS / 64, i * LIMB_BITS % 64);
            let mut bits = words[word] >> shift;
            if shift + LIMB_BITS > 64 && word + 1 < words.len() {
                bits |= words[word + 1] << (64 - shift);
            }
            *limb = bits & LIMB_MASK;
        }
    }

    fn decode(words: &[u64]) -> Self {
        let l = &words[..FQ_WORDS];
        let limbs = [
            l[0] | l[1] << 52,
            l[1] >> 12 | l[2] << 40,
            l[2] >> 24 | l[3] << 28,
            l[3] >> 36 | l[4] << 16,
        ];
        Fq::new_unchecked(BigInt(limbs)) * INV_SIXTEEN
    }

    fn negate(words: &mut [u64]) {
        let limbs = &mut words[..FQ_WORDS];
        if limbs.iter().all(|&l| l == 0) {
            return;
        }
        // p - x with the borrow carried limb by limb; x < p, so no borrow leaves the top.
        let mut borrow = 0_u64;
        for (limb, &m) in limbs.iter_mut().zip(&MODULUS) {
            let diff = m.wrapping_sub(*limb).wrapping_sub(borrow);
            borrow = diff >> 63;
            *limb = diff & LIMB_MASK;
        }
    }

    fn add_pairs(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            avx512::add_pairs_fq(points, pairs, dsts, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (points, pairs, dsts, out);
            false
        }
    }
}

impl LaneField for Fq2 {
    const WORDS: usize = 2 * FQ_WORDS;

    fn encode(&self, out: &mut [u64]) {
        self.c0.encode(&mut out[..FQ_WORDS]);
        self.c1.encode(&mut out[FQ_WORDS..2 * FQ_WORDS]);
    }

    fn decode(words: &[u64]) -> Self {
        Fq2::new(
            Fq::decode(&words[..FQ_WORDS]),
            Fq::decode(&words[FQ_WORDS..2 * FQ_WORDS]),
        )
    }

    fn negate(words: &mut [u64]) {
        Fq::negate(&mut words[..FQ_WORDS]);
        Fq::negate(&mut words[FQ_WORDS..2 * FQ_WORDS]);
    }

    fn add_pairs(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            avx512::add_pairs_fq2(points, pairs, dsts, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (points, pairs, dsts, out);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_ff::{One, PrimeField, Zero};
    use ark_std::UniformRand;

    #[test]
    fn modulus_limbs_are_the_field_modulus() {
        let mut words = [0_u64; 4];
        for (i, &limb) in MODULUS.iter().enumerate() {
            let (word, shift) = (i * LIMB_BITS / 64, i * LIMB_BITS % 64);
            words[word] |= limb << shift;
            if shift + LIMB_BITS > 64 && word + 1 < words.len() {
                words[word + 1] |= limb >> (64 - shift);
            }
        }
        assert_eq!(BigInt(words), Fq::MODULUS);
        assert_eq!(SIXTEEN * INV_SIXTEEN, Fq::one());
    }

    #[test]
    fn encode_decode_negate_round_trip() {
        let mut rng = ark_std::test_rng();
        let mut edge = vec![
            Fq::zero(),
            Fq::one(),
            -Fq::one(),
            Fq::from(2u8).inverse().unwrap(),
        ];
        edge.extend((0..200).map(|_| Fq::rand(&mut rng)));
        let mut words = [0_u64; FQ_WORDS];
        for x in edge {
            x.encode(&mut words);
            assert!(words.iter().all(|&l| l <= LIMB_MASK));
            assert_eq!(Fq::decode(&words), x);
            Fq::negate(&mut words);
            assert_eq!(Fq::decode(&words), -x);
        }
        let mut words = [0_u64; 2 * FQ_WORDS];
        for _ in 0..50 {
            let x = Fq2::rand(&mut rng);
            x.encode(&mut words);
            assert_eq!(Fq2::decode(&words), x);
            Fq2::negate(&mut words);
            assert_eq!(Fq2::decode(&words), -x);
        }
    }
}
