//! Fixed-base MSMs (`prover::FixedBaseMsm`) on hostile bases, scalars and windows: the portable
//! path and, where the CPU has them, the IFMA lanes (the workspace's one `unsafe` module).
//!
//! Bases come from a small pool with the cases the affine formula must leave alone: the
//! identity, a point and its negation, repeated points (a bucket doubling), multiples that
//! cancel; scalars are zero, one, small, negative or full-width, as the bytes say.
//!
//! Invariants: both arithmetics equal arkworks' `VariableBaseMSM` for G1 and G2; nothing panics.

use std::sync::OnceLock;

use ark_bn254::{Fr, G1Affine, G1Projective, G2Affine, G2Projective};
use ark_ec::scalar_mul::glv::GLVConfig;
use ark_ec::short_weierstrass::{Affine, Projective};
use ark_ec::{CurveGroup, PrimeGroup, VariableBaseMSM};
use ark_ff::{PrimeField, Zero};
use prover::lanes::{ifma_available, AffineLanes, Arithmetic};
use prover::{FixedBaseMsm, MsmConfig};

/// The pools bases are drawn from: multiples 1..=6 of the generator, their negations and the
/// identity, so that picks repeat and cancel often.
fn pools() -> &'static (Vec<G1Affine>, Vec<G2Affine>) {
    static POOLS: OnceLock<(Vec<G1Affine>, Vec<G2Affine>)> = OnceLock::new();
    POOLS.get_or_init(|| {
        let g1 = |k: i64| (G1Projective::generator() * Fr::from(k)).into_affine();
        let g2 = |k: i64| (G2Projective::generator() * Fr::from(k)).into_affine();
        let ks: Vec<i64> = (1..=6).flat_map(|k| [k, -k]).chain([0]).collect();
        (
            ks.iter().map(|&k| g1(k)).collect(),
            ks.iter().map(|&k| g2(k)).collect(),
        )
    })
}

/// A scalar from up to 33 bytes: the first picks its shape.
fn scalar(bytes: &[u8]) -> Fr {
    let Some((&shape, rest)) = bytes.split_first() else {
        return Fr::zero();
    };
    let small = Fr::from(u64::from(rest.first().copied().unwrap_or(0)));
    match shape % 5 {
        0 => Fr::zero(),
        1 => Fr::from(1u8),
        2 => small,
        3 => -small,
        _ => Fr::from_le_bytes_mod_order(rest),
    }
}

/// Checks one MSM on both arithmetics against arkworks.
fn check<P: GLVConfig<ScalarField = Fr>>(
    bases: &[Affine<P>],
    scalars: &[Fr],
    window_bits: u32,
    shift_every: u32,
) where
    Projective<P>: VariableBaseMSM<MulBase = Affine<P>, ScalarField = Fr>,
    P::BaseField: AffineLanes,
{
    let expected = Projective::<P>::msm(bases, scalars).ok();
    let mut arithmetics = vec![Arithmetic::Portable];
    if ifma_available() {
        arithmetics.push(Arithmetic::Ifma);
    }
    for arithmetic in arithmetics {
        let config = MsmConfig {
            window_bits,
            arithmetic,
            shift_every,
        };
        let got = FixedBaseMsm::new(bases, config).and_then(|table| table.msm(scalars));
        assert_eq!(
            got.ok(),
            expected,
            "{arithmetic:?}, c = {window_bits}, k = {shift_every}"
        );
    }
}

/// Runs one input: a header byte (G2 if odd; the window, 2..=9 bits, from bits 1–3; a shift
/// kept every 1..=16 windows, from bits 4–7), then per term a pool index byte and 33 scalar
/// bytes.
pub fn run(data: &[u8]) {
    let Some((&header, rest)) = data.split_first() else {
        return;
    };
    let window_bits = 2 + u32::from(header >> 1) % 8;
    let shift_every = 1 + u32::from(header >> 4);
    let (g1_pool, g2_pool) = pools();
    let terms: Vec<(usize, Fr)> = rest
        .chunks(34)
        .take(24)
        .map(|term| (usize::from(term[0]), scalar(&term[1..])))
        .collect();
    let scalars: Vec<Fr> = terms.iter().map(|(_, s)| *s).collect();
    if header & 1 == 0 {
        let bases: Vec<G1Affine> = terms
            .iter()
            .map(|(i, _)| g1_pool[i % g1_pool.len()])
            .collect();
        check(&bases, &scalars, window_bits, shift_every);
    } else {
        let bases: Vec<G2Affine> = terms
            .iter()
            .map(|(i, _)| g2_pool[i % g2_pool.len()])
            .collect();
        check(&bases, &scalars, window_bits, shift_every);
    }
}

/// Valid inputs: G1 and G2, with repeated, opposite and identity bases under full-width and
/// small scalars.
pub fn seeds() -> Vec<Vec<u8>> {
    let term = |index: u8, shape: u8, fill: u8| {
        let mut t = vec![index, shape];
        t.extend(std::iter::repeat_n(fill, 32));
        t
    };
    let mut seeds = Vec::new();
    for header in [0_u8, 1, 6, 13] {
        let mut seed = vec![header];
        for (fill, (index, shape)) in
            (0x5a_u8..).zip([(0, 4), (0, 4), (1, 4), (12, 1), (2, 2), (3, 3), (0, 1)])
        {
            seed.extend(term(index, shape, fill));
        }
        seeds.push(seed);
    }
    seeds
}
