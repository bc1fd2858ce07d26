//! The stable driver: a bounded loop of random inputs and mutations of each target's seeds,
//! each run under `catch_unwind`, so CI exercises every target without nightly or libFuzzer.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rand::{rngs::StdRng, Rng, SeedableRng};

use crate::Target;

/// What a bounded run did.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    /// Inputs executed.
    pub execs: u64,
    /// Inputs that panicked.
    pub crashes: u64,
    /// The first panicking input, to replay (`cargo fuzz run <target> <file>` or [`Target::run`]).
    pub first_crash: Option<Vec<u8>>,
}

/// One mutation of `input`: bit flips, byte writes, truncation, insertion, or a splice.
fn mutate(input: &mut Vec<u8>, rng: &mut StdRng, other: &[u8]) {
    for _ in 0..rng.gen_range(1..=4) {
        match rng.gen_range(0..6) {
            0 if !input.is_empty() => {
                let i = rng.gen_range(0..input.len());
                input[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !input.is_empty() => {
                let i = rng.gen_range(0..input.len());
                input[i] = [0, 1, 0x7f, 0x80, 0xff, rng.gen()][rng.gen_range(0..6)];
            }
            2 if !input.is_empty() => {
                let n = rng.gen_range(0..input.len());
                input.truncate(n);
            }
            3 => {
                let at = rng.gen_range(0..=input.len());
                let bytes: Vec<u8> = (0..rng.gen_range(1..16)).map(|_| rng.gen()).collect();
                input.splice(at..at, bytes);
            }
            4 if !other.is_empty() => {
                let at = rng.gen_range(0..=input.len());
                let from = rng.gen_range(0..other.len());
                let to = rng.gen_range(from..=other.len());
                input.splice(at.., other[from..to].iter().copied());
            }
            _ => input.push(rng.gen()),
        }
    }
}

/// Runs `target` on `execs` inputs from `seed`: a quarter fresh random bytes, the rest mutated
/// seeds (or seeds as they are).
#[must_use]
pub fn run(target: &Target, execs: u64, seed: u64) -> RunStats {
    let mut rng = StdRng::seed_from_u64(seed);
    let seeds = (target.seeds)();
    let mut stats = RunStats::default();
    for n in 0..execs {
        let input = if seeds.is_empty() || rng.gen_ratio(1, 4) {
            let len = rng.gen_range(0..512);
            (0..len).map(|_| rng.gen()).collect()
        } else {
            let mut input = seeds[rng.gen_range(0..seeds.len())].clone();
            if n >= seeds.len() as u64 {
                let other = &seeds[rng.gen_range(0..seeds.len())];
                mutate(&mut input, &mut rng, other);
            }
            input
        };
        stats.execs += 1;
        if catch_unwind(AssertUnwindSafe(|| (target.run)(&input))).is_err() {
            stats.crashes += 1;
            stats.first_crash.get_or_insert(input);
        }
    }
    stats
}
