//! Side-by-side table: our persistent tree on sled and on redb vs rln 3.0.0's `PmTree`
//! (vacp2p_pmtree 3.0.1 on sled 0.34), depth 20, the same Poseidon in all three, one run, runs
//! interleaved round-robin.
//!
//! `cargo run --release -p tree-bench --bin store_compare [-- --quick]`
//!
//! Persistent trees cannot be cloned per run: successive runs of an operation apply to the same
//! database, so its state moves on by one batch per run (the same for all three trees).

use std::path::Path;
use std::time::{Duration, Instant};

use hasher::{Fr, PoseidonHasher};
use rln::pm_tree::{PmTree, PmTreeSledConfig, SledDB};
use tree_bench::{dir_bytes, fmt_duration, fmt_stats, leaves, time_round_robin, Stats, ZkPoseidon};
use tree_core::persistent::Durability;
use tree_core::{Depth, FullMerkleTree, MerkleTree, MerkleTreeExt};
use tree_engines::{DbConfig, DbTree, Engine};
use zerokit_utils::merkle_tree::ZerokitMerkleTree;

type Theirs = PmTree<SledDB, ZkPoseidon>;
type Ours = DbTree<PoseidonHasher>;
const DEPTH: u8 = 20;
const ENGINES: [Engine; 2] = [Engine::Sled, Engine::Redb];

fn pm_config(path: &Path) -> Result<PmTreeSledConfig, Box<dyn std::error::Error>> {
    Ok(PmTreeSledConfig::new()
        .path(path)
        .temporary(false)
        .build()?)
}

fn open(
    path: &Path,
    engine: Engine,
    durability: Durability,
) -> Result<Ours, Box<dyn std::error::Error>> {
    let config = DbConfig::new(path).engine(engine).durability(durability);
    Ok(Ours::open(&config, Depth::new(DEPTH)?)?)
}

const PERIODIC: Durability = Durability::Periodic { every_ms: 500 };

fn ratio(theirs: Duration, ours: Duration) -> f64 {
    theirs.as_secs_f64() / ours.as_secs_f64()
}

/// One table row: sled, redb, PmTree and PmTree's time over each of ours.
fn row(op: &str, stats: &[Stats]) {
    let [sled, redb, pm] = [stats[0], stats[1], stats[2]];
    println!(
        "| {op} | {} | {} | {} | {:.1}x | {:.1}x |",
        fmt_stats(sled),
        fmt_stats(redb),
        fmt_stats(pm),
        ratio(pm.median, sled.median),
        ratio(pm.median, redb.median)
    );
}

/// Times `override_range` on every tree, prints its row and checks that the roots still agree.
fn override_row(
    ours: &mut [Ours],
    theirs: &mut Theirs,
    start: u64,
    writes: &[Fr],
    removes: &[u64],
    reps: usize,
) {
    row(
        "override_range 2^12 + 2^8 removals",
        &time_override(ours, theirs, start, writes, removes, reps),
    );
    for tree in ours.iter() {
        assert_eq!(
            tree.root(),
            theirs.root(),
            "roots differ after the same operations"
        );
    }
}

/// `override_range(start, writes, removes)` on every tree, interleaved.
fn time_override(
    ours: &mut [Ours],
    theirs: &mut Theirs,
    start: u64,
    writes: &[Fr],
    removes: &[u64],
    reps: usize,
) -> Vec<Stats> {
    let removes_zk: Vec<usize> = removes.iter().map(|&i| i as usize).collect();
    let [sled, redb] = ours else {
        unreachable!("two engines")
    };
    time_round_robin(
        reps,
        &mut [
            &mut || {
                sled.override_range(start, writes.iter().copied(), removes.iter().copied())
                    .unwrap()
            },
            &mut || {
                redb.override_range(start, writes.iter().copied(), removes.iter().copied())
                    .unwrap()
            },
            &mut || {
                theirs
                    .override_range(
                        start as usize,
                        writes.iter().copied(),
                        removes_zk.iter().copied(),
                    )
                    .unwrap()
            },
        ],
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let members: u64 = if quick { 10_000 } else { 100_000 };
    let big: u64 = if quick { 1 << 16 } else { 1 << 20 };
    let depth = Depth::new(DEPTH)?;
    let dir = tempfile::tempdir()?;
    println!(
        "Our tree on sled 0.34.7 and on redb 5 vs rln 3.0.0 PmTree (sled 0.34.7), depth {DEPTH}, \
         the same Poseidon (ours, FastPoseidon) in all, periodic flush (500 ms) unless noted"
    );

    // Phase A: single-leaf operations on a tree of `members` leaves.
    let mut ours = ENGINES
        .iter()
        .map(|&e| open(&dir.path().join(format!("{e}-a")), e, PERIODIC))
        .collect::<Result<Vec<_>, _>>()?;
    let mut theirs = Theirs::new(
        usize::from(DEPTH),
        Fr::from(0u64),
        pm_config(&dir.path().join("pm-a"))?,
    )?;
    let prefill = leaves(0, members);
    let mut fill = Vec::new();
    for tree in &mut ours {
        let started = Instant::now();
        tree.set_range(0, prefill.iter().copied())?;
        fill.push(started.elapsed());
    }
    let started = Instant::now();
    theirs.set_range(0, prefill.iter().copied())?;
    fill.push(started.elapsed());
    for tree in &ours {
        assert_eq!(tree.root(), theirs.root(), "prefilled roots differ");
    }
    let mut full = FullMerkleTree::<PoseidonHasher>::new(depth)?;
    full.set_range(0, prefill.iter().copied())?;

    println!(
        "\nTree of {members} leaves (prefill: sled {}, redb {}, PmTree {})",
        fmt_duration(fill[0]),
        fmt_duration(fill[1]),
        fmt_duration(fill[2])
    );
    println!(
        "| operation | ours on sled (median, min–max) | ours on redb | PmTree | PmTree / sled | PmTree / redb |"
    );
    println!("|---|---|---|---|---|---|");
    let reps = if quick { 3 } else { 5 };
    let v = Fr::from(4242u64);
    {
        let [sled, redb] = &mut ours[..] else {
            unreachable!("two engines")
        };
        row(
            &format!("update_next at {members}"),
            &time_round_robin(
                reps,
                &mut [
                    &mut || sled.update_next(v).unwrap(),
                    &mut || redb.update_next(v).unwrap(),
                    &mut || theirs.update_next(v).unwrap(),
                ],
            ),
        );
    }
    let at = members / 2;
    {
        let [sled, redb] = &mut ours[..] else {
            unreachable!("two engines")
        };
        row(
            &format!("set (index {at})"),
            &time_round_robin(
                reps,
                &mut [
                    &mut || sled.set(at, v).unwrap(),
                    &mut || redb.set(at, v).unwrap(),
                    &mut || theirs.set(at as usize, v).unwrap(),
                ],
            ),
        );
    }
    let writes = leaves(1 << 40, 1 << 12);
    let start = ours[0].next_index() - (1 << 11);
    let removes: Vec<u64> = (0..256u64).map(|i| i * (start / 256)).collect();
    override_row(
        &mut ours,
        &mut theirs,
        start,
        &writes,
        &removes,
        reps.min(3),
    );
    {
        let [sled, redb] = &ours[..] else {
            unreachable!("two engines")
        };
        row(
            "proof",
            &time_round_robin(
                200,
                &mut [
                    &mut || {
                        std::hint::black_box(sled.proof(at + 1).ok());
                    },
                    &mut || {
                        std::hint::black_box(redb.proof(at + 1).ok());
                    },
                    &mut || {
                        std::hint::black_box(theirs.proof(at as usize + 1).ok());
                    },
                ],
            ),
        );
    }
    // The in-memory Full tree, for the "within 3x of in-memory" target.
    {
        let [sled, redb] = &mut ours[..] else {
            unreachable!("two engines")
        };
        let stats = time_round_robin(
            reps,
            &mut [
                &mut || full.update_next(v).unwrap(),
                &mut || sled.update_next(v).unwrap(),
                &mut || redb.update_next(v).unwrap(),
            ],
        );
        println!(
            "| update_next: in-memory Full {} | sled {:.2}x of in-memory | redb {:.2}x of in-memory | – | – | target ≤ 3x |",
            fmt_duration(stats[0].median),
            ratio(stats[1].median, stats[0].median),
            ratio(stats[2].median, stats[0].median),
        );
    }
    drop(ours);
    // fsync per commit: durable before `apply` returns.
    let mut durable = ENGINES
        .iter()
        .map(|&e| {
            open(
                &dir.path().join(format!("{e}-durable")),
                e,
                Durability::EveryCommit,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    for tree in &mut durable {
        tree.set_range(0, leaves(0, 1024))?;
    }
    {
        let [sled, redb] = &mut durable[..] else {
            unreachable!("two engines")
        };
        let stats = time_round_robin(
            reps,
            &mut [&mut || sled.update_next(v).unwrap(), &mut || {
                redb.update_next(v).unwrap()
            }],
        );
        println!(
            "| update_next with fsync per commit | {} | {} | – | – | – |",
            fmt_stats(stats[0]),
            fmt_stats(stats[1])
        );
    }
    drop((theirs, durable, full));

    // Phase B: a tree of `big` leaves: build, disk, reopen.
    let all = leaves(0, big);
    println!("\nTree of {big} leaves");
    println!("| measure | ours on sled | ours on redb | PmTree | PmTree / sled | PmTree / redb |");
    println!("|---|---|---|---|---|---|");
    let paths: Vec<_> = ENGINES
        .iter()
        .map(|e| dir.path().join(format!("{e}-b")))
        .collect();
    let pm_path = dir.path().join("pm-b");
    let mut build = Vec::new();
    for (&engine, path) in ENGINES.iter().zip(&paths) {
        let started = Instant::now();
        let mut tree = open(path, engine, PERIODIC)?;
        tree.set_range(0, all.iter().copied())?;
        tree.close()?;
        drop(tree);
        build.push(started.elapsed());
    }
    let started = Instant::now();
    {
        let mut theirs = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&pm_path)?)?;
        theirs.set_range(0, all.iter().copied())?;
        theirs.close()?;
    }
    build.push(started.elapsed());
    println!(
        "| build (set_range of all, flush) | {} | {} | {} | {:.1}x | {:.1}x |",
        fmt_duration(build[0]),
        fmt_duration(build[1]),
        fmt_duration(build[2]),
        ratio(build[2], build[0]),
        ratio(build[2], build[1])
    );
    let raw = 32 * (2 * big - 1);
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    let disk = [
        dir_bytes(&paths[0]),
        dir_bytes(&paths[1]),
        dir_bytes(&pm_path),
    ];
    println!(
        "| disk bytes (raw nodes {:.1} MiB) | {:.1} MiB ({:.2}x raw) | {:.1} MiB ({:.2}x raw) | {:.1} MiB ({:.2}x raw) | {:.2}x | {:.2}x |",
        mib(raw),
        mib(disk[0]),
        disk[0] as f64 / raw as f64,
        mib(disk[1]),
        disk[1] as f64 / raw as f64,
        mib(disk[2]),
        disk[2] as f64 / raw as f64,
        disk[2] as f64 / disk[0] as f64,
        disk[2] as f64 / disk[1] as f64
    );
    let mut opens = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..3 {
        for (i, (&engine, path)) in ENGINES.iter().zip(&paths).enumerate() {
            let started = Instant::now();
            let tree = open(path, engine, PERIODIC)?;
            opens[i].push(started.elapsed());
            std::hint::black_box(tree.root());
        }
        let started = Instant::now();
        let tree = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&pm_path)?)?;
        opens[2].push(started.elapsed());
        std::hint::black_box(tree.root());
    }
    let [sled_open, redb_open, pm_open] = opens.map(Stats::from_samples);
    println!(
        "| reopen (median of 3) | {} | {} | {} | {:.0}x | {:.0}x |",
        fmt_duration(sled_open.median),
        fmt_duration(redb_open.median),
        fmt_duration(pm_open.median),
        ratio(pm_open.median, sled_open.median),
        ratio(pm_open.median, redb_open.median)
    );
    let mut ours = ENGINES
        .iter()
        .zip(&paths)
        .map(|(&e, path)| open(path, e, PERIODIC))
        .collect::<Result<Vec<_>, _>>()?;
    let mut theirs = Theirs::new(usize::from(DEPTH), Fr::from(0u64), pm_config(&pm_path)?)?;
    let start = big / 2;
    let removes: Vec<u64> = (0..256u64).map(|i| i * (big / 2 / 256)).collect();
    override_row(
        &mut ours,
        &mut theirs,
        start,
        &writes,
        &removes,
        reps.min(3),
    );
    Ok(())
}
