//! The fixed-base MSM against arkworks' `VariableBaseMSM` on every base set of rln 3.0.0's
//! shipped depth-20 proving key: full-width random scalars, a witness-like mix, and a real RLN
//! assignment (and its H) from our witness calculator; with ark-ff's arithmetic and, where the
//! CPU has them, on IFMA lanes.

#![allow(clippy::expect_used)]

use ark_bn254::Fr;
use ark_ec::scalar_mul::glv::GLVConfig;
use ark_ec::short_weierstrass::{Affine, Projective};
use ark_ec::VariableBaseMSM;
use ark_ff::UniformRand;
use prover::lanes::{ifma_available, AffineLanes, Arithmetic};
use prover::testing::witness_like;
use prover::{FixedBaseMsm, MsmConfig};
use rand::{rngs::StdRng, SeedableRng};

mod common;

fn check<P: GLVConfig<ScalarField = Fr>>(
    name: &str,
    bases: &[Affine<P>],
    real: &[Fr],
    rng: &mut StdRng,
) -> Result<(), prover::ProverError>
where
    Projective<P>: VariableBaseMSM<MulBase = Affine<P>, ScalarField = Fr>,
    P::BaseField: AffineLanes,
{
    // Every shift kept, a shift every other window, and the bases alone.
    let mut tables = vec![
        FixedBaseMsm::new(
            bases,
            MsmConfig::for_bases_with(bases.len(), Arithmetic::Portable),
        )?,
        FixedBaseMsm::new(
            bases,
            MsmConfig {
                shift_every: 2,
                ..MsmConfig::for_bases_with(bases.len(), Arithmetic::Portable)
            },
        )?,
        FixedBaseMsm::new(
            bases,
            MsmConfig::bases_only(bases.len(), Arithmetic::Portable),
        )?,
    ];
    if ifma_available() {
        let lanes = MsmConfig::for_bases_with(bases.len(), Arithmetic::Ifma);
        tables.push(FixedBaseMsm::new(bases, lanes)?);
    } else {
        eprintln!("no AVX-512 IFMA on this CPU: {name} checked on ark-ff only");
    }
    let full: Vec<Fr> = (0..bases.len()).map(|_| Fr::rand(rng)).collect();
    for scalars in [full, witness_like(bases.len(), rng), real.to_vec()] {
        let expected = Projective::<P>::msm(bases, &scalars).ok();
        for msm in &tables {
            let arithmetic = msm.arithmetic();
            assert_eq!(Some(msm.msm(&scalars)?), expected, "{name}, {arithmetic:?}");
        }
    }
    Ok(())
}

#[test]
fn every_query_of_the_rln_zkey() -> Result<(), prover::ProverError> {
    let (pk, matrices) = &**rln::circuit::default_zkey_single();
    let (z, h) = real_assignment()?;
    let private = &z[matrices.num_instance_variables..];
    let mut rng = StdRng::seed_from_u64(20);
    check::<ark_bn254::g1::Config>("a_query", &pk.a_query, &z, &mut rng)?;
    check::<ark_bn254::g1::Config>("b_g1_query", &pk.b_g1_query, &z, &mut rng)?;
    check::<ark_bn254::g1::Config>("h_query", &pk.h_query, &h, &mut rng)?;
    check::<ark_bn254::g1::Config>("l_query", &pk.l_query, private, &mut rng)?;
    check::<ark_bn254::g2::Config>("b_g2_query", &pk.b_g2_query, &z, &mut rng)?;
    Ok(())
}

/// A member's real assignment and its quotient, from our witness calculator.
fn real_assignment() -> Result<(Vec<Fr>, Vec<Fr>), prover::ProverError> {
    use rln_glue::primitives::external_nullifier;

    let circuit = prover::rln::RlnCircuit::load()?;
    let witness = common::lone_member_witness(
        1000,
        31337,
        10,
        4,
        Fr::from(12345u64),
        external_nullifier(Fr::from(9u64), Fr::from(77u64)),
    );
    let z = circuit.graph.witness(&witness.circuit_inputs())?;
    let h = circuit.prover.quotient(&z)?;
    Ok((z, h))
}
