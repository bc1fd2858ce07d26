//! BN254 field arithmetic eight elements at a time on AVX-512 IFMA lanes, for both of the
//! curve's fields: the base field `Fq` (the prover's batch-affine bucket sums, in G1 and in G2
//! over `Fq2`) and the scalar field `Fr` (Poseidon, the hash of RLN membership trees, eight
//! permutations at once).
//!
//! An element is held as five 52-bit limbs of its Montgomery form with `R = 2^260` (what a
//! 52-bit multiply-accumulate lane reduces against), each limb a `u64` word. One implementation
//! of add, sub, mul, square and the conversions serves both fields: the lane code is generic over
//! [`PrimeLanes`], which carries a field's modulus in limbs and the constants derived from it.
//!
//! This crate is the workspace's only home of `unsafe`: the intrinsics live in one module
//! (`avx512`), behind run-time CPU detection ([`ifma_available`]) checked by every safe entry
//! point; everything else is safe code. The portable path (ark-ff) is always there: every entry
//! point returns `false` without the lanes, and [`Arithmetic::Portable`] is how callers select it.
//!
//! ```
//! use ark_bn254::Fr;
//! use field_lanes::LaneField;
//!
//! let x = Fr::from(12345u64);
//! let mut words = [0u64; 5];
//! x.encode(&mut words); // lane form: five 52-bit limbs of x·2^260 mod r
//! assert!(words.iter().all(|&limb| limb < 1 << 52));
//! assert_eq!(Fr::decode(&words), x);
//! // Where the CPU has the lanes, they are used; elsewhere callers take ark-ff.
//! let _ = field_lanes::ifma_available();
//! ```

use ark_bn254::{Fq, Fq2, Fr};
use ark_ff::{BigInt, Field, MontFp, PrimeField};
use serde::{Deserialize, Serialize};

#[cfg(target_arch = "x86_64")]
mod avx512;
mod lane_rounds;
mod poseidon;
mod poseidon2;

pub use poseidon::{PoseidonLanes, PoseidonRounds, MAX_WIDTH};
pub use poseidon2::{Poseidon2Lanes, Poseidon2Rounds};

/// Errors of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LanesError {
    /// IFMA lanes asked for on a CPU without AVX-512F and AVX-512 IFMA.
    #[error("IFMA lanes asked for, but this CPU lacks AVX-512F or AVX-512 IFMA")]
    NoIfma,
    /// A Poseidon width the lanes do not take (outside `2..=MAX_WIDTH`).
    #[error("Poseidon width {0}: the lanes take 2..={max}", max = poseidon::MAX_WIDTH)]
    Width(usize),
    /// Poseidon round constants of an inconsistent shape.
    #[error("Poseidon rounds: {partial} partial-round constants for {sparse} sparse matrices (want one more)")]
    RoundShape {
        /// Partial-round constants given.
        partial: usize,
        /// Sparse matrices given.
        sparse: usize,
    },
    /// A Poseidon2 width the lanes do not take (2, 3 and 4; for 2 and 3 with the standard
    /// internal diagonal, which the kernel evaluates as additions).
    #[error("Poseidon2 width {0} (or its internal diagonal): the lanes take t = 2, 3, 4 with the paper's matrices")]
    Poseidon2Width(usize),
    /// Poseidon2 rounds with unequal numbers of external rounds before and after the internal ones.
    #[error("Poseidon2 rounds: {first} external rounds before the internal ones, {last} after")]
    Poseidon2Shape {
        /// External rounds before.
        first: usize,
        /// External rounds after.
        last: usize,
    },
}

/// Which arithmetic a caller runs on: the lanes where present, or ark-ff.
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
    /// Whether this choice runs on IFMA lanes on this CPU.
    ///
    /// # Errors
    /// [`LanesError::NoIfma`] for [`Arithmetic::Ifma`] on a CPU without the lanes.
    pub fn uses_lanes(self) -> Result<bool, LanesError> {
        match self {
            Arithmetic::Portable => Ok(false),
            Arithmetic::Auto => Ok(ifma_available()),
            Arithmetic::Ifma if ifma_available() => Ok(true),
            Arithmetic::Ifma => Err(LanesError::NoIfma),
        }
    }
}

/// Whether this CPU has the AVX-512F and AVX-512 IFMA lanes the fast paths need.
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

/// Limbs of one prime-field element in lane form.
pub const LIMBS: usize = 5;
/// Bits per limb.
const LIMB_BITS: usize = 52;
const LIMB_MASK: u64 = (1 << LIMB_BITS) - 1;

/// One prime-field element's limbs, lowest first.
pub type Limbs = [u64; LIMBS];

/// Four 64-bit words (lowest first) as five 52-bit limbs.
const fn split52(words: [u64; 4]) -> Limbs {
    [
        words[0] & LIMB_MASK,
        (words[0] >> 52 | words[1] << 12) & LIMB_MASK,
        (words[1] >> 40 | words[2] << 24) & LIMB_MASK,
        (words[2] >> 28 | words[3] << 36) & LIMB_MASK,
        words[3] >> 16,
    ]
}

/// Five 52-bit limbs (a value below 2^256) as four 64-bit words.
const fn join52(l: &Limbs) -> [u64; 4] {
    [
        l[0] | l[1] << 52,
        l[1] >> 12 | l[2] << 40,
        l[2] >> 24 | l[3] << 28,
        l[3] >> 36 | l[4] << 16,
    ]
}

/// `k · limbs`, carried in 52-bit limbs (the result must fit five limbs).
const fn scale52(limbs: Limbs, k: u64) -> Limbs {
    let mut out = [0; LIMBS];
    let mut carry = 0;
    let mut i = 0;
    while i < LIMBS {
        let v = limbs[i] * k + carry;
        out[i] = v & LIMB_MASK;
        carry = v >> LIMB_BITS;
        i += 1;
    }
    out
}

/// `-p^-1 mod 2^52` for odd `p0` (the lowest word of `p`), by Newton's iteration.
const fn neg_inverse52(p0: u64) -> u64 {
    let mut inv: u64 = 1;
    let mut i = 0;
    while i < 6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(p0.wrapping_mul(inv)));
        i += 1;
    }
    inv.wrapping_neg() & LIMB_MASK
}

/// A prime field of BN254 (`Fq` or `Fr`) with its lane constants. Both moduli are below 2^254,
/// so `64p < 2^260`: the bound the lanes' lazy reduction rests on.
pub trait PrimeLanes: PrimeField<BigInt = BigInt<4>> + LaneField {
    /// The modulus in limbs.
    const MODULUS52: Limbs;
    /// `2p` in limbs: the bound lazy values stay below.
    const TWICE_MODULUS52: Limbs;
    /// `-p^-1 mod 2^52`, the Montgomery reduction's multiplier.
    const P_INV52: u64;
    /// `2^260 / 2^256`: ark-ff's Montgomery form times this is ours.
    const SIXTEEN: Self;
    /// `1/16`: ours times this is ark-ff's.
    const INV_SIXTEEN: Self;

    /// ark-ff's Montgomery words (`x · 2^256 mod p`, canonical).
    fn montgomery_words(&self) -> [u64; 4];

    /// The element whose ark-ff Montgomery words are `words` (canonical: below `p`).
    fn from_montgomery_words(words: [u64; 4]) -> Self;
}

macro_rules! prime_lanes {
    ($field:ty, $inv_sixteen:literal) => {
        impl PrimeLanes for $field {
            const MODULUS52: Limbs = split52(<$field as PrimeField>::MODULUS.0);
            const TWICE_MODULUS52: Limbs = scale52(Self::MODULUS52, 2);
            const P_INV52: u64 = neg_inverse52(<$field as PrimeField>::MODULUS.0[0]);
            const SIXTEEN: Self = MontFp!("16");
            const INV_SIXTEEN: Self = MontFp!($inv_sixteen);

            fn montgomery_words(&self) -> [u64; 4] {
                self.0 .0
            }

            fn from_montgomery_words(words: [u64; 4]) -> Self {
                <$field>::new_unchecked(BigInt(words))
            }
        }

        impl LaneField for $field {
            const WORDS: usize = LIMBS;

            fn encode(&self, out: &mut [u64]) {
                out[..LIMBS].copy_from_slice(&split52((*self * Self::SIXTEEN).montgomery_words()));
            }

            fn decode(words: &[u64]) -> Self {
                let mut limbs = [0; LIMBS];
                limbs.copy_from_slice(&words[..LIMBS]);
                Self::from_montgomery_words(join52(&limbs)) * Self::INV_SIXTEEN
            }

            fn negate(words: &mut [u64]) {
                negate_limbs(&mut words[..LIMBS], &Self::MODULUS52);
            }
        }
    };
}

prime_lanes!(
    Fq,
    "12312136615409592312513603231707217237391675025980025810262583815737939742328"
);
prime_lanes!(
    Fr,
    "20520227692349320520856005386178695395514091625390032197217066424914820464641"
);

/// `p - x` in place for a canonical `x` (zero stays zero).
fn negate_limbs(limbs: &mut [u64], modulus: &Limbs) {
    if limbs.iter().all(|&l| l == 0) {
        return;
    }
    // p - x with the borrow carried limb by limb; x < p, so no borrow leaves the top.
    let mut borrow = 0_u64;
    for (limb, &m) in limbs.iter_mut().zip(modulus) {
        let diff = m.wrapping_sub(*limb).wrapping_sub(borrow);
        borrow = diff >> 63;
        *limb = diff & LIMB_MASK;
    }
}

/// `x^(2^n)` by `n` dependent products on the lanes (`dedicated_square`: the squaring kernel,
/// else the general product), or `None` where the CPU lacks them. It exists to measure the
/// *latency* of one lane product against ark-ff's (`cargo bench -p field-lanes`): what lanes can
/// do for a chain of dependent operations, such as the 20 hashes of a single tree update.
#[must_use]
pub fn power_chain<F: PrimeLanes>(x: F, n: usize, dedicated_square: bool) -> Option<F> {
    #[cfg(target_arch = "x86_64")]
    {
        avx512::power_chain(x, n, dedicated_square)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, n, dedicated_square);
        None
    }
}

/// A field whose elements have a lane form: BN254's `Fq`, `Fr` and `Fq2`.
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

    /// Inverts every nonzero element of `values` in place, in ark-ff form, by the batch method
    /// cheapest for this field (the portable path's batch-affine additions call it): one
    /// inversion and three products an element (Montgomery's trick); zeros stay zero.
    fn batch_invert(values: &mut [Self]) {
        serial_batch_invert(values);
    }

    /// `self *= by`, in ark-ff form; cheaper where `by` lies in a subfield (a GLV
    /// endomorphism's `β` is in `Fq` also on G2: two `Fq` products instead of an `Fq2` one).
    fn scale_by(&mut self, by: &Self) {
        *self *= by;
    }
}

/// Montgomery's trick on one thread: prefix products, one inversion, then back. ark-ff's
/// `batch_inversion` does the same through filtered iterators and, with its `parallel`
/// feature, rayon's chunks, which cost more than the products at the sizes a bucket round
/// has (callers are already one per thread).
fn serial_batch_invert<F: Field>(values: &mut [F]) {
    let mut prefix = Vec::with_capacity(values.len());
    let mut product = F::one();
    for v in values.iter() {
        prefix.push(product);
        if !v.is_zero() {
            product *= v;
        }
    }
    let Some(mut inverse) = product.inverse() else {
        return;
    };
    for (v, before) in values.iter_mut().zip(prefix).rev() {
        if v.is_zero() {
            continue;
        }
        let next = inverse * *v;
        *v = inverse * before;
        inverse = next;
    }
}

impl LaneField for Fq2 {
    const WORDS: usize = 2 * LIMBS;

    /// `1/(a + b·u) = (a − b·u)/(a² + b²)` (`u² = −1`): the norms are inverted in `Fq`, so an
    /// element costs two squares, the three `Fq` products of the batch and two more, about
    /// 60% of Montgomery's trick in `Fq2` (three `Fq2` products).
    fn batch_invert(values: &mut [Self]) {
        let mut norms: Vec<Fq> = values
            .iter()
            .map(|v| v.c0.square() + v.c1.square())
            .collect();
        serial_batch_invert(&mut norms);
        for (v, n) in values.iter_mut().zip(&norms) {
            *v = Fq2::new(v.c0 * n, -(v.c1 * n));
        }
    }

    fn scale_by(&mut self, by: &Self) {
        if ark_ff::Zero::is_zero(&by.c1) {
            self.c0 *= by.c0;
            self.c1 *= by.c0;
        } else {
            *self *= by;
        }
    }

    fn encode(&self, out: &mut [u64]) {
        self.c0.encode(&mut out[..LIMBS]);
        self.c1.encode(&mut out[LIMBS..2 * LIMBS]);
    }

    fn decode(words: &[u64]) -> Self {
        Fq2::new(
            Fq::decode(&words[..LIMBS]),
            Fq::decode(&words[LIMBS..2 * LIMBS]),
        )
    }

    fn negate(words: &mut [u64]) {
        Fq::negate(&mut words[..LIMBS]);
        Fq::negate(&mut words[LIMBS..2 * LIMBS]);
    }
}

/// A curve base field whose affine points can be added on lanes: BN254's `Fq` (G1) and `Fq2`
/// (G2).
pub trait AffineLanes: LaneField {
    /// For each `t`: `out[dsts[t]] = points[pairs[t]] + points[pairs[t] + 1]` on IFMA lanes,
    /// where points are affine `(x, y)` of `2·WORDS` words each, canonical, finite, and every
    /// pair has distinct x. `false` (nothing written) where the CPU lacks the lanes, an index is
    /// out of range, the lengths differ or a pair's two x are equal (whose zero denominator would
    /// spoil the batch inversion of its whole lane).
    fn add_pairs(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool;
}

impl AffineLanes for Fq {
    fn add_pairs(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            avx512::pairs::add_pairs_fq(points, pairs, dsts, out)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (points, pairs, dsts, out);
            false
        }
    }
}

impl AffineLanes for Fq2 {
    fn add_pairs(points: &[u64], pairs: &[u32], dsts: &[u32], out: &mut [u64]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            avx512::pairs::add_pairs_fq2(points, pairs, dsts, out)
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
    use ark_ff::BigInteger;
    use ark_std::UniformRand;

    #[test]
    fn batch_invert_and_scale_by_agree_with_ark_ff() {
        use ark_ff::{One, Zero};
        let mut rng = ark_std::test_rng();
        let mut fq2: Vec<Fq2> = (0..50).map(|_| Fq2::rand(&mut rng)).collect();
        fq2.extend([Fq2::zero(), Fq2::one(), Fq2::new(Fq::zero(), Fq::one())]);
        let mut inverted = fq2.clone();
        LaneField::batch_invert(&mut inverted);
        for (v, inv) in fq2.iter().zip(&inverted) {
            assert_eq!(*inv, v.inverse().unwrap_or_default());
        }
        for v in &fq2 {
            let (by, base) = (
                Fq2::rand(&mut rng),
                Fq2::new(Fq::rand(&mut rng), Fq::zero()),
            );
            for by in [by, base] {
                let mut scaled = *v;
                scaled.scale_by(&by);
                assert_eq!(scaled, *v * by);
            }
        }
        let fq: Vec<Fq> = (0..50).map(|_| Fq::rand(&mut rng)).collect();
        let mut inverted = fq.clone();
        LaneField::batch_invert(&mut inverted);
        for (v, inv) in fq.iter().zip(&inverted) {
            assert_eq!(*inv * v, Fq::one());
        }
    }

    fn constants_are_the_fields<F: PrimeLanes>() {
        let words = join52(&F::MODULUS52);
        assert_eq!(BigInt(words), F::MODULUS);
        assert_eq!(F::SIXTEEN * F::INV_SIXTEEN, F::one());
        assert_eq!(F::SIXTEEN, F::from(16u64));
        // -p^-1 · p ≡ -1 mod 2^52
        let p0 = F::MODULUS52[0];
        assert_eq!(F::P_INV52.wrapping_mul(p0) & LIMB_MASK, LIMB_MASK);
        assert_eq!(join52(&F::TWICE_MODULUS52), {
            let mut twice = F::MODULUS;
            twice.mul2();
            twice.0
        });
    }

    #[test]
    fn lane_constants_for_both_fields() {
        constants_are_the_fields::<Fq>();
        constants_are_the_fields::<Fr>();
    }

    fn round_trip<F: PrimeLanes + UniformRand>() {
        let mut rng = ark_std::test_rng();
        let mut values = vec![
            F::zero(),
            F::one(),
            -F::one(),
            F::from(2u8).inverse().unwrap(),
        ];
        values.extend((0..200).map(|_| F::rand(&mut rng)));
        let mut words = [0_u64; LIMBS];
        for x in values {
            x.encode(&mut words);
            assert!(words.iter().all(|&l| l <= LIMB_MASK));
            assert_eq!(F::decode(&words), x);
            F::negate(&mut words);
            assert_eq!(F::decode(&words), -x);
            assert_eq!(F::from_montgomery_words(x.montgomery_words()), x);
        }
    }

    #[test]
    fn encode_decode_negate_round_trip() {
        round_trip::<Fq>();
        round_trip::<Fr>();
        let mut rng = ark_std::test_rng();
        let mut words = [0_u64; 2 * LIMBS];
        for _ in 0..50 {
            let x = Fq2::rand(&mut rng);
            x.encode(&mut words);
            assert_eq!(Fq2::decode(&words), x);
            Fq2::negate(&mut words);
            assert_eq!(Fq2::decode(&words), -x);
        }
    }

    #[test]
    fn power_chain_equals_ark_ff() {
        let x = Fr::from(0x1234_5678_9abc_u64) - Fr::from(3u64).inverse().unwrap();
        let mut want = x;
        for _ in 0..100 {
            want.square_in_place();
        }
        for dedicated in [true, false] {
            match power_chain(x, 100, dedicated) {
                Some(got) => assert_eq!(got, want),
                None => assert!(!ifma_available()),
            }
        }
    }

    #[test]
    fn arithmetic_choice() {
        assert_eq!(Arithmetic::Portable.uses_lanes(), Ok(false));
        assert_eq!(Arithmetic::Auto.uses_lanes(), Ok(ifma_available()));
        let ifma = Arithmetic::Ifma.uses_lanes();
        assert_eq!(ifma.is_ok(), ifma_available());
    }
}
