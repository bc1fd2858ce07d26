//! Membership of a twist point in G2 (the prime-order subgroup) with one 63-bit scalar
//! multiplication: `[x+1]Q + ψ([x]Q) + ψ²([x]Q) = ψ³([2x]Q)`, where `x` is BN254's seed and
//! `ψ` the untwist-Frobenius-twist endomorphism (Dai, Lin, Zhao and Zhou, ePrint 2022/348;
//! it holds for BN254 since `x ≢ 4 mod 13` and `x ≢ 92 mod 97`). ark-bn254 checks
//! `ψ(Q) = [6x²]Q`, a 127-bit multiplication: about twice the work, and G2 validation is the
//! largest cost of decoding a proof. Tests hold this check equal to ark's on subgroup points,
//! random twist points and points with a component of each cofactor order.

use std::sync::OnceLock;

use ark_bn254::{Fq12Config, Fq2, Fq6Config, G2Affine, G2Projective};
use ark_ec::{AdditiveGroup, AffineRepr, PrimeGroup};
use ark_ff::fields::{Fp12Config, Fp6Config};
use ark_ff::Field;

/// BN254's seed `x` (positive for this curve).
const SEED: u64 = 4_965_661_367_192_848_881;

/// `ψ`'s coefficients `(ξ^((p-1)/3), ξ^((p-1)/2))` for `ξ = 9 + u`: arkworks' own Frobenius
/// coefficients of the tower (`ξ^((p-1)/3)` for Fq6, `ξ^((p-1)/6)` for Fq12, cubed), computed
/// once.
fn psi_coefficients() -> &'static (Fq2, Fq2) {
    static COEFFS: OnceLock<(Fq2, Fq2)> = OnceLock::new();
    COEFFS.get_or_init(|| {
        let third = Fq6Config::FROBENIUS_COEFF_FP6_C1[1];
        let half = Fq12Config::FROBENIUS_COEFF_FP12_C1[1].pow([3u64]);
        (third, half)
    })
}

/// `ψ(X, Y, Z) = (conj(X)·c0, conj(Y)·c1, conj(Z))` on Jacobian coordinates (conjugation is a
/// field automorphism, so it commutes with the division by `Z²` and `Z³`).
fn psi(p: &G2Projective) -> G2Projective {
    let (c0, c1) = psi_coefficients();
    let mut out = *p;
    out.x.frobenius_map_in_place(1);
    out.y.frobenius_map_in_place(1);
    out.z.frobenius_map_in_place(1);
    out.x *= c0;
    out.y *= c1;
    out
}

/// Whether a point already known to be on the twist lies in G2.
#[must_use]
pub(crate) fn in_g2(q: &G2Affine) -> bool {
    if q.is_zero() {
        return true;
    }
    let q = q.into_group();
    let xq = q.mul_bigint([SEED]);
    let lhs = xq + q + psi(&xq) + psi(&psi(&xq));
    let rhs = psi(&psi(&psi(&xq.double())));
    lhs == rhs
}

/// A proof's G2 point from untrusted bytes is accepted only when it is on the twist and in G2.
#[must_use]
pub(crate) fn valid_g2(q: &G2Affine) -> bool {
    q.is_on_curve() && in_g2(q)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ark_bn254::Fq;
    use ark_ec::short_weierstrass::SWCurveConfig;
    use ark_ec::CurveGroup;
    use ark_ff::{BigInteger, PrimeField, UniformRand};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// `ψ` is an endomorphism of the twist that acts on G2 as multiplication by `p`.
    #[test]
    fn psi_maps_the_twist_to_itself_and_acts_as_p_on_g2() {
        let mut rng = StdRng::seed_from_u64(1);
        let g = G2Projective::generator() * ark_bn254::Fr::rand(&mut rng);
        let p_mod_r = ark_bn254::Fr::from_le_bytes_mod_order(&Fq::MODULUS.to_bytes_le());
        assert_eq!(psi(&g), g * p_mod_r);
        for _ in 0..20 {
            if let Some(q) = G2Affine::get_point_from_x_unchecked(Fq2::rand(&mut rng), true) {
                assert!(psi(&q.into_group()).into_affine().is_on_curve());
            }
        }
    }

    /// The same verdict as ark-bn254's check on subgroup points, random twist points (almost
    /// all outside G2), and G2 points plus a component of order 10069 (the cofactor's small
    /// prime) or of the large cofactor part.
    #[test]
    fn agrees_with_arkworks_on_every_kind_of_point() {
        let mut rng = StdRng::seed_from_u64(2);
        let ark = |q: &G2Affine| {
            <ark_bn254::g2::Config as SWCurveConfig>::is_in_correct_subgroup_assuming_on_curve(q)
        };
        // h2 = 2p − r, the twist's cofactor; 10069 divides it.
        let mut h2 = Fq::MODULUS;
        h2.mul2();
        h2.sub_with_borrow(&ark_bn254::Fr::MODULUS);
        let mut h2_over = h2;
        let mut rem: u128 = 0;
        for limb in h2_over.0.iter_mut().rev() {
            let cur = (rem << 64) | u128::from(*limb);
            *limb = u64::try_from(cur / 10069).unwrap();
            rem = cur % 10069;
        }
        assert_eq!(rem, 0, "10069 divides the cofactor");
        let random_twist_point = |rng: &mut StdRng| loop {
            if let Some(p) = G2Affine::get_point_from_x_unchecked(Fq2::rand(rng), rng.gen()) {
                return p;
            }
        };
        let (mut inside, mut outside) = (0, 0);
        for i in 0..200 {
            let r = random_twist_point(&mut rng);
            let g = (G2Projective::generator() * ark_bn254::Fr::rand(&mut rng)).into_affine();
            // [r]R: only the cofactor component; [r·h2/10069]R: only the order-10069 one.
            let cofactor_part = r.mul_bigint(ark_bn254::Fr::MODULUS);
            let small = cofactor_part.into_affine().mul_bigint(h2_over);
            let candidates = [
                g,
                r,
                cofactor_part.into_affine(),
                small.into_affine(),
                (g.into_group() + small).into_affine(),
                (g.into_group() + cofactor_part).into_affine(),
                G2Affine::zero(),
            ];
            for (k, q) in candidates.iter().enumerate() {
                assert!(q.is_on_curve());
                assert_eq!(in_g2(q), ark(q), "point {i}.{k}");
                if ark(q) {
                    inside += 1;
                } else {
                    outside += 1;
                }
            }
        }
        assert!(
            inside >= 400 && outside >= 600,
            "{inside} inside, {outside} outside"
        );
    }
}
