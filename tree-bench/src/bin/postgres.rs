//! The PostgreSQL store side by side with redb, sled and rln 3.0.0's `PmTree`, one run: per-block
//! commit and `update_next` (depth 20, every engine durable at each commit), a 2^20 build, a
//! replica's start-up, proofs and lag, a standby's take-over after kill -9, and proofs/s of one
//! and two replicas. Postgres is a throw-away cluster on loopback with fsync on (pg-harness).
//!
//! `cargo run --release -p tree-bench --bin postgres [-- --quick]`

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hasher::{Fr, PoseidonHasher};
use pg_harness::{Fsync, PgCluster};
use rln::pm_tree::{PmTree, PmTreeSledConfig, SledDB};
use tree_bench::{fmt_duration, fmt_stats, leaves, time_round_robin, ZkPoseidon};
use tree_core::persistent::Durability;
use tree_core::{Depth, History, MerkleTree, MerkleTreeExt, UpdateBatch};
use tree_engines::{AnyStore, DbConfig, DbReplica, DbTree, Engine, PostgresOptions, SharedDbTree};
use tree_postgres::LockWait;
use zerokit_utils::merkle_tree::ZerokitMerkleTree;

type Ours = DbTree<PoseidonHasher>;
type Theirs = PmTree<SledDB, ZkPoseidon>;
const DEPTH: u8 = 20;

fn pg(url: &str, tree: &str) -> DbConfig {
    DbConfig::new(url).tree(tree)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let at = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[at]
}

/// A block: `n` registrations appended at `next`, committed with checkpoint `id`.
fn block(next: u64, n: u64) -> UpdateBatch<PoseidonHasher> {
    let mut batch = UpdateBatch::new();
    batch.set_range(next, leaves(next + 1, n));
    batch
}

/// The writer child of the take-over measure: applies blocks until killed, printing `ack`.
fn child_writer(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut tree = Ours::open(&pg(url, "takeover"), Depth::new(DEPTH)?)?;
    let mut out = std::io::stdout().lock();
    loop {
        let next = tree.next_index();
        tree.apply_checkpointed(block(next, 10), next + 1)?;
        writeln!(out, "ack")?;
        out.flush()?;
    }
}

#[allow(clippy::too_many_lines)]
/// A writer commits `blocks` blocks 20 ms apart while a replica follows, woken by notifications
/// (`listen`) or polling every 20 ms: each block's lag, from the writer's commit returning to
/// the replica serving it, and how many blocks were measured.
fn replica_lag(
    url: &str,
    depth: Depth,
    blocks: u64,
    listen: bool,
) -> Result<(Vec<Duration>, usize), Box<dyn std::error::Error>> {
    let name = if listen { "lag-listen" } else { "lag-poll" };
    let mut config = pg(url, name);
    config.postgres.listen = listen;
    let mut writer = Ours::open(&config, depth)?;
    writer.set_range(0, leaves(0, 10_000))?;
    let (mut replica, replica_tree) = DbReplica::open::<PoseidonHasher>(&config)?;
    if listen {
        // Measured once the listener is in force (it connects in the background).
        let started = Instant::now();
        while !replica.is_listening() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let shared = Arc::new(SharedDbTree::new(replica_tree));
    let commits_at: Arc<parking_lot::Mutex<Vec<(i64, Instant)>>> = Arc::default();
    let seen_at: Arc<parking_lot::Mutex<Vec<(i64, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let follower = {
        let (shared, seen_at, stop) = (shared.clone(), seen_at.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                if let Ok(lag) = replica.catch_up(&shared) {
                    if lag.caught_up > 0 {
                        seen_at.lock().push((lag.commits, Instant::now()));
                    }
                }
                // What `serve --replica` waits: a notification, else its poll.
                let poll = if replica.is_listening() { 1000 } else { 20 };
                replica.wait_for_commit(Duration::from_millis(poll));
            }
            replica
        })
    };
    let first = writer.checkpoints()?.last().map_or(0, |c| c.id) + 1;
    for k in 0..blocks {
        let next = writer.next_index();
        writer.apply_checkpointed(block(next, 10), first + k)?;
        let commits = match writer.store() {
            AnyStore::Postgres(store) => store.commits(),
            _ => return Err("the writer is not on Postgres".into()),
        };
        commits_at.lock().push((commits, Instant::now()));
        std::thread::sleep(Duration::from_millis(20));
    }
    // The last commit's notification may need the safety poll if lost: wait past it.
    std::thread::sleep(Duration::from_millis(1200));
    stop.store(true, Ordering::Release);
    let replica = follower
        .join()
        .map_err(|_| "the replica's thread panicked")?;
    drop(replica);
    let seen = seen_at.lock().clone();
    let lags: Vec<Duration> = commits_at
        .lock()
        .iter()
        .filter_map(|(c, at)| {
            let (_, served) = seen.iter().find(|(s, _)| s >= c)?;
            Some(served.saturating_duration_since(*at))
        })
        .collect();
    let measured = lags.len();
    Ok((lags, measured))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("CANOPY_BENCH_PG_CHILD") {
        return child_writer(&url);
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let big: u64 = if quick { 1 << 16 } else { 1 << 20 };
    let reps = if quick { 50 } else { 200 };
    let depth = Depth::new(DEPTH)?;
    let cluster = PgCluster::start_with(Fsync::On)?;
    let url = cluster.url();
    let dir = tempfile::tempdir()?;
    println!(
        "PostgreSQL (throw-away cluster on loopback, fsync on) vs redb 5 and sled 0.34.7 (fsync \
         per commit) vs rln 3.0.0 PmTree (sled), depth {DEPTH}, the same Poseidon in all"
    );

    // Per-block commit and update_next on a tree of 10,000 leaves.
    let durable = |engine: Engine| {
        DbConfig::new(dir.path().join(engine.name()))
            .engine(engine)
            .durability(Durability::EveryCommit)
    };
    let mut trees = [
        Ours::open(&pg(&url, "blocks"), depth)?,
        Ours::open(&durable(Engine::Redb), depth)?,
        Ours::open(&durable(Engine::Sled), depth)?,
    ];
    let mut theirs = Theirs::new(
        usize::from(DEPTH),
        Fr::from(0u64),
        PmTreeSledConfig::new()
            .path(dir.path().join("pm"))
            .temporary(false)
            .build()?,
    )?;
    let prefill = leaves(0, 10_000);
    for tree in &mut trees {
        tree.set_range(0, prefill.iter().copied())?;
    }
    theirs.set_range(0, prefill.iter().copied())?;
    println!("\n| operation (tree of 10,000 leaves) | Postgres | redb | sled | PmTree |");
    println!("|---|---|---|---|---|");
    {
        let [pgt, redb, sled] = &mut trees;
        let id = AtomicU64::new(1);
        let commit = |tree: &mut Ours| {
            let next = tree.next_index();
            let k = id.fetch_add(1, Ordering::Relaxed);
            tree.apply_checkpointed(block(next, 10), k).map(drop)
        };
        let stats = time_round_robin(
            reps,
            &mut [
                &mut || commit(pgt).unwrap_or_else(|e| panic!("{e}")),
                &mut || commit(redb).unwrap_or_else(|e| panic!("{e}")),
                &mut || commit(sled).unwrap_or_else(|e| panic!("{e}")),
                &mut || {
                    let next = theirs.leaves_set();
                    theirs
                        .set_range(next, leaves(next as u64 + 1, 10).into_iter())
                        .unwrap_or_else(|e| panic!("{e}"));
                },
            ],
        );
        println!(
            "| block: 10 registrations + checkpoint, one commit | {} | {} | {} | {} (no checkpoint) |",
            fmt_stats(stats[0]),
            fmt_stats(stats[1]),
            fmt_stats(stats[2]),
            fmt_stats(stats[3])
        );
        let v = Fr::from(7u64);
        let stats = time_round_robin(
            reps,
            &mut [
                &mut || pgt.update_next(v).unwrap_or_else(|e| panic!("{e}")),
                &mut || redb.update_next(v).unwrap_or_else(|e| panic!("{e}")),
                &mut || sled.update_next(v).unwrap_or_else(|e| panic!("{e}")),
                &mut || theirs.update_next(v).unwrap_or_else(|e| panic!("{e}")),
            ],
        );
        println!(
            "| update_next | {} | {} | {} | {} |",
            fmt_stats(stats[0]),
            fmt_stats(stats[1]),
            fmt_stats(stats[2]),
            fmt_stats(stats[3])
        );
    }
    drop((trees, theirs));

    // A big tree: build (in blocks of 2^16), then a replica of it.
    let all = leaves(0, big);
    let build = |config: &DbConfig| -> Result<(Duration, Ours), Box<dyn std::error::Error>> {
        let started = Instant::now();
        let mut tree = Ours::open(config, depth)?;
        for (k, chunk) in all.chunks(1 << 16).enumerate() {
            let mut batch = UpdateBatch::new();
            batch.set_range(tree.next_index(), chunk.iter().copied());
            tree.apply_checkpointed(batch, k as u64 + 1)?;
        }
        tree.flush()?;
        Ok((started.elapsed(), tree))
    };
    let big_pg = pg(&url, "big");
    let (pg_build, pg_tree) = build(&big_pg)?;
    let (redb_build, redb_tree) =
        build(&DbConfig::new(dir.path().join("big-redb")).engine(Engine::Redb))?;
    let (sled_build, sled_tree) =
        build(&DbConfig::new(dir.path().join("big-sled")).engine(Engine::Sled))?;
    // The same engine on a store in memory: the hashing and staging floor, no I/O at all.
    let (memory_build, memory_tree) = build(&DbConfig::default().engine(Engine::Memory))?;
    assert_eq!(pg_tree.root(), redb_tree.root());
    assert_eq!(pg_tree.root(), sled_tree.root());
    assert_eq!(pg_tree.root(), memory_tree.root());
    println!("\n| tree of {big} leaves | Postgres | redb | sled | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| build, blocks of 65,536 leaves (the same engine on a store in memory: {}) | {} | {} | {} | ≤ 10 s on Postgres |",
        fmt_duration(memory_build),
        fmt_duration(pg_build),
        fmt_duration(redb_build),
        fmt_duration(sled_build)
    );
    drop((sled_tree, memory_tree));
    let started = Instant::now();
    let (replica, replica_tree) = DbReplica::open::<PoseidonHasher>(&big_pg)?;
    let replica_start = started.elapsed();
    assert_eq!(replica_tree.root(), pg_tree.root());
    println!(
        "| replica start-up (connect, read every entry, open) | {} | – | – | ≤ 3 s |",
        fmt_duration(replica_start)
    );
    let samples = if quick { 5_000 } else { 20_000 };
    let proof_times = |tree: &Ours| -> (Duration, Duration) {
        let mut times: Vec<Duration> = (0..samples)
            .map(|i| {
                let at = (i * 7_919) % big;
                let started = Instant::now();
                std::hint::black_box(tree.proof(at).ok());
                started.elapsed()
            })
            .collect();
        (percentile(&mut times, 0.5), percentile(&mut times, 0.99))
    };
    let (r50, r99) = proof_times(&replica_tree);
    let (d50, d99) = proof_times(&redb_tree);
    let (p50, p99) = proof_times(&pg_tree);
    println!(
        "| proof p50 / p99 | replica {} / {}; the writer's Postgres-backed tree {} / {} | {} / {} | – | replica within 2x of redb |",
        fmt_duration(r50),
        fmt_duration(r99),
        fmt_duration(p50),
        fmt_duration(p99),
        fmt_duration(d50),
        fmt_duration(d99)
    );
    drop(redb_tree);

    // Replica lag, woken by the writer's notifications (as `serve --replica` runs by default)
    // and polling every 20 ms (a hot standby, or `listen = false`).
    drop((replica, replica_tree, pg_tree));
    let blocks = if quick { 50 } else { 200 };
    for listen in [true, false] {
        let (mut lags, measured) = replica_lag(&url, depth, blocks, listen)?;
        println!(
            "| replica lag after a commit ({}), p50 / p99 of {measured} blocks | {} / {} | – | – | p99 ≤ 100 ms |",
            if listen { "LISTEN/NOTIFY" } else { "polling every 20 ms" },
            fmt_duration(percentile(&mut lags, 0.5)),
            fmt_duration(percentile(&mut lags, 0.99))
        );
    }

    // Reads/s: one replica copy read by one thread, then two copies read by a thread each.
    let window = Duration::from_secs(if quick { 1 } else { 3 });
    let read_rate = |copies: usize| -> Result<f64, Box<dyn std::error::Error>> {
        let trees = (0..copies)
            .map(|_| DbReplica::open::<PoseidonHasher>(&big_pg).map(|(_, t)| t))
            .collect::<Result<Vec<_>, _>>()?;
        let total = AtomicU64::new(0);
        std::thread::scope(|s| {
            for (r, tree) in trees.iter().enumerate() {
                let total = &total;
                s.spawn(move || {
                    let started = Instant::now();
                    let mut i = r as u64;
                    while started.elapsed() < window {
                        std::hint::black_box(tree.proof((i * 7_919) % big).ok());
                        i += 1;
                    }
                    total.fetch_add(i, Ordering::Relaxed);
                });
            }
        });
        #[allow(clippy::cast_precision_loss)]
        Ok(total.load(Ordering::Relaxed) as f64 / window.as_secs_f64())
    };
    let one = read_rate(1)?;
    let two = read_rate(2)?;
    println!(
        "| proofs/s: 1 replica / 2 replicas (a thread each, {} cores) | {one:.0} / {two:.0} ({:.2}x) | – | – | – |",
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        two / one
    );

    // Take-over: a writer process applies blocks; a standby waits on the lock; kill -9 the
    // writer; time to the standby's first commit.
    let mut takeovers = Vec::new();
    for _ in 0..if quick { 3 } else { 5 } {
        let mut child = Command::new(std::env::current_exe()?)
            .env("CANOPY_BENCH_PG_CHILD", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut acks = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        for _ in 0..5 {
            acks.next().ok_or("the writer stopped")??;
        }
        let standby_config = pg(&url, "takeover").postgres(PostgresOptions {
            tree: "takeover".into(),
            lock_wait: LockWait::Wait,
            ..PostgresOptions::default()
        });
        let standby = std::thread::spawn(move || -> Result<Instant, String> {
            let mut tree = Ours::open(&standby_config, depth).map_err(|e| e.to_string())?;
            let next = tree.next_index();
            let id = tree
                .checkpoints()
                .map_err(|e| e.to_string())?
                .last()
                .map_or(0, |c| c.id)
                + 1;
            tree.apply_checkpointed(block(next, 10), id.max(next + 1))
                .map_err(|e| e.to_string())?;
            Ok(Instant::now())
        });
        std::thread::sleep(Duration::from_millis(300));
        child.kill()?;
        let killed = Instant::now();
        child.wait()?;
        let committed = standby.join().map_err(|_| "the standby panicked")??;
        takeovers.push(committed - killed);
    }
    takeovers.sort();
    println!(
        "| take-over after kill -9: the writer's death to the standby's first commit, median (max) of {} | {} ({}) | – | – | ≤ 2 s |",
        takeovers.len(),
        fmt_duration(takeovers[takeovers.len() / 2]),
        fmt_duration(takeovers[takeovers.len() - 1])
    );
    Ok(())
}
