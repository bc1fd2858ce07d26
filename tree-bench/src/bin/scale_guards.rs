//! Scale guards (a check binary, not a timed unit test): opening a persistent tree with 2^18
//! leaves must cost less than 2x opening one with 2^16 (open reads the header, not the leaves),
//! and an empty depth-32 tree must stay under a few MiB of resident memory. Prints a table and
//! exits non-zero when a guard fails.
//!
//! `cargo run --release -p tree-bench --bin scale_guards`

use std::process::ExitCode;
use std::time::{Duration, Instant};

use hasher::PoseidonHasher;
use tree_bench::{fmt_duration, leaves, Stats};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_sled::{SledConfig, SledMerkleTree};

const DEPTH: u8 = 20;
const OPENS: usize = 21;
/// "A few MiB".
const EMPTY_TREE_LIMIT: u64 = 4 << 20;

/// Resident set size of this process, from /proc (Linux); 0 elsewhere.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Median times to open (and read the root of) a tree of `n` leaves built once in `dir`, and
/// to open the same database with sled alone.
fn open_time(
    dir: &std::path::Path,
    n: u64,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let depth = Depth::new(DEPTH)?;
    let config = SledConfig::new(dir);
    {
        let mut tree = SledMerkleTree::<PoseidonHasher>::open(&config, depth)?;
        for start in (0..n).step_by(1 << 14) {
            tree.set_range(start, leaves(start, (1 << 14).min(n - start)))?;
        }
        tree.flush()?;
    }
    let (mut tree_opens, mut sled_opens) = (Vec::new(), Vec::new());
    for _ in 0..OPENS {
        let started = Instant::now();
        let tree = SledMerkleTree::<PoseidonHasher>::open(&config, depth)?;
        let _ = tree.root();
        tree_opens.push(started.elapsed());
        drop(tree);
        // sled's own recovery alone, for the split.
        let started = Instant::now();
        let db = sled::Config::new().path(dir).open()?;
        sled_opens.push(started.elapsed());
        drop(db);
        wait_for_release(dir);
    }
    Ok((
        Stats::from_samples(tree_opens).median,
        Stats::from_samples(sled_opens).median,
    ))
}

/// sled's background threads release its file lock shortly after a drop.
fn wait_for_release(dir: &std::path::Path) {
    for _ in 0..1000 {
        if let Ok(file) = std::fs::File::open(dir.join("db")) {
            if file.try_lock().is_ok() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut failed = false;
    println!("| guard | measured | limit | |");
    println!("|---|---|---|---|");

    // Memory first, while the heap is still small: a delta measured after the big trees
    // would be hidden in pages the allocator kept.
    for (name, grow) in [
        ("empty depth-32 OptimalMerkleTree", 0u8),
        ("empty depth-32 SledMerkleTree (temporary)", 1),
    ] {
        let before = rss();
        let depth = Depth::new(32)?;
        let held: Box<dyn std::any::Any> = if grow == 0 {
            let tree = OptimalMerkleTree::<PoseidonHasher>::new(depth);
            let _ = tree.root();
            Box::new(tree)
        } else {
            let tree = SledMerkleTree::<PoseidonHasher>::open(&SledConfig::temporary(), depth)?;
            let _ = tree.root();
            Box::new(tree)
        };
        let grew = rss().saturating_sub(before);
        let ok = grew < EMPTY_TREE_LIMIT;
        failed |= !ok;
        println!(
            "| resident memory of an {name} | {} KiB (process {} MiB) | < {} MiB | {} |",
            grew >> 10,
            rss() >> 20,
            EMPTY_TREE_LIMIT >> 20,
            if ok { "ok" } else { "FAIL" }
        );
        drop(held);
    }
    let small = tempfile::tempdir()?;
    let large = tempfile::tempdir()?;
    let (t16, sled16) = open_time(small.path(), 1 << 16)?;
    let (t18, sled18) = open_time(large.path(), 1 << 18)?;
    let ratio = t18.as_secs_f64() / t16.as_secs_f64();
    let ok = ratio < 2.0;
    failed |= !ok;
    println!(
        "| open 2^18 leaves / open 2^16 (sled, depth {DEPTH}, median of {OPENS}) | {} / {} = {ratio:.2}x | < 2x | {} |",
        fmt_duration(t18),
        fmt_duration(t16),
        if ok { "ok" } else { "FAIL" }
    );

    println!(
        "| (of which sled's own open: 2^18 / 2^16) | {} / {} = {:.2}x | | |",
        fmt_duration(sled18),
        fmt_duration(sled16),
        sled18.as_secs_f64() / sled16.as_secs_f64()
    );
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
