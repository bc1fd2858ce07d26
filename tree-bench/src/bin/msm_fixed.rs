//! The multi-scalar multiplications of a Groth16 proof on rln 3.0.0's shipped depth-20 proving
//! key: arkworks' `VariableBaseMSM` (what rln's prover runs) against our `FixedBaseMsm` (tables
//! built once per key), per query, on 1 and 2 threads, for full-width scalars (what H's and
//! most of a Poseidon circuit's witness are) and a witness-like mix (a fifth each zero, one,
//! small, small negative, full-width). Also the tables' start-up time and memory.
//!
//! `cargo run --release -p tree-bench --bin msm_fixed [-- --quick]`

use std::time::Instant;

use ark_bn254::Fr;
use ark_ec::short_weierstrass::{Affine, Projective, SWCurveConfig};
use ark_ec::VariableBaseMSM;
use ark_ff::UniformRand;
use prover::testing::witness_like;
use prover::{FixedBaseMsm, MsmConfig};
use rand::{rngs::StdRng, SeedableRng};
use tree_bench::{fmt_duration, Stats};

/// One table row per thread count and scalar shape; A, B interleaved run by run.
fn query<P: SWCurveConfig<ScalarField = Fr>>(
    name: &str,
    bases: &[Affine<P>],
    runs: usize,
    rng: &mut StdRng,
) -> Result<(), Box<dyn std::error::Error>>
where
    Projective<P>: VariableBaseMSM<MulBase = Affine<P>, ScalarField = Fr>,
{
    let config = MsmConfig::for_bases(bases.len());
    let start = Instant::now();
    let table = FixedBaseMsm::new(bases, config)?;
    let build = start.elapsed();
    let full: Vec<Fr> = (0..bases.len()).map(|_| Fr::rand(rng)).collect();
    let mixed = witness_like(bases.len(), rng);
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        for (shape, scalars) in [("full-width", &full), ("witness-like", &mixed)] {
            let (mut ark, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let t = Instant::now();
                let a = pool.install(|| Projective::<P>::msm(bases, scalars));
                ark.push(t.elapsed());
                let t = Instant::now();
                let b = pool.install(|| table.msm(scalars))?;
                ours.push(t.elapsed());
                if a.ok() != Some(b) {
                    return Err(format!("{name}: results differ").into());
                }
            }
            let (ark, ours) = (
                Stats::from_samples(ark).median,
                Stats::from_samples(ours).median,
            );
            println!(
                "| {name} | {} | {threads} | {shape} | {} | {} | {:.2}x | c = {}, {} ({:.1} MiB) |",
                bases.len(),
                fmt_duration(ark),
                fmt_duration(ours),
                ark.as_secs_f64() / ours.as_secs_f64(),
                config.window_bits,
                fmt_duration(build),
                table.table_bytes() as f64 / (1024.0 * 1024.0),
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 15 };
    let (pk, _) = &**rln::circuit::default_zkey_single();
    let mut rng = StdRng::seed_from_u64(20);
    println!("MSMs of rln 3.0.0's depth-20 proving key: arkworks VariableBaseMSM vs our FixedBaseMsm (median of {runs}; table built once, on 2 threads)\n");
    println!("| query | bases | threads | scalars | arkworks | ours | arkworks / ours | table: window, build, size |");
    println!("|---|---|---|---|---|---|---|---|");
    query::<ark_bn254::g1::Config>("A (G1)", &pk.a_query, runs, &mut rng)?;
    query::<ark_bn254::g1::Config>("B (G1)", &pk.b_g1_query, runs, &mut rng)?;
    query::<ark_bn254::g2::Config>("B (G2)", &pk.b_g2_query, runs, &mut rng)?;
    query::<ark_bn254::g1::Config>("H (G1)", &pk.h_query, runs, &mut rng)?;
    query::<ark_bn254::g1::Config>("L (G1)", &pk.l_query, runs, &mut rng)?;
    Ok(())
}
