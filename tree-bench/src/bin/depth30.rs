//! Depth 30 at 2^24 leaves (World ID's scale), one run, the same hash (circomlib Poseidon) for
//! everyone: ours in memory (the sparse tree: memory for the leaves present, not the capacity),
//! on redb and on sled (nothing held in RAM but the top levels and the stores' caches), against
//! semaphore-rs's cascading tree (`semaphore-rs-trees`, on its in-memory `Vec` storage; its mmap
//! storage is constructed through `unsafe fn`s, which this workspace allows only in
//! `field-lanes`). Each tree runs in a child process of its own, so its peak RSS (VmHWM) is its
//! own.
//!
//! Builds stream: leaves are made and appended `2^chunk_log2` at a time, never all at once.
//! Proofs: on a reopened persistent tree, the first proof alone (it loads the cached bands of
//! levels, one range scan each), then `--proofs` random indices, each timed. Reopen: the
//! persistent trees dropped and opened again (header and root read), median of 5.
//!
//! `cargo run --release -p tree-bench --bin depth30 [-- --log2 24 --depth 30 --only redb]`

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use hasher::{fr_from_le_bytes, fr_to_le_bytes, Fr, Hasher, PoseidonHasher};
use rand::{Rng, SeedableRng};
use tree_bench::{fmt_duration, leaves, proc_status_bytes, Stats};
use tree_core::persistent::Durability;
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_engines::{DbConfig, DbTree, Engine};

/// The trees this bench builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// Ours, the sparse in-memory tree.
    Memory,
    /// Ours on redb.
    Redb,
    /// Ours on sled.
    Sled,
    /// semaphore-rs's cascading tree (Vec storage).
    Cascading,
}

/// What to measure.
#[derive(Parser, Debug)]
struct Args {
    /// Leaves: 2^log2.
    #[arg(long, default_value_t = 24)]
    log2: u32,
    /// Tree depth.
    #[arg(long, default_value_t = 30)]
    depth: u8,
    /// Leaves appended per batch: 2^chunk_log2.
    #[arg(long, default_value_t = 16)]
    chunk_log2: u32,
    /// The persistent trees' cache: bands of levels using at most this many chunks stay in
    /// memory (`cached_band_chunks`, about 1 KiB a chunk). 2^16 holds everything above level 4
    /// of 2^24 leaves (64 MiB): a proof then reads one store entry.
    #[arg(long, default_value_t = 1 << 16)]
    band_chunks: u32,
    /// Proofs timed (random indices).
    #[arg(long, default_value_t = 10_000)]
    proofs: usize,
    /// Only this tree (default: all four).
    #[arg(long, value_enum)]
    only: Option<Kind>,
    /// Internal: run one tree in this process and print its result line.
    #[arg(long, value_enum, hide = true)]
    child: Option<Kind>,
}

/// semaphore-rs's hasher interface over our scalar Poseidon (the fastest one we have, so the
/// comparison is of the trees, not the hashes).
struct SemaphorePoseidon;

impl semaphore_rs_hasher::Hasher for SemaphorePoseidon {
    type Hash = [u8; 32];

    fn hash_node(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
        let left = fr_from_le_bytes(left).unwrap_or_default();
        let right = fr_from_le_bytes(right).unwrap_or_default();
        fr_to_le_bytes(&PoseidonHasher::hash_pair(&left, &right))
    }
}

type Cascading = semaphore_rs_trees::cascading::CascadingMerkleTree<SemaphorePoseidon>;

/// One tree's figures.
struct Outcome {
    build: Duration,
    peak: u64,
    proofs: Stats,
    p99: Duration,
    reopen: Option<Duration>,
    /// The first proof after the reopen, which loads the cached bands.
    first: Option<Duration>,
    root: [u8; 32],
}

fn percentile(mut samples: Vec<Duration>, p: f64) -> (Stats, Duration) {
    samples.sort();
    let at = ((samples.len() as f64 - 1.0) * p).round() as usize;
    let p99 = samples[at.min(samples.len() - 1)];
    (Stats::from_samples(samples), p99)
}

fn time_proofs(args: &Args, mut proof: impl FnMut(u64)) -> (Stats, Duration) {
    let n = 1u64 << args.log2;
    let mut rng = rand::rngs::StdRng::seed_from_u64(30);
    let samples = (0..args.proofs)
        .map(|_| {
            let index = rng.gen_range(0..n);
            let started = Instant::now();
            proof(index);
            started.elapsed()
        })
        .collect();
    percentile(samples, 0.99)
}

fn chunks(args: &Args) -> impl Iterator<Item = (u64, Vec<Fr>)> {
    let n = 1u64 << args.log2;
    let chunk = 1u64 << args.chunk_log2.min(args.log2);
    (0..n)
        .step_by(chunk as usize)
        .map(move |start| (start, leaves(start, chunk.min(n - start))))
}

/// Appends every chunk of leaves to `tree`; returns the time it took.
fn build<T: MerkleTree<Hasher = PoseidonHasher>>(
    args: &Args,
    tree: &mut T,
) -> Result<Duration, T::Error> {
    let started = Instant::now();
    for (start, chunk) in chunks(args) {
        tree.set_range(start, chunk)?;
    }
    Ok(started.elapsed())
}

/// Proof p50/p99 of our `tree` at random indices.
fn prove<T: MerkleTree<Hasher = PoseidonHasher>>(args: &Args, tree: &T) -> (Stats, Duration) {
    time_proofs(args, |i| {
        std::hint::black_box(tree.proof(i).ok());
    })
}

/// Ours on a persistent store: build and `finish` (close) timed together, proofs on a reopened
/// tree, then the median of 5 reopens.
fn persistent<T: MerkleTree<Hasher = PoseidonHasher>>(
    args: &Args,
    mut tree: T,
    finish: impl FnOnce(T) -> Result<(), Box<dyn std::error::Error>>,
    reopen: impl Fn() -> Result<T, Box<dyn std::error::Error>>,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let started = Instant::now();
    build(args, &mut tree)?;
    let root = fr_to_le_bytes(&tree.root());
    finish(tree)?;
    let build = started.elapsed();
    let tree = reopen()?;
    let started = Instant::now();
    std::hint::black_box(tree.proof((1 << args.log2) / 2).ok());
    let first = started.elapsed();
    let (proofs, p99) = prove(args, &tree);
    drop(tree);
    // Open to a tree with its root read (`root()` is loaded by the open); the drop (a flush,
    // and sled's own shutdown) is not part of it.
    let reopen_stats = (0..5)
        .map(|_| {
            let started = Instant::now();
            let tree = reopen();
            let elapsed = started.elapsed();
            std::hint::black_box(tree.map(|t| t.root()).ok());
            elapsed
        })
        .collect();
    Ok(Outcome {
        build,
        peak: proc_status_bytes("VmHWM").unwrap_or(0),
        proofs,
        p99,
        reopen: Some(Stats::from_samples(reopen_stats).median),
        first: Some(first),
        root,
    })
}

fn child(args: &Args, kind: Kind) -> Result<Outcome, Box<dyn std::error::Error>> {
    let depth = Depth::new(args.depth)?;
    match kind {
        Kind::Memory => {
            // In memory there is nothing to reopen: the proofs run on the tree itself.
            let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(depth);
            let build = build(args, &mut tree)?;
            let (proofs, p99) = prove(args, &tree);
            Ok(Outcome {
                build,
                peak: proc_status_bytes("VmHWM").unwrap_or(0),
                proofs,
                p99,
                reopen: None,
                first: None,
                root: fr_to_le_bytes(&tree.root()),
            })
        }
        Kind::Redb | Kind::Sled => {
            let dir = tempfile::tempdir()?;
            let engine = if kind == Kind::Redb {
                Engine::Redb
            } else {
                Engine::Sled
            };
            let config = DbConfig::new(dir.path())
                .engine(engine)
                .durability(Durability::Periodic { every_ms: 500 })
                .cached_band_chunks(args.band_chunks);
            let open = || -> Result<DbTree<PoseidonHasher>, Box<dyn std::error::Error>> {
                Ok(DbTree::open(&config, depth)?)
            };
            let outcome = persistent(args, open()?, |mut t| Ok(t.close()?), open)?;
            if kind == Kind::Sled {
                sled_alone(dir.path())?;
            }
            Ok(outcome)
        }
        Kind::Cascading => {
            let empty = [0u8; 32];
            let started = Instant::now();
            let mut tree = Cascading::new(Vec::new(), usize::from(args.depth), &empty);
            for (_, chunk) in chunks(args) {
                let bytes: Vec<[u8; 32]> = chunk.iter().map(fr_to_le_bytes).collect();
                tree.extend_from_slice(&bytes);
            }
            let build = started.elapsed();
            let (proofs, p99) = time_proofs(args, |i| {
                std::hint::black_box(tree.proof(i as usize));
            });
            Ok(Outcome {
                build,
                peak: proc_status_bytes("VmHWM").unwrap_or(0),
                proofs,
                p99,
                reopen: None,
                first: None,
                root: tree.root(),
            })
        }
    }
}

/// What sled 0.34 alone costs on the database just built (none of our code): the median of 5
/// opens and random `get`s of its keys, printed as an `ENGINE` line. It bounds what our reopen
/// and proofs (one `get` per level below the cached top) can reach on sled.
fn sled_alone(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut opens = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let db = sled::Config::new().path(path).open()?;
        opens.push(started.elapsed());
        drop(db);
    }
    let db = sled::Config::new()
        .path(path)
        .cache_capacity(256 << 20)
        .open()?;
    let keys: Vec<sled::IVec> = db.iter().keys().filter_map(Result::ok).collect();
    if keys.is_empty() {
        return Ok(());
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let samples: Vec<Duration> = (0..40_000)
        .map(|_| {
            let key = &keys[rng.gen_range(0..keys.len())];
            let started = Instant::now();
            std::hint::black_box(db.get(key).ok());
            started.elapsed()
        })
        .collect();
    let (gets, p99) = percentile(samples, 0.99);
    println!(
        "ENGINE {} {} {} {}",
        Stats::from_samples(opens).median.as_nanos(),
        gets.median.as_nanos(),
        p99.as_nanos(),
        keys.len()
    );
    Ok(())
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().rev().map(|b| format!("{b:02x}")).collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(kind) = args.child {
        return match child(&args, kind) {
            Ok(o) => {
                println!(
                    "RESULT {} {} {} {} {} {} {}",
                    o.build.as_nanos(),
                    o.peak,
                    o.proofs.median.as_nanos(),
                    o.p99.as_nanos(),
                    o.reopen
                        .map_or(-1, |r| i128::try_from(r.as_nanos()).unwrap_or(-1)),
                    hex(&o.root),
                    o.first
                        .map_or(-1, |r| i128::try_from(r.as_nanos()).unwrap_or(-1)),
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{kind:?}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Ok(exe) = std::env::current_exe() else {
        return ExitCode::FAILURE;
    };
    println!(
        "depth {}, 2^{} leaves appended 2^{} at a time, circomlib Poseidon ({}), {} threads",
        args.depth,
        args.log2,
        args.chunk_log2,
        if hasher::ifma_available() {
            "IFMA lanes for our levels"
        } else {
            "ark-ff"
        },
        rayon::current_num_threads()
    );
    println!(
        "persistent trees: cached_band_chunks = {} (the bands of levels using at most that many chunks stay in memory)",
        args.band_chunks
    );
    println!();
    println!(
        "| tree | build | peak RSS | proof p50 | proof p99 | reopen | first proof after reopen | root |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let kinds = [Kind::Memory, Kind::Redb, Kind::Sled, Kind::Cascading];
    let mut roots = Vec::new();
    let mut engine_line: Option<String> = None;
    for kind in kinds
        .into_iter()
        .filter(|k| args.only.is_none_or(|o| o == *k))
    {
        let name = format!("{kind:?}").to_lowercase();
        let output = Command::new(&exe)
            .args([
                "--log2",
                &args.log2.to_string(),
                "--depth",
                &args.depth.to_string(),
            ])
            .args([
                "--chunk-log2",
                &args.chunk_log2.to_string(),
                "--proofs",
                &args.proofs.to_string(),
                "--band-chunks",
                &args.band_chunks.to_string(),
            ])
            .args(["--child", &name])
            .output();
        let stdout = output
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .unwrap_or_default();
        if let Some(engine) = stdout.lines().find(|l| l.starts_with("ENGINE ")) {
            engine_line = Some(engine.to_owned());
        }
        let line = stdout
            .lines()
            .find(|l| l.starts_with("RESULT "))
            .map(str::to_owned);
        let Some(line) = line else {
            println!("| {name} | failed | | | | | | |");
            continue;
        };
        let f: Vec<&str> = line.split_whitespace().skip(1).collect();
        let ns =
            |i: usize| Duration::from_nanos(f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0));
        let peak: u64 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        let reopen = match f.get(4) {
            Some(&"-1") | None => "—".to_owned(),
            Some(_) => fmt_duration(ns(4)),
        };
        let first = match f.get(6) {
            Some(&"-1") | None => "—".to_owned(),
            Some(_) => fmt_duration(ns(6)),
        };
        let root = f.get(5).copied().unwrap_or("");
        roots.push(root.to_owned());
        println!(
            "| {name} | {} | {:.0} MiB | {} | {} | {reopen} | {first} | {}… |",
            fmt_duration(ns(0)),
            peak as f64 / (1 << 20) as f64,
            fmt_duration(ns(2)),
            fmt_duration(ns(3)),
            &root[..root.len().min(12)]
        );
    }
    if let Some(line) = engine_line {
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        if let [open, p50, p99, keys] = f[..] {
            println!(
                "\nsled 0.34 alone on the sled database ({keys} keys): open {}, random get p50 {} p99 {}",
                fmt_duration(Duration::from_nanos(open)),
                fmt_duration(Duration::from_nanos(p50)),
                fmt_duration(Duration::from_nanos(p99))
            );
        }
    }
    roots.dedup();
    if roots.len() > 1 {
        eprintln!("the trees' roots differ");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
