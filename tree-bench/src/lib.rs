//! Shared pieces of Canopy's benchmarks: the zerokit hasher adapter, timing and memory probes.

pub mod flood;
pub mod loopback;
pub mod plot;
pub mod tune;

use std::time::{Duration, Instant};

use hasher::{poseidon, Fr};

/// zerokit's trees hashed with the same Poseidon as ours, so a ratio measures the trees alone.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct ZkPoseidon;

impl zerokit_utils::hasher::ZerokitHasher for ZkPoseidon {
    type Scalar = Fr;
    fn hash(input: &[Fr]) -> Fr {
        poseidon(input).unwrap_or_default()
    }
}

/// zerokit_utils' own Poseidon (`Poseidon::hash`, as `rln::hashers::PoseidonHash` uses it) as a
/// Canopy tree hasher, so a tree operation can be timed with each Poseidon implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZerokitPoseidonHasher;

impl hasher::Hasher for ZerokitPoseidonHasher {
    type Digest = Fr;
    const ID: &'static str = "poseidon-bn254-circom";

    fn hash_pair(left: &Fr, right: &Fr) -> Fr {
        static POSEIDON: std::sync::OnceLock<zerokit_utils::poseidon::Poseidon<Fr>> =
            std::sync::OnceLock::new();
        POSEIDON
            .get_or_init(|| zerokit_utils::poseidon::Poseidon::from(&[(3, 8, 57, 0)]))
            .hash(&[*left, *right])
            .unwrap_or_default()
    }
}

/// Median, min and max of `reps` timed runs of `op` on a fresh `setup()` value each (setup is
/// not timed), so every run starts from the same state.
pub fn time_op<T>(reps: usize, mut setup: impl FnMut() -> T, mut op: impl FnMut(&mut T)) -> Stats {
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let mut state = setup();
        let started = Instant::now();
        op(&mut state);
        samples.push(started.elapsed());
        drop(state);
    }
    Stats::from_samples(samples)
}

/// Times two implementations of the same operation with their runs interleaved (A, B, A, B…),
/// so drift on a shared machine hits both alike. Returns (A, B).
pub fn time_pair<A, B>(
    reps: usize,
    mut setup_a: impl FnMut() -> A,
    mut op_a: impl FnMut(&mut A),
    mut setup_b: impl FnMut() -> B,
    mut op_b: impl FnMut(&mut B),
) -> (Stats, Stats) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        a.push(time_op(1, &mut setup_a, &mut op_a).median);
        b.push(time_op(1, &mut setup_b, &mut op_b).median);
    }
    (Stats::from_samples(a), Stats::from_samples(b))
}

/// Times several implementations of one operation, runs interleaved round-robin (A, B, C, A,
/// B, C…) as [`time_pair`] does for two. Returns one [`Stats`] per operation, in order.
pub fn time_round_robin(reps: usize, ops: &mut [&mut dyn FnMut()]) -> Vec<Stats> {
    let mut samples = vec![Vec::new(); ops.len()];
    for _ in 0..reps.max(1) {
        for (op, samples) in ops.iter_mut().zip(&mut samples) {
            let started = std::time::Instant::now();
            op();
            samples.push(started.elapsed());
        }
    }
    samples.into_iter().map(Stats::from_samples).collect()
}

impl Stats {
    /// Median, min and max of `samples` (at least one).
    #[must_use]
    pub fn from_samples(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        Self {
            median: samples[samples.len() / 2],
            min: samples[0],
            max: samples[samples.len() - 1],
        }
    }
}

/// Timing summary of one benchmark point.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Median run.
    pub median: Duration,
    /// Fastest run.
    pub min: Duration,
    /// Slowest run.
    pub max: Duration,
}

/// A table cell: the median, then (min–max).
#[must_use]
pub fn fmt_stats(s: Stats) -> String {
    format!(
        "{} ({}–{})",
        fmt_duration(s.median),
        fmt_duration(s.min),
        fmt_duration(s.max)
    )
}

/// Formats a duration with a unit that keeps 3 significant digits.
#[must_use]
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.as_secs_f64() * 1e9;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`), `None` off Linux.
#[must_use]
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Deterministic distinct leaves.
#[must_use]
pub fn leaves(start: u64, n: u64) -> Vec<Fr> {
    (start..start + n).map(|i| Fr::from(i * 7 + 1)).collect()
}

impl pmtree::Hasher for ZkPoseidon {
    type Scalar = Fr;

    fn serialize(value: Fr) -> pmtree::PmtreeResult<pmtree::Value> {
        Ok(hasher::fr_to_le_bytes(&value).to_vec())
    }

    fn deserialize(bytes: &[u8]) -> pmtree::PmtreeResult<Fr> {
        hasher::fr_from_le_bytes(bytes).map_err(|e| pmtree::PmtreeError::Hasher(e.to_string()))
    }

    fn hash_pair(left: Fr, right: Fr) -> Fr {
        poseidon(&[left, right]).unwrap_or_default()
    }
}

/// Total size of the files under `path` (what a database takes on disk).
#[must_use]
pub fn dir_bytes(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
