//! Side-by-side table: our `SledMerkleTree` vs rln 3.0.0's `PmTree` (vacp2p_pmtree 3.0.1 on
//! sled 0.34), depth 20, the same Poseidon in both, one run, runs interleaved.
//!
//! `cargo run --release -p tree-bench --bin sled_compare [-- --quick]`
//!
//! Persistent trees cannot be cloned per run: successive runs of an operation apply to the same
//! database, so its state moves on by one batch per run (the same for both trees).

use std::time::Instant;

use hasher::{Fr, PoseidonHasher};
use rln::pm_tree::{PmTree, PmTreeSledConfig, SledDB};
use tree_bench::{dir_bytes, fmt_duration, leaves, time_pair, Stats, ZkPoseidon};
use tree_core::{Depth, FullMerkleTree, MerkleTree, MerkleTreeExt};
use tree_sled::{Durability, SledConfig, SledMerkleTree};
use zerokit_utils::merkle_tree::ZerokitMerkleTree;

type Theirs = PmTree<SledDB, ZkPoseidon>;
type Ours = SledMerkleTree<PoseidonHasher>;
const DEPTH: u8 = 20;

fn pm_config(path: &std::path::Path) -> Result<PmTreeSledConfig, Box<dyn std::error::Error>> {
    Ok(PmTreeSledConfig::new()
        .path(path)
        .temporary(false)
        .build()?)
}

fn line(op: &str, (ours, theirs): (Stats, Stats), note: &str) {
    println!(
        "| {op} | {} ({}–{}) | {} ({}–{}) | {:.1}x | {note} |",
        fmt_duration(ours.median),
        fmt_duration(ours.min),
        fmt_duration(ours.max),
        fmt_duration(theirs.median),
        fmt_duration(theirs.min),
        fmt_duration(theirs.max),
        theirs.median.as_secs_f64() / ours.median.as_secs_f64()
    );
}

/// `override_range(start, writes, removes)` on both trees, interleaved.
fn time_override(
    ours: &mut Ours,
    theirs: &mut Theirs,
    start: u64,
    writes: &[Fr],
    removes: &[u64],
    reps: usize,
) -> (Stats, Stats) {
    let removes_zk: Vec<usize> = removes.iter().map(|&i| i as usize).collect();
    time_pair(
        reps,
        || (),
        |()| {
            ours.override_range(start, writes.iter().copied(), removes.iter().copied())
                .unwrap()
        },
        || (),
        |()| {
            theirs
                .override_range(
                    start as usize,
                    writes.iter().copied(),
                    removes_zk.iter().copied(),
                )
                .unwrap()
        },
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let members: u64 = if quick { 10_000 } else { 100_000 };
    let big: u64 = if quick { 1 << 16 } else { 1 << 20 };
    let depth = Depth::new(DEPTH)?;
    let dir = tempfile::tempdir()?;
    println!(
        "SledMerkleTree vs rln 3.0.0 PmTree, depth {DEPTH}, the same Poseidon (ours, FastPoseidon) in both, \
         sled 0.34.7, periodic flush (500 ms) in both unless noted"
    );

    // Phase A: single-leaf operations on a tree of `members` leaves.
    let ours_path = dir.path().join("ours-a");
    let theirs_path = dir.path().join("theirs-a");
    let mut ours = Ours::open(&SledConfig::new(&ours_path), depth)?;
    let mut theirs = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&theirs_path)?)?;
    let prefill = leaves(0, members);
    let started = Instant::now();
    ours.set_range(0, prefill.iter().copied())?;
    let ours_fill = started.elapsed();
    let started = Instant::now();
    theirs.set_range(0, prefill.iter().copied())?;
    let theirs_fill = started.elapsed();
    assert_eq!(ours.root(), theirs.root(), "prefilled roots differ");
    let mut full = FullMerkleTree::<PoseidonHasher>::new(depth)?;
    full.set_range(0, prefill.iter().copied())?;

    println!(
        "\nTree of {members} leaves (prefill: ours {}, PmTree {})",
        fmt_duration(ours_fill),
        fmt_duration(theirs_fill)
    );
    println!(
        "| operation | ours (median, min–max) | PmTree (median, min–max) | PmTree / ours | note |"
    );
    println!("|---|---|---|---|---|");
    let reps = if quick { 3 } else { 5 };
    let v = Fr::from(4242u64);
    line(
        &format!("update_next at {members}"),
        time_pair(
            reps,
            || (),
            |()| ours.update_next(v).unwrap(),
            || (),
            |()| theirs.update_next(v).unwrap(),
        ),
        "",
    );
    let at = members / 2;
    line(
        &format!("set (index {at})"),
        time_pair(
            reps,
            || (),
            |()| ours.set(at, v).unwrap(),
            || (),
            |()| theirs.set(at as usize, v).unwrap(),
        ),
        "",
    );
    let writes = leaves(1 << 40, 1 << 12);
    let start = ours.next_index() - (1 << 11);
    let removes: Vec<u64> = (0..256u64).map(|i| i * (start / 256)).collect();
    line(
        "override_range 2^12 + 2^8 removals",
        time_override(
            &mut ours,
            &mut theirs,
            start,
            &writes,
            &removes,
            reps.min(3),
        ),
        "",
    );
    assert_eq!(
        ours.root(),
        theirs.root(),
        "roots differ after the same operations"
    );
    line(
        "proof",
        time_pair(
            200,
            || (),
            |()| {
                std::hint::black_box(ours.proof(at + 1).ok());
            },
            || (),
            |()| {
                std::hint::black_box(theirs.proof(at as usize + 1).ok());
            },
        ),
        "",
    );
    // The in-memory Full tree, for the "within 3x of in-memory" target.
    let (mem, disk) = time_pair(
        reps,
        || (),
        |()| full.update_next(v).unwrap(),
        || (),
        |()| ours.update_next(v).unwrap(),
    );
    println!(
        "| update_next: in-memory Full vs ours on sled | {} | ours on sled {} | {:.2}x slower than in-memory | target ≤ 3x |",
        fmt_duration(mem.median),
        fmt_duration(disk.median),
        disk.median.as_secs_f64() / mem.median.as_secs_f64()
    );
    drop(ours);
    let mut durable = Ours::open(
        &SledConfig::new(dir.path().join("ours-durable")).durability(Durability::EveryCommit),
        depth,
    )?;
    durable.set_range(0, leaves(0, 1024))?;
    let (fsync, _) = time_pair(
        reps,
        || (),
        |()| durable.update_next(v).unwrap(),
        || (),
        |()| {},
    );
    println!(
        "| update_next, ours with fsync per commit | {} | – | – | durable before return |",
        fmt_duration(fsync.median)
    );
    drop((theirs, durable, full));

    // Phase B: a tree of `big` leaves: build, disk, reopen.
    let ours_path = dir.path().join("ours-b");
    let theirs_path = dir.path().join("theirs-b");
    let all = leaves(0, big);
    println!("\nTree of {big} leaves");
    println!("| measure | ours | PmTree | PmTree / ours |");
    println!("|---|---|---|---|");
    let started = Instant::now();
    {
        let mut ours = Ours::open(&SledConfig::new(&ours_path), depth)?;
        ours.set_range(0, all.iter().copied())?;
        ours.close()?;
    }
    let ours_build = started.elapsed();
    let started = Instant::now();
    {
        let mut theirs = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&theirs_path)?)?;
        theirs.set_range(0, all.iter().copied())?;
        theirs.close()?;
    }
    let theirs_build = started.elapsed();
    println!(
        "| build (set_range of all, flush) | {} | {} | {:.1}x |",
        fmt_duration(ours_build),
        fmt_duration(theirs_build),
        theirs_build.as_secs_f64() / ours_build.as_secs_f64()
    );
    let raw = 32 * (2 * big - 1);
    let (ours_disk, theirs_disk) = (dir_bytes(&ours_path), dir_bytes(&theirs_path));
    println!(
        "| disk bytes (raw nodes {:.1} MiB) | {:.1} MiB ({:.2}x raw) | {:.1} MiB ({:.2}x raw) | {:.2}x |",
        raw as f64 / 1048576.0,
        ours_disk as f64 / 1048576.0,
        ours_disk as f64 / raw as f64,
        theirs_disk as f64 / 1048576.0,
        theirs_disk as f64 / raw as f64,
        theirs_disk as f64 / ours_disk as f64
    );
    let mut open_ours = Vec::new();
    let mut open_theirs = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        let t = Ours::open(&SledConfig::new(&ours_path), depth)?;
        open_ours.push(started.elapsed());
        std::hint::black_box(t.root());
        drop(t);
        let started = Instant::now();
        let t = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&theirs_path)?)?;
        open_theirs.push(started.elapsed());
        std::hint::black_box(t.root());
        drop(t);
    }
    open_ours.sort();
    open_theirs.sort();
    println!(
        "| reopen (median of 3) | {} | {} | {:.0}x |",
        fmt_duration(open_ours[1]),
        fmt_duration(open_theirs[1]),
        open_theirs[1].as_secs_f64() / open_ours[1].as_secs_f64()
    );
    let mut ours = Ours::open(&SledConfig::new(&ours_path), depth)?;
    let mut theirs = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&theirs_path)?)?;
    let start = big / 2;
    let removes: Vec<u64> = (0..256u64).map(|i| i * (big / 2 / 256)).collect();
    let (o, t) = time_override(
        &mut ours,
        &mut theirs,
        start,
        &writes,
        &removes,
        reps.min(3),
    );
    println!(
        "| override_range 2^12 + 2^8 removals | {} | {} | {:.1}x |",
        fmt_duration(o.median),
        fmt_duration(t.median),
        t.median.as_secs_f64() / o.median.as_secs_f64()
    );
    assert_eq!(
        ours.root(),
        theirs.root(),
        "roots differ after the same operations"
    );
    Ok(())
}
