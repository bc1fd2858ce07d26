//! The multi-scalar multiplications of a Groth16 proof on rln 3.0.0's shipped depth-20 proving
//! key: arkworks' `VariableBaseMSM` (what rln's prover runs) against our `FixedBaseMsm` (tables
//! built once per key), per query, on 1 and 2 threads, for full-width scalars (what H's and
//! most of a Poseidon circuit's witness are) and a witness-like mix (a fifth each zero, one,
//! small, small negative, full-width). Also the tables' start-up time and memory.
//!
//! `cargo run --release -p tree-bench --bin msm_fixed [-- --quick] [--window C]`

use std::time::Instant;

use ark_bn254::Fr;
use ark_ec::scalar_mul::glv::GLVConfig;
use ark_ec::short_weierstrass::{Affine, Projective};
use ark_ec::VariableBaseMSM;
use ark_ff::UniformRand;
use prover::lanes::{self, AffineLanes, Arithmetic};
use prover::testing::witness_like;
use prover::{FixedBaseMsm, MsmConfig};
use rand::{rngs::StdRng, SeedableRng};
use tree_bench::{fmt_duration, Stats};

/// One table row per thread count and scalar shape; arkworks and our tables (portable ark-ff
/// and, where the CPU has them, IFMA lanes) interleaved run by run.
fn query<P: GLVConfig<ScalarField = Fr>>(
    name: &str,
    bases: &[Affine<P>],
    options: &Options,
    rng: &mut StdRng,
) -> Result<(), Box<dyn std::error::Error>>
where
    Projective<P>: VariableBaseMSM<MulBase = Affine<P>, ScalarField = Fr>,
    P::BaseField: AffineLanes,
{
    let mut arithmetics = vec![Arithmetic::Portable];
    if lanes::ifma_available() {
        arithmetics.push(Arithmetic::Ifma);
    }
    let mut tables = Vec::new();
    for &arithmetic in &arithmetics {
        let window_bits = options
            .window
            .unwrap_or(MsmConfig::for_bases_with(bases.len(), arithmetic).window_bits);
        let config = MsmConfig {
            window_bits,
            arithmetic,
            shift_every: 1,
        };
        let start = Instant::now();
        let table = FixedBaseMsm::new(bases, config)?;
        tables.push((config, start.elapsed(), table));
    }
    let full: Vec<Fr> = (0..bases.len()).map(|_| Fr::rand(rng)).collect();
    let mixed = witness_like(bases.len(), rng);
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        for (shape, scalars) in [("full-width", &full), ("witness-like", &mixed)] {
            let mut ark = Vec::new();
            let mut ours = vec![Vec::new(); tables.len()];
            for _ in 0..options.runs {
                let t = Instant::now();
                let expected = pool.install(|| Projective::<P>::msm(bases, scalars)).ok();
                ark.push(t.elapsed());
                for ((_, _, table), samples) in tables.iter().zip(&mut ours) {
                    let t = Instant::now();
                    let got = pool.install(|| table.msm(scalars))?;
                    samples.push(t.elapsed());
                    if expected != Some(got) {
                        return Err(format!("{name}: results differ").into());
                    }
                }
            }
            let ark = Stats::from_samples(ark).median;
            let mut row = format!(
                "| {name} | {} | {threads} | {shape} | {} |",
                bases.len(),
                fmt_duration(ark)
            );
            for ((config, build, table), samples) in tables.iter().zip(ours) {
                let median = Stats::from_samples(samples).median;
                row += &format!(
                    " {:?}: {} ({:.2}x; c = {}, built in {}, {:.1} MiB) |",
                    config.arithmetic,
                    fmt_duration(median),
                    ark.as_secs_f64() / median.as_secs_f64(),
                    config.window_bits,
                    fmt_duration(*build),
                    table.table_bytes() as f64 / (1024.0 * 1024.0),
                );
            }
            println!("{row}");
        }
    }
    Ok(())
}

/// Command-line options.
struct Options {
    runs: usize,
    /// A window width for every table, instead of `MsmConfig::for_bases`'s.
    window: Option<u32>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let runs = if args.iter().any(|a| a == "--quick") {
        3
    } else {
        15
    };
    let window = match args.iter().position(|a| a == "--window") {
        Some(i) => Some(
            args.get(i + 1)
                .ok_or("--window needs a width")?
                .parse::<u32>()?,
        ),
        None => None,
    };
    let options = Options { runs, window };
    let (pk, _) = &**rln::circuit::default_zkey_single();
    let mut rng = StdRng::seed_from_u64(20);
    println!("MSMs of rln 3.0.0's depth-20 proving key: arkworks VariableBaseMSM vs our FixedBaseMsm (median of {runs}; table built once, on 2 threads)\n");
    println!("| query | bases | threads | scalars | arkworks | ours, ark-ff (arkworks / ours; table) | ours, IFMA lanes (arkworks / ours; table) |");
    println!("|---|---|---|---|---|---|---|");
    query::<ark_bn254::g1::Config>("A (G1)", &pk.a_query, &options, &mut rng)?;
    query::<ark_bn254::g1::Config>("B (G1)", &pk.b_g1_query, &options, &mut rng)?;
    query::<ark_bn254::g2::Config>("B (G2)", &pk.b_g2_query, &options, &mut rng)?;
    query::<ark_bn254::g1::Config>("H (G1)", &pk.h_query, &options, &mut rng)?;
    query::<ark_bn254::g1::Config>("L (G1)", &pk.l_query, &options, &mut rng)?;
    Ok(())
}
