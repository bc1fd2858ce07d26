//! Readers during writes through `SharedTree`: read throughput and latency percentiles with no
//! writer, with a writer that hashes under the shared lock (`SharedTree::apply`), and with a
//! writer that holds the exclusive lock for the whole apply (the naive design), same run.
//!
//! `cargo run --release -p tree-bench --bin shared_reads [-- --quick]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hasher::PoseidonHasher;
use tree_bench::{fmt_duration, leaves};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, UpdateBatch};
use tree_sled::{SharedTree, SledConfig, SledMerkleTree};

#[derive(Clone, Copy, PartialEq)]
enum Writer {
    None,
    SharedHashing,
    ExclusiveApply,
}

fn run(
    shared: &Arc<SharedTree<PoseidonHasher>>,
    writer: Writer,
    secs: f64,
    readers: usize,
) -> (f64, Vec<Duration>, usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..readers)
        .map(|r| {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let mut i = r as u64;
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let ok = shared.read(|t| {
                        let index = i % t.next_index();
                        match (t.get(index), t.proof(index)) {
                            (Ok(leaf), Ok(proof)) => proof.compute_root(&leaf) == t.root(),
                            _ => false,
                        }
                    });
                    latencies.push(started.elapsed());
                    assert!(ok, "inconsistent read");
                    i += 7919;
                }
                latencies
            })
        })
        .collect();
    let started = Instant::now();
    let mut batches = 0;
    while started.elapsed().as_secs_f64() < secs {
        match writer {
            Writer::None => std::thread::sleep(Duration::from_millis(10)),
            Writer::SharedHashing | Writer::ExclusiveApply => {
                let next = shared.read(MerkleTree::next_index);
                let mut batch = UpdateBatch::new();
                batch.set_range(next, leaves(next, 1 << 10));
                if writer == Writer::SharedHashing {
                    shared.apply(batch).unwrap_or(());
                } else {
                    shared.write(|t| t.apply(batch)).unwrap_or(());
                }
                batches += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap_or_default())
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    all.sort();
    (all.len() as f64 / elapsed, all, batches)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p) as usize)
        .copied()
        .unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quick = std::env::args().any(|a| a == "--quick");
    let secs = if quick { 2.0 } else { 6.0 };
    let readers = 2;
    let mut tree =
        SledMerkleTree::<PoseidonHasher>::open(&SledConfig::temporary(), Depth::new(20)?)?;
    tree.set_range(0, leaves(0, 1 << 16))?;
    let shared = Arc::new(SharedTree::new(tree));
    println!(
        "SharedTree<SledMerkleTree>, depth 20, 2^16 members, {readers} reader threads reading (root, leaf, proof) \
         and checking it, {secs} s per row; the writer appends 2^10 members per batch\n"
    );
    println!("| writer | reads/s | p50 | p99 | max | batches |\n|---|---|---|---|---|---|");
    for (name, writer) in [
        ("none", Writer::None),
        (
            "`SharedTree::apply` (hashing under the shared lock)",
            Writer::SharedHashing,
        ),
        (
            "whole apply under the exclusive lock (naive)",
            Writer::ExclusiveApply,
        ),
    ] {
        let (rate, lat, batches) = run(&shared, writer, secs, readers);
        println!(
            "| {name} | {rate:.0} | {} | {} | {} | {batches} |",
            fmt_duration(pct(&lat, 0.5)),
            fmt_duration(pct(&lat, 0.99)),
            fmt_duration(lat.last().copied().unwrap_or_default())
        );
    }
    Ok(())
}
