//! GLV scalar splitting: `k ≡ k₁ + λ·k₂ (mod r)` with `|k₁|, |k₂| < 2^128`, where `λ` is the
//! eigenvalue of the curve's cheap endomorphism `φ(x, y) = (β·x, y)` (BN254's G1 and G2 both
//! have one). `k·P = k₁·P + k₂·φ(P)`, so a fixed-base table needs the shifts of half-width
//! scalars only: half the memory for the same number of bucket entries, `φ` costing one
//! multiplication of `x` when an entry is gathered.
//!
//! The split is Babai's rounding against the short lattice basis arkworks' [`GLVConfig`] carries
//! (`SCALAR_DECOMP_COEFFS`), in fixed-width integers instead of arkworks' `num-bigint` (which
//! allocates, and costs a microsecond a scalar). Each rounded coefficient is `⌊k·g/2^384⌋` with
//! `g = ⌊2^384·|n|/r⌋` precomputed: it differs from the exact quotient by less than `1 + 2^-130`,
//! so `(k₁, k₂) = (e₁, e₂)·N` with `|eᵢ| < 1 + 2^-130`, and each half is below
//! `1.0001·(|n₁₁| + |n₂₁|) < 1.5·2^127.8 < 2^128` for BN254's basis. The halves are computed
//! modulo 2^256 (exact, as they are far below 2^255) and checked against 2^128 all the same.

use ark_ec::scalar_mul::glv::GLVConfig;
use ark_ff::{BigInteger, PrimeField};
use num_bigint::BigUint;

/// Bits a half of a split scalar spans (its magnitude is below `2^HALF_BITS`).
pub(crate) const HALF_BITS: u32 = 128;

/// A 256-bit integer in two's complement, little-endian limbs.
type Word4 = [u64; 4];

/// One half of a split scalar: whether it is negative, and its magnitude.
pub(crate) type Half = (bool, u128);

/// The precomputed constants of one curve's split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Splitter {
    /// The basis `[n₁₁, n₁₂, n₂₁, n₂₂]`, signed, in two's complement.
    basis: [Word4; 4],
    /// `⌊2^384·|n₂₂|/r⌋` and `⌊2^384·|n₁₂|/r⌋`: the two rounding multipliers.
    g: [[u64; 5]; 2],
    /// Whether `β₁ = k·n₂₂/r` and `β₂ = −k·n₁₂/r` are negative (`k ≥ 0`).
    beta_negative: [bool; 2],
}

impl Splitter {
    /// The split of `P`'s scalar field by `P`'s basis.
    pub(crate) fn new<P: GLVConfig>() -> Self {
        let modulus: BigUint = P::ScalarField::MODULUS.into();
        let coefficients = P::SCALAR_DECOMP_COEFFS;
        let basis = coefficients.map(|(positive, magnitude)| {
            let mut word = limbs4(magnitude.as_ref());
            if !positive {
                word = negate(word);
            }
            word
        });
        let rounding = |magnitude: &<P::ScalarField as PrimeField>::BigInt| {
            let magnitude: BigUint = (*magnitude).into();
            let g: BigUint = (magnitude << 384_u32) / &modulus;
            let digits = g.to_u64_digits();
            let mut limbs = [0_u64; 5];
            for (limb, digit) in limbs.iter_mut().zip(digits) {
                *limb = digit;
            }
            limbs
        };
        let [_, (n12_positive, n12), _, (n22_positive, n22)] = coefficients;
        Self {
            basis,
            g: [rounding(&n22), rounding(&n12)],
            // β₁ has n₂₂'s sign; β₂ the opposite of n₁₂'s.
            beta_negative: [!n22_positive, n12_positive],
        }
    }

    /// `(k₁, k₂)` with `k ≡ k₁ + λ·k₂ (mod r)`, each below `2^128` in magnitude; `None` if a
    /// half is not (which the lattice bound rules out: checked, never assumed).
    pub(crate) fn split<B: BigInteger>(&self, k: &B) -> Option<[Half; 2]> {
        let k = limbs4(k.as_ref());
        let beta = [0, 1].map(|i| {
            let magnitude = high_product(&k, &self.g[i]);
            if self.beta_negative[i] {
                negate(magnitude)
            } else {
                magnitude
            }
        });
        let [n11, n12, n21, n22] = &self.basis;
        // k₁ = k − β₁·n₁₁ − β₂·n₂₁,  k₂ = −β₁·n₁₂ − β₂·n₂₂.
        let k1 = sub(sub(k, mul_low(&beta[0], n11)), mul_low(&beta[1], n21));
        let k2 = negate(add(mul_low(&beta[0], n12), mul_low(&beta[1], n22)));
        Some([small(k1)?, small(k2)?])
    }
}

/// The first four limbs of `limbs` (the scalar field's integers have four).
fn limbs4(limbs: &[u64]) -> Word4 {
    let mut word = [0_u64; 4];
    for (w, l) in word.iter_mut().zip(limbs) {
        *w = *l;
    }
    word
}

// Limb arithmetic keeps the low 64 bits of each 128-bit product on purpose.
#[allow(clippy::cast_possible_truncation)]
/// `⌊a·g / 2^384⌋` for a 256-bit `a` and 320-bit `g` (here below 2^129: the low limbs of the
/// 576-bit result suffice).
fn high_product(a: &Word4, g: &[u64; 5]) -> Word4 {
    let mut product = [0_u64; 9];
    for (i, &x) in a.iter().enumerate() {
        let mut carry = 0_u128;
        for (j, &y) in g.iter().enumerate() {
            let t = u128::from(x) * u128::from(y) + u128::from(product[i + j]) + carry;
            product[i + j] = t as u64;
            carry = t >> 64;
        }
        product[i + g.len()] = carry as u64;
    }
    [product[6], product[7], product[8], 0]
}

/// `a·b mod 2^256`.
#[allow(clippy::cast_possible_truncation)]
fn mul_low(a: &Word4, b: &Word4) -> Word4 {
    let mut out = [0_u64; 4];
    for i in 0..4 {
        let mut carry = 0_u128;
        for j in 0..4 - i {
            let t = u128::from(a[i]) * u128::from(b[j]) + u128::from(out[i + j]) + carry;
            out[i + j] = t as u64;
            carry = t >> 64;
        }
    }
    out
}

/// `a + b mod 2^256`.
fn add(a: Word4, b: Word4) -> Word4 {
    let mut out = [0_u64; 4];
    let mut carry = false;
    for i in 0..4 {
        let (s, c1) = a[i].overflowing_add(b[i]);
        let (s, c2) = s.overflowing_add(u64::from(carry));
        out[i] = s;
        carry = c1 || c2;
    }
    out
}

/// `a − b mod 2^256`.
fn sub(a: Word4, b: Word4) -> Word4 {
    add(a, negate(b))
}

/// `−a mod 2^256`.
fn negate(a: Word4) -> Word4 {
    add(a.map(|l| !l), [1, 0, 0, 0])
}

/// The signed value of `a` as (negative, magnitude), if the magnitude is below 2^128.
fn small(a: Word4) -> Option<Half> {
    let magnitude =
        |w: Word4| (w[2] == 0 && w[3] == 0).then(|| u128::from(w[0]) | u128::from(w[1]) << 64);
    if a[3] >> 63 == 0 {
        magnitude(a).map(|m| (false, m))
    } else {
        magnitude(negate(a)).map(|m| (true, m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_bn254::{Fr, G1Projective, G2Projective};
    use ark_ec::short_weierstrass::Projective;
    use ark_ec::{CurveGroup, PrimeGroup};
    use ark_ff::{Field, UniformRand, Zero};

    fn signed(half: Half) -> Fr {
        let value = Fr::from(half.1);
        if half.0 {
            -value
        } else {
            value
        }
    }

    fn check<P: GLVConfig<ScalarField = Fr>>(generator: Projective<P>) {
        let splitter = Splitter::new::<P>();
        // φ is multiplication by λ, on the generator and on a random multiple of it.
        let mut rng = ark_std::test_rng();
        for point in [generator, generator * Fr::rand(&mut rng)] {
            let affine = point.into_affine();
            assert_eq!(
                Projective::from(P::endomorphism_affine(&affine)),
                point * P::LAMBDA
            );
        }
        let minus_one = -Fr::from(1u8);
        let mut scalars = vec![Fr::zero(), Fr::from(1u8), minus_one, Fr::from(u128::MAX)];
        scalars.extend((0..5_000).map(|_| Fr::rand(&mut rng)));
        // Near multiples of r/2^j, where the rounding changes.
        for j in 1..=254_u32 {
            let half = Fr::from(2u8)
                .pow([u64::from(j)])
                .inverse()
                .unwrap_or_default();
            scalars.extend([half, half + Fr::from(1u8), half - Fr::from(1u8), -half]);
        }
        for k in scalars {
            let [k1, k2] = splitter
                .split(&k.into_bigint())
                .expect("halves below 2^128");
            assert_eq!(signed(k1) + P::LAMBDA * signed(k2), k, "{k}");
        }
    }

    #[test]
    fn halves_recompose_the_scalar_on_g1_and_g2() {
        check::<ark_bn254::g1::Config>(G1Projective::generator());
        check::<ark_bn254::g2::Config>(G2Projective::generator());
    }

    #[test]
    fn the_wrapping_arithmetic_is_twos_complement() {
        let minus_two = negate([2, 0, 0, 0]);
        assert_eq!(minus_two, [u64::MAX - 1, u64::MAX, u64::MAX, u64::MAX]);
        assert_eq!(small(minus_two), Some((true, 2)));
        assert_eq!(small(add(minus_two, [5, 0, 0, 0])), Some((false, 3)));
        assert_eq!(mul_low(&minus_two, &negate([3, 0, 0, 0])), [6, 0, 0, 0]);
        assert_eq!(small([0, 0, 1, 0]), None);
        assert_eq!(small(negate([0, 0, 1, 0])), None);
        assert_eq!(small(negate([0, 1 << 63, 0, 0])).map(|h| h.0), Some(true));
    }
}
