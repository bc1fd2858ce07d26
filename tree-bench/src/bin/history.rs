//! History and snapshot figures at depth 20 with Poseidon: what a checkpoint costs per changed
//! leaf, rewinds of 1 and 100 blocks, `proof_at` an older root, and export + import of 2^20
//! leaves (import on 1 and on all threads).
//!
//! `cargo run --release -p tree-bench --bin history [-- --quick]`

use std::sync::Arc;
use std::time::Instant;

use hasher::PoseidonHasher;
use tree_bench::{fmt_duration, leaves};
use tree_core::{
    Depth, History, HistoryConfig, MerkleTree, MerkleTreeExt, OptimalMerkleTree, RehashConfig,
    Snapshot, UpdateBatch,
};
use tree_sled::{SledConfig, SledMerkleTree};

const DEPTH: u8 = 20;
const BLOCK: u64 = 1 << 8;

/// Block `b`: 2^8 changes — 192 registrations and 64 removals of earlier members.
fn block(b: u64, next: u64) -> UpdateBatch<PoseidonHasher> {
    let mut batch = UpdateBatch::new();
    batch.set_range(next, leaves(next, BLOCK * 3 / 4));
    for i in 0..BLOCK / 4 {
        let victim = (b * 7919 + i * 104_729) % next.max(1);
        if next > 0 {
            batch.delete(victim);
        }
    }
    batch.metadata(b.to_be_bytes().to_vec());
    batch
}

fn run_blocks<T: History<Hasher = PoseidonHasher>>(tree: &mut T, from: u64, count: u64)
where
    T::Error: std::fmt::Debug,
{
    for b in from..from + count {
        let next = tree.next_index();
        tree.apply(block(b, next)).expect("block applies");
        tree.checkpoint(b).expect("checkpoint");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let base: u64 = if quick { 1 << 14 } else { 1 << 17 };
    let big: u64 = if quick { 1 << 16 } else { 1 << 20 };
    let depth = Depth::new(DEPTH)?;
    let history = HistoryConfig {
        max_checkpoints: 128,
        root_window: 5,
    };
    println!(
        "History at depth {DEPTH}, Poseidon (FastPoseidon), {base} members, blocks of {BLOCK} \
         changes (192 registrations + 64 removals), one checkpoint per block"
    );

    // In memory.
    let mut mem = OptimalMerkleTree::<PoseidonHasher>::new(depth);
    mem.set_range(0, leaves(0, base))?;
    mem.set_history_config(history)?;
    mem.checkpoint(0)?;
    run_blocks(&mut mem, 1, 100);
    let per_leaf = mem.history_bytes() as f64 / (100 * BLOCK) as f64;
    let older = mem.roots()?[2];
    let started = Instant::now();
    let reps = 1000;
    for i in 0..reps {
        std::hint::black_box(mem.proof_at(&older, i * 97)?);
    }
    let proof_at = started.elapsed() / u32::try_from(reps)?;
    let started = Instant::now();
    for i in 0..reps {
        std::hint::black_box(mem.proof(i * 97)?);
    }
    let proof_now = started.elapsed() / u32::try_from(reps)?;
    let mut one = mem.clone();
    let started = Instant::now();
    one.rewind_to(99)?;
    let rewind_one = started.elapsed();
    let mut hundred = mem.clone();
    let started = Instant::now();
    hundred.rewind_to(0)?;
    let rewind_hundred = started.elapsed();

    // On sled.
    let dir = tempfile::tempdir()?;
    let mut sled = SledMerkleTree::<PoseidonHasher>::open(&SledConfig::new(dir.path()), depth)?;
    sled.set_range(0, leaves(0, base))?;
    sled.set_history_config(history)?;
    sled.checkpoint(0)?;
    let (_, before) = sled.history_size()?;
    let started = Instant::now();
    run_blocks(&mut sled, 1, 100);
    let sled_blocks = started.elapsed() / 100;
    let (records, after) = sled.history_size()?;
    let sled_per_leaf = (after - before) as f64 / (100 * BLOCK) as f64;
    let started = Instant::now();
    for i in 0..100 {
        std::hint::black_box(sled.proof_at(&older, i * 97)?);
    }
    let sled_proof_at = started.elapsed() / 100;
    let started = Instant::now();
    sled.rewind_to(99)?;
    let sled_rewind_one = started.elapsed();
    let started = Instant::now();
    sled.rewind_to(0)?;
    let sled_rewind_hundred = started.elapsed();
    assert_eq!(
        sled.root(),
        hundred.root(),
        "sled and in-memory rewinds agree"
    );

    println!("\n| measure | OptimalMerkleTree | SledMerkleTree |\n|---|---|---|");
    println!(
        "| undo bytes per changed leaf | {per_leaf:.0} B (heap) | {sled_per_leaf:.0} B (keys + values, {records} records) |"
    );
    println!(
        "| block (apply + checkpoint) | – | {} |",
        fmt_duration(sled_blocks)
    );
    println!(
        "| `proof_at` a root 2 blocks old | {} (proof now: {}) | {} |",
        fmt_duration(proof_at),
        fmt_duration(proof_now),
        fmt_duration(sled_proof_at)
    );
    println!(
        "| rewind 1 block | {} | {} |",
        fmt_duration(rewind_one),
        fmt_duration(sled_rewind_one)
    );
    println!(
        "| rewind 100 blocks | {} | {} |",
        fmt_duration(rewind_hundred),
        fmt_duration(sled_rewind_hundred)
    );

    // Snapshots of `big` leaves.
    let mut source = OptimalMerkleTree::<PoseidonHasher>::new(depth);
    source.set_range(0, leaves(0, big))?;
    let started = Instant::now();
    let mut bytes = Vec::new();
    Snapshot::of(&source)?.write_to(&mut bytes)?;
    let export = started.elapsed();
    let threads = rayon::current_num_threads();
    let mut import = Vec::new();
    for pool_threads in [1, threads] {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(pool_threads)
                .build()?,
        );
        let config = RehashConfig {
            thread_pool: Some(pool),
            ..RehashConfig::default()
        };
        let started = Instant::now();
        let snapshot = Snapshot::<PoseidonHasher>::read_from(bytes.as_slice())?;
        let tree = snapshot.import(
            OptimalMerkleTree::with_config(depth, config),
            Some(&source.root()),
        )?;
        import.push(started.elapsed());
        assert_eq!(tree.root(), source.root());
    }
    let sled_dir = tempfile::tempdir()?;
    let started = Instant::now();
    let snapshot = Snapshot::<PoseidonHasher>::read_from(bytes.as_slice())?;
    let sled_tree = snapshot.import(
        SledMerkleTree::<PoseidonHasher>::open(&SledConfig::new(sled_dir.path()), depth)?,
        Some(&source.root()),
    )?;
    let sled_import = started.elapsed();
    drop(sled_tree);
    println!(
        "\nSnapshot of {big} leaves: {:.1} MiB, export {}; import into OptimalMerkleTree: 1 thread {}, \
         {threads} threads {} (speedup {:.2}x); import into SledMerkleTree {}",
        bytes.len() as f64 / (1 << 20) as f64,
        fmt_duration(export),
        fmt_duration(import[0]),
        fmt_duration(import[1]),
        import[0].as_secs_f64() / import[1].as_secs_f64(),
        fmt_duration(sled_import),
    );
    Ok(())
}
