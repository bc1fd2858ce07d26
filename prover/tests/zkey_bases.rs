//! The fixed-base MSM against arkworks' `VariableBaseMSM` on every base set of rln 3.0.0's
//! shipped depth-20 proving key, for the scalar shapes a circom witness has.

use ark_bn254::Fr;
use ark_ec::short_weierstrass::{Affine, Projective, SWCurveConfig};
use ark_ec::VariableBaseMSM;
use ark_ff::{UniformRand, Zero};
use prover::{FixedBaseMsm, MsmConfig};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// Zeros, ones, small values, full-width values and negatives, mixed.
fn witness_like(n: usize, rng: &mut StdRng) -> Vec<Fr> {
    (0..n)
        .map(|_| match rng.gen_range(0..5) {
            0 => Fr::zero(),
            1 => Fr::from(1u8),
            2 => Fr::from(rng.gen_range(2..1u64 << 20)),
            3 => -Fr::from(rng.gen_range(1..1u64 << 8)),
            _ => Fr::rand(rng),
        })
        .collect()
}

fn check<P: SWCurveConfig<ScalarField = Fr>>(
    name: &str,
    bases: &[Affine<P>],
    rng: &mut StdRng,
) -> Result<(), prover::ProverError>
where
    Projective<P>: VariableBaseMSM<MulBase = Affine<P>, ScalarField = Fr>,
{
    let msm = FixedBaseMsm::new(bases, MsmConfig::for_bases(bases.len()))?;
    let full: Vec<Fr> = (0..bases.len()).map(|_| Fr::rand(rng)).collect();
    for scalars in [full, witness_like(bases.len(), rng)] {
        let expected = Projective::<P>::msm(bases, &scalars).ok();
        assert_eq!(Some(msm.msm(&scalars)?), expected, "{name}");
    }
    Ok(())
}

#[test]
fn every_query_of_the_rln_zkey() -> Result<(), prover::ProverError> {
    let (pk, _) = &**rln::circuit::default_zkey_single();
    let mut rng = StdRng::seed_from_u64(20);
    check::<ark_bn254::g1::Config>("a_query", &pk.a_query, &mut rng)?;
    check::<ark_bn254::g1::Config>("b_g1_query", &pk.b_g1_query, &mut rng)?;
    check::<ark_bn254::g1::Config>("h_query", &pk.h_query, &mut rng)?;
    check::<ark_bn254::g1::Config>("l_query", &pk.l_query, &mut rng)?;
    check::<ark_bn254::g2::Config>("b_g2_query", &pk.b_g2_query, &mut rng)?;
    Ok(())
}
