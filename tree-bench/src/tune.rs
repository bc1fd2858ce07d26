//! `tune`: sweeps the runtime `min_parallel_nodes` for every tree kind and hasher, measures
//! thread scaling against the ideal, and compares collect-then-insert with DashMap for the
//! sparse tree's levels. Prints markdown tables; writes CSV and one SVG chart per sweep.
//!
//! `cargo run --release -p tree-bench --bin tune -- --quick` (under a minute on 2 cores);
//! without `--quick` the full sweep (more operations, depth 32 too, more repetitions). It is a
//! tree-bench binary only: the `canopy` command does not link the benchmark crate.

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::plot::{line_chart, Series};
use crate::{fmt_duration, Stats};
use clap::{Parser, ValueEnum};
use hasher::{Digest, DigestCodec, Fr, Hasher, Keccak256Hasher, PoseidonHasher};
use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};
use tree_core::rehash::hash_level;
use tree_core::{
    Depth, FullMerkleTree, History, MerkleTree, MerkleTreeExt, OptimalMerkleTree, RehashConfig,
};
use tree_sled::{SledConfig, SledMerkleTree};

/// The tree kinds `tune` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kind {
    Optimal,
    Full,
    Sled,
}

/// The hashers `tune` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum HasherKind {
    Poseidon,
    Keccak,
}

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "Sweep min_parallel_nodes, thread scaling and the DashMap comparison")]
struct Args {
    /// Short sweep (under a minute on 2 cores): fewer operations and repetitions, depth 20.
    #[arg(long)]
    quick: bool,
    /// Where to write tune.csv, scaling.csv and the SVG charts.
    #[arg(long, default_value = "target/tune")]
    out: PathBuf,
    /// Timed repetitions per point (after one warm-up run).
    #[arg(long)]
    reps: Option<usize>,
    /// Tree kinds to sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [Kind::Optimal, Kind::Full, Kind::Sled].to_vec(), value_enum)]
    trees: Vec<Kind>,
    /// Hashers to sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [HasherKind::Poseidon, HasherKind::Keccak].to_vec(), value_enum)]
    hashers: Vec<HasherKind>,
    /// Largest thread count of the scaling table (default: available cores).
    #[arg(long)]
    max_threads: Option<usize>,
}

/// Leaves for a hasher.
trait BenchHasher: DigestCodec {
    const NAME: &'static str;
    fn leaf(i: u64) -> Digest<Self>;
}

impl BenchHasher for PoseidonHasher {
    const NAME: &'static str = "Poseidon";
    fn leaf(i: u64) -> Fr {
        Fr::from(i * 7 + 1)
    }
}

impl BenchHasher for Keccak256Hasher {
    const NAME: &'static str = "Keccak";
    fn leaf(i: u64) -> [u8; 32] {
        let mut leaf = [0xabu8; 32];
        leaf[..8].copy_from_slice(&(i + 1).to_le_bytes());
        leaf
    }
}

/// The operations of the sweep (issue 7): on a tree prefilled with `BASE` leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Set,
    Delete,
    SetRange10,
    SetRange16,
    Override,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Delete => "delete",
            Self::SetRange10 => "set_range 2^10",
            Self::SetRange16 => "set_range 2^16",
            Self::Override => "override_range 2^12+2^8",
        }
    }

    fn run<T: MerkleTree>(self, tree: &mut T, leaf: impl Fn(u64) -> Digest<T::Hasher>)
    where
        T::Error: std::fmt::Debug,
    {
        let result = match self {
            Self::Set => tree.set(BASE / 2, leaf(1 << 40)),
            Self::Delete => tree.delete(BASE / 3),
            Self::SetRange10 => tree.set_range(BASE, (0..1 << 10).map(|i| leaf(BASE + i))),
            Self::SetRange16 => tree.set_range(BASE, (0..1 << 16).map(|i| leaf(BASE + i))),
            Self::Override => tree.override_range(
                BASE,
                (0..1 << 12).map(|i| leaf(BASE + i)),
                (0..1 << 8).map(|i| i * (BASE / 256)),
            ),
        };
        if let Err(e) = result {
            panic!("benchmark operation {} failed: {e:?}", self.name());
        }
    }
}

const BASE: u64 = 1 << 12;
const THRESHOLDS: [usize; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// A tree that can be put back to the prefilled state between runs (untimed).
trait Bench {
    type Tree: MerkleTree;
    fn tree(&mut self) -> &mut Self::Tree;
    fn reset(&mut self);
    /// Sets the threshold on every copy the bench keeps (a reset must not undo it).
    fn set_min_parallel_nodes(&mut self, threshold: usize);
}

/// In-memory trees: each run starts from a clone of the prefilled tree.
struct Cloned<T> {
    base: T,
    work: T,
}

impl<T: MerkleTree + Clone> Bench for Cloned<T> {
    type Tree = T;
    fn tree(&mut self) -> &mut T {
        &mut self.work
    }
    fn reset(&mut self) {
        self.work = self.base.clone();
    }
    fn set_min_parallel_nodes(&mut self, threshold: usize) {
        self.base.set_min_parallel_nodes(threshold);
        self.work.set_min_parallel_nodes(threshold);
    }
}

/// The persistent tree: each run is undone by a rewind to checkpoint 0 (so its time includes
/// recording the undo frame, as for a node that checkpoints every block).
struct Rewound<T> {
    work: T,
}

impl<T: History> Bench for Rewound<T>
where
    T::Error: std::fmt::Debug,
{
    type Tree = T;
    fn tree(&mut self) -> &mut T {
        &mut self.work
    }
    fn reset(&mut self) {
        if let Err(e) = self.work.rewind_to(0) {
            panic!("reset failed: {e:?}");
        }
    }
    fn set_min_parallel_nodes(&mut self, threshold: usize) {
        self.work.set_min_parallel_nodes(threshold);
    }
}

/// Warm-up, then `reps` timed runs of `op`, each from the prefilled state.
fn measure<B: Bench>(bench: &mut B, op: Op, reps: usize) -> Stats
where
    <B::Tree as MerkleTree>::Hasher: BenchHasher,
    <B::Tree as MerkleTree>::Error: std::fmt::Debug,
{
    let leaf = <<B::Tree as MerkleTree>::Hasher as BenchHasher>::leaf;
    op.run(bench.tree(), leaf);
    bench.reset();
    let mut samples = Vec::with_capacity(reps);
    let threshold = bench.tree().rehash_config().min_parallel_nodes;
    for _ in 0..reps.max(1) {
        let started = Instant::now();
        op.run(bench.tree(), leaf);
        samples.push(started.elapsed());
        bench.reset();
        // The reset tree must still run at the threshold being measured.
        assert_eq!(bench.tree().rehash_config().min_parallel_nodes, threshold);
    }
    Stats::from_samples(samples)
}

/// One measured point of the sweep.
struct Point {
    kind: &'static str,
    hasher: &'static str,
    depth: u8,
    op: Op,
    threshold: usize,
    stats: Stats,
}

/// Sweeps every threshold for one tree.
fn sweep<B: Bench>(
    bench: &mut B,
    kind: &'static str,
    depth: u8,
    ops: &[Op],
    reps: usize,
    progress: &mut Progress,
) -> Vec<Point>
where
    <B::Tree as MerkleTree>::Hasher: BenchHasher,
    <B::Tree as MerkleTree>::Error: std::fmt::Debug,
{
    let hasher = <<B::Tree as MerkleTree>::Hasher as BenchHasher>::NAME;
    let mut points = Vec::new();
    for &threshold in &THRESHOLDS {
        bench.set_min_parallel_nodes(threshold);
        for &op in ops {
            assert_eq!(bench.tree().rehash_config().min_parallel_nodes, threshold);
            progress.step(&format!(
                "{kind} {hasher} depth {depth}: {} @ {threshold}",
                op.name()
            ));
            points.push(Point {
                kind,
                hasher,
                depth,
                op,
                threshold,
                stats: measure(bench, op, reps),
            });
        }
    }
    points
}

/// Progress on stderr: `[done/total] what`.
struct Progress {
    done: usize,
    total: usize,
    started: Instant,
}

impl Progress {
    fn step(&mut self, what: &str) {
        self.done += 1;
        eprint!(
            "\r\x1b[K[{}/{}, {:.0} s] {what}",
            self.done,
            self.total,
            self.started.elapsed().as_secs_f64()
        );
    }
}

fn prefilled<T: MerkleTree>(mut tree: T) -> T
where
    T::Hasher: BenchHasher,
    T::Error: std::fmt::Debug,
{
    let leaf = <T::Hasher as BenchHasher>::leaf;
    if let Err(e) = tree.set_range(0, (0..BASE).map(leaf)) {
        panic!("prefill failed: {e:?}");
    }
    tree
}

fn sweep_hasher<H: BenchHasher>(
    kinds: &[Kind],
    depths: &[u8],
    ops: &[Op],
    reps: usize,
    progress: &mut Progress,
) -> Result<Vec<Point>, Box<dyn std::error::Error>> {
    let mut points = Vec::new();
    for &kind in kinds {
        for &d in depths {
            // The dense tree stores every node: depth 32 is out of its range by design.
            if kind == Kind::Full && d > 20 {
                continue;
            }
            let depth = Depth::new(d)?;
            match kind {
                Kind::Optimal => {
                    let base = prefilled(OptimalMerkleTree::<H>::new(depth));
                    let mut bench = Cloned {
                        work: base.clone(),
                        base,
                    };
                    points.extend(sweep(&mut bench, "Optimal", d, ops, reps, progress));
                }
                Kind::Full => {
                    let base = prefilled(FullMerkleTree::<H>::new(depth)?);
                    let mut bench = Cloned {
                        work: base.clone(),
                        base,
                    };
                    points.extend(sweep(&mut bench, "Full", d, ops, reps, progress));
                }
                Kind::Sled => {
                    let dir = tempfile::tempdir()?;
                    let mut tree = prefilled(SledMerkleTree::<H>::open(
                        &SledConfig::new(dir.path()),
                        depth,
                    )?);
                    tree.checkpoint(0)?;
                    let mut bench = Rewound { work: tree };
                    points.extend(sweep(&mut bench, "Sled", d, ops, reps, progress));
                }
            }
        }
    }
    Ok(points)
}

/// The threshold with the lowest median per operation, and overall: the lowest geometric mean
/// of (median / that operation's best median).
fn best_thresholds(points: &[&Point], ops: &[Op]) -> (Vec<(Op, usize)>, usize) {
    let mut per_op = Vec::new();
    let mut best_of = FxHashMap::default();
    for &op in ops {
        let best = points
            .iter()
            .filter(|p| p.op == op)
            .min_by_key(|p| p.stats.median);
        if let Some(best) = best {
            per_op.push((op, best.threshold));
            best_of.insert(op.name(), best.stats.median.as_secs_f64());
        }
    }
    let overall = THRESHOLDS
        .iter()
        .copied()
        .min_by(|&a, &b| {
            let score = |t: usize| -> f64 {
                let logs: Vec<f64> = points
                    .iter()
                    .filter(|p| p.threshold == t)
                    .filter_map(|p| {
                        best_of
                            .get(p.op.name())
                            .map(|best| (p.stats.median.as_secs_f64() / best).ln())
                    })
                    .collect();
                logs.iter().sum::<f64>() / logs.len().max(1) as f64
            };
            score(a).total_cmp(&score(b))
        })
        .unwrap_or(8);
    (per_op, overall)
}

fn short(d: Duration) -> String {
    fmt_duration(d)
}

/// Prints the sweep tables and returns the overall best threshold of each (kind, hasher, depth).
fn report_sweep(points: &[Point], ops: &[Op], args: &Args) -> std::io::Result<Vec<String>> {
    let mut groups: Vec<(&str, &str, u8)> = Vec::new();
    for p in points {
        if !groups.contains(&(p.kind, p.hasher, p.depth)) {
            groups.push((p.kind, p.hasher, p.depth));
        }
    }
    let mut summary = Vec::new();
    for (kind, hasher, depth) in groups {
        let group: Vec<&Point> = points
            .iter()
            .filter(|p| (p.kind, p.hasher, p.depth) == (kind, hasher, depth))
            .collect();
        let (per_op, overall) = best_thresholds(&group, ops);
        println!("\n### {kind}MerkleTree, {hasher}, depth {depth} (median, min–max in tune.csv)\n");
        let mut header = String::from("| Operation / min_parallel_nodes |");
        let mut rule = String::from("|---|");
        for t in THRESHOLDS {
            let _ = write!(header, " {t} |");
            rule.push_str("---|");
        }
        println!("{header} best |\n{rule}---|");
        for (op, best) in &per_op {
            let mut row = format!("| {kind}::{} |", op.name());
            for t in THRESHOLDS {
                let cell = group
                    .iter()
                    .find(|p| p.op == *op && p.threshold == t)
                    .map_or_else(|| "–".to_owned(), |p| short(p.stats.median));
                let _ = write!(row, " {cell} |");
            }
            println!("{row} {best} |");
        }
        println!("\nOverall best threshold: **{overall}**");
        summary.push(format!("{kind}/{hasher}/depth {depth}: {overall}"));
        let series: Vec<Series> = per_op
            .iter()
            .map(|(op, _)| Series {
                label: op.name().to_owned(),
                points: group
                    .iter()
                    .filter(|p| p.op == *op)
                    .map(|p| (p.threshold as f64, p.stats.median.as_secs_f64()))
                    .collect(),
            })
            .collect();
        let svg = line_chart(
            &format!("{kind}MerkleTree, {hasher}, depth {depth}"),
            "min_parallel_nodes",
            "median latency",
            &series,
        );
        let name = format!(
            "tune-{}-{}-{depth}.svg",
            kind.to_lowercase(),
            hasher.to_lowercase()
        );
        std::fs::write(args.out.join(name), svg)?;
    }
    let mut csv =
        String::from("tree,hasher,depth,operation,min_parallel_nodes,median_ns,min_ns,max_ns\n");
    for p in points {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{},{}",
            p.kind,
            p.hasher,
            p.depth,
            p.op.name(),
            p.threshold,
            p.stats.median.as_nanos(),
            p.stats.min.as_nanos(),
            p.stats.max.as_nanos()
        );
    }
    std::fs::write(args.out.join("tune.csv"), csv)?;
    Ok(summary)
}

static HASHES: AtomicU64 = AtomicU64::new(0);

/// `H`, counting its hashes: how many an operation needs, for the scaling table's ideal.
struct Counted<H>(PhantomData<H>);

impl<H: Hasher> Hasher for Counted<H> {
    type Digest = H::Digest;
    const ID: &'static str = H::ID;
    fn hash_pair(left: &H::Digest, right: &H::Digest) -> H::Digest {
        HASHES.fetch_add(1, Ordering::Relaxed);
        H::hash_pair(left, right)
    }
    fn empty_leaf() -> H::Digest {
        H::empty_leaf()
    }
}

impl<H: BenchHasher> DigestCodec for Counted<H> {
    const LEN: usize = H::LEN;
    fn encode(digest: &H::Digest, out: &mut [u8]) {
        H::encode(digest, out);
    }
    fn decode(bytes: &[u8]) -> Result<H::Digest, hasher::DecodeError> {
        H::decode(bytes)
    }
}

impl<H: BenchHasher> BenchHasher for Counted<H> {
    const NAME: &'static str = H::NAME;
    fn leaf(i: u64) -> H::Digest {
        H::leaf(i)
    }
}

/// Median time of one hash within a level of 256 pairs (`hash_level`: eight at a time on IFMA
/// lanes where the CPU has them), over varied inputs, on one thread.
fn hash_time<H: BenchHasher>() -> Duration {
    let inputs: Vec<Digest<H>> = (0..512).map(H::leaf).collect();
    let mut out = vec![Digest::<H>::default(); 256];
    let mut samples = Vec::new();
    for _ in 0..7 {
        let started = Instant::now();
        H::hash_level(std::hint::black_box(&inputs), &mut out);
        std::hint::black_box(&out);
        samples.push(started.elapsed() / 256);
    }
    Stats::from_samples(samples).median
}

/// Thread scaling of the in-memory trees with Poseidon at depth 20.
fn scaling(args: &Args, ops: &[Op], reps: usize) -> Result<(), Box<dyn std::error::Error>> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let max = args.max_threads.unwrap_or(cores).max(1);
    let depth = Depth::new(20)?;
    let one_hash = hash_time::<PoseidonHasher>();
    println!(
        "\n### Thread scaling: OptimalMerkleTree, Poseidon, depth 20 ({cores} cores; one hash in \
         a level batch {}; ideal = hashes × that / threads)\n",
        short(one_hash)
    );
    println!(
        "| operation | hashes | threads | median | speedup | efficiency | ideal | ideal / median |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut csv = String::from("operation,hashes,threads,median_ns,speedup,efficiency,ideal_ns\n");
    for &op in ops.iter().filter(|op| !matches!(op, Op::Set | Op::Delete)) {
        let mut counted = prefilled(OptimalMerkleTree::<Counted<PoseidonHasher>>::new(depth));
        HASHES.store(0, Ordering::Relaxed);
        op.run(&mut counted, <Counted<PoseidonHasher> as BenchHasher>::leaf);
        let hashes = HASHES.load(Ordering::Relaxed);
        let mut single = None;
        for threads in 1..=max {
            let pool = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()?,
            );
            let config = RehashConfig {
                thread_pool: Some(pool),
                ..RehashConfig::default()
            };
            let base = prefilled(OptimalMerkleTree::<PoseidonHasher>::with_config(
                depth, config,
            ));
            let mut bench = Cloned {
                work: base.clone(),
                base,
            };
            let median = measure(&mut bench, op, reps).median;
            let t1 = *single.get_or_insert(median);
            let speedup = t1.as_secs_f64() / median.as_secs_f64();
            let ideal = one_hash.mul_f64(hashes as f64 / threads as f64);
            println!(
                "| {} | {hashes} | {threads} | {} | {speedup:.2}x | {:.0}% | {} | {:.0}% |",
                op.name(),
                short(median),
                100.0 * speedup / threads as f64,
                short(ideal),
                100.0 * ideal.as_secs_f64() / median.as_secs_f64()
            );
            let _ = writeln!(
                csv,
                "{},{hashes},{threads},{},{speedup:.3},{:.3},{}",
                op.name(),
                median.as_nanos(),
                speedup / threads as f64,
                ideal.as_nanos()
            );
        }
    }
    std::fs::write(args.out.join("scaling.csv"), csv)?;
    Ok(())
}

/// The sparse tree's level update two ways: hash in parallel into a buffer and then insert into
/// the level's `FxHashMap` (what `OptimalMerkleTree` does), or insert from the parallel workers
/// into a `DashMap`.
fn dashmap_comparison<H: BenchHasher>(sizes: &[usize], reps: usize) {
    println!(
        "\n### {}: level update of n scattered parents, collect-then-insert (FxHashMap) vs DashMap concurrent insert\n",
        H::NAME
    );
    println!("| n | collect + insert | DashMap | DashMap / collect |\n|---|---|---|---|");
    let config = RehashConfig::with_min_parallel_nodes(1);
    for &n in sizes {
        let children: Vec<Digest<H>> = (0..2 * n as u64).map(H::leaf).collect();
        // Scattered keys, beyond any dense prefix.
        let keys: Vec<u64> = (0..n as u64)
            .map(|i| (i * 0x9e37_79b9) | (1 << 40))
            .collect();
        let collect = || {
            let mut map: FxHashMap<u64, Digest<H>> = FxHashMap::default();
            let started = Instant::now();
            let mut parents = vec![Digest::<H>::default(); n];
            hash_level::<H>(&children, &mut parents, &config);
            map.reserve(n);
            for (k, v) in keys.iter().zip(parents) {
                map.insert(*k, v);
            }
            let elapsed = started.elapsed();
            std::hint::black_box(map);
            elapsed
        };
        let dash = || {
            let map: dashmap::DashMap<u64, Digest<H>, FxBuildHasher> =
                dashmap::DashMap::with_capacity_and_hasher(0, FxBuildHasher);
            let started = Instant::now();
            keys.par_iter().enumerate().for_each(|(i, k)| {
                map.insert(*k, H::hash_pair(&children[2 * i], &children[2 * i + 1]));
            });
            let elapsed = started.elapsed();
            std::hint::black_box(map);
            elapsed
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..reps.max(3) {
            a.push(collect());
            b.push(dash());
        }
        let (a, b) = (Stats::from_samples(a).median, Stats::from_samples(b).median);
        println!(
            "| {n} | {} | {} | {:.2}x |",
            short(a),
            short(b),
            b.as_secs_f64() / a.as_secs_f64()
        );
    }
}

/// Runs the sweep with command-line `args` (the first is the program name).
///
/// # Errors
/// Bad arguments, output files that cannot be written, tree errors.
pub fn run_cli(args: impl IntoIterator<Item = String>) -> Result<(), Box<dyn std::error::Error>> {
    // A usage error or `--help` prints and exits, as a command line should.
    let args = Args::try_parse_from(args).unwrap_or_else(|e| e.exit());
    std::fs::create_dir_all(&args.out)?;
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 7 });
    let (ops, depths): (Vec<Op>, Vec<u8>) = if args.quick {
        (
            vec![Op::Set, Op::Delete, Op::SetRange10, Op::Override],
            vec![20],
        )
    } else {
        (
            vec![
                Op::Set,
                Op::Delete,
                Op::SetRange10,
                Op::SetRange16,
                Op::Override,
            ],
            vec![20, 32],
        )
    };
    let trees_per_depth = |d: u8| {
        args.trees
            .iter()
            .filter(|k| !(**k == Kind::Full && d > 20))
            .count()
    };
    let total = depths.iter().map(|&d| trees_per_depth(d)).sum::<usize>()
        * args.hashers.len()
        * THRESHOLDS.len()
        * ops.len();
    let mut progress = Progress {
        done: 0,
        total,
        started: Instant::now(),
    };
    println!(
        "min_parallel_nodes sweep: {} repetitions per point after a warm-up, tree prefilled \
         with {BASE} leaves, {} rayon threads",
        reps,
        rayon::current_num_threads()
    );
    let mut points = Vec::new();
    for hasher in &args.hashers {
        points.extend(match hasher {
            HasherKind::Poseidon => {
                sweep_hasher::<PoseidonHasher>(&args.trees, &depths, &ops, reps, &mut progress)?
            }
            HasherKind::Keccak => {
                sweep_hasher::<Keccak256Hasher>(&args.trees, &depths, &ops, reps, &mut progress)?
            }
        });
    }
    eprintln!();
    let summary = report_sweep(&points, &ops, &args)?;
    println!("\nBest overall thresholds: {}", summary.join("; "));
    scaling(&args, &ops, reps)?;
    let sizes: &[usize] = if args.quick {
        &[1 << 10, 1 << 14]
    } else {
        &[1 << 10, 1 << 14, 1 << 17]
    };
    dashmap_comparison::<Keccak256Hasher>(sizes, reps);
    dashmap_comparison::<PoseidonHasher>(&sizes[..sizes.len() - 1], reps);
    println!(
        "\nRaw results: {}/tune.csv, {}/scaling.csv; charts: {}/tune-*.svg",
        args.out.display(),
        args.out.display(),
        args.out.display()
    );
    Ok(())
}
