//! Criterion suites for the trees. Every iteration starts from a clone of the same prepared tree
//! (`iter_batched`, setup untimed), so nothing drifts inside the timing loop.
//!
//! `cargo bench -p tree-bench --bench trees` (add `-- <filter>` to run one group).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use hasher::{Fr, Keccak256Hasher, PoseidonHasher};
use tree_bench::{leaves, ZkPoseidon};
use tree_core::{
    Depth, FullMerkleTree, MerkleTree, MerkleTreeExt, OptimalMerkleTree, RehashConfig,
};
use tree_sled::{SledConfig, SledMerkleTree};
use zerokit_utils::merkle_tree::{OptimalMerkleTree as ZkOptimal, ZerokitMerkleTree};

const DEPTH: u8 = 20;
const BASE: u64 = 1 << 12;

fn prefilled_optimal(cfg: RehashConfig) -> OptimalMerkleTree<PoseidonHasher> {
    let mut t =
        OptimalMerkleTree::with_config(Depth::new(DEPTH).unwrap_or_else(|_| unreachable!()), cfg);
    t.set_range(0, leaves(0, BASE)).unwrap_or(());
    t
}

fn set_range(c: &mut Criterion) {
    let mut group = c.benchmark_group("set_range");
    group.sample_size(10);
    let ours = prefilled_optimal(RehashConfig::default());
    let mut theirs =
        ZkOptimal::<ZkPoseidon>::default(usize::from(DEPTH)).unwrap_or_else(|_| unreachable!());
    theirs
        .set_range(0, leaves(0, BASE).into_iter())
        .unwrap_or(());
    for log in [6u32, 10] {
        let new = leaves(BASE, 1 << log);
        group.bench_with_input(
            BenchmarkId::new(format!("optimal/{DEPTH}"), 1u64 << log),
            &new,
            |b, new| {
                b.iter_batched(
                    || ours.clone(),
                    |mut t| t.set_range(BASE, new.iter().copied()),
                    BatchSize::LargeInput,
                );
            },
        );
        group.bench_with_input(
            BenchmarkId::new(format!("zerokit-optimal/{DEPTH}"), 1u64 << log),
            &new,
            |b, new| {
                b.iter_batched(
                    || theirs.clone(),
                    |mut t| t.set_range(BASE as usize, new.iter().copied()),
                    BatchSize::LargeInput,
                );
            },
        );
    }
    group.finish();
}

/// A depth-20 `set_range` of 2^16 leaves into an empty tree with each Poseidon implementation:
/// how the hasher's speed carries into a tree operation.
fn set_range_by_hasher(c: &mut Criterion) {
    fn run<H: hasher::Hasher<Digest = Fr>>(
        group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        name: &str,
    ) {
        let depth = Depth::new(DEPTH).unwrap_or_else(|_| unreachable!());
        let new = leaves(0, 1 << 16);
        group.bench_function(name, |b| {
            b.iter_batched(
                || OptimalMerkleTree::<H>::new(depth),
                |mut t| t.set_range(0, new.iter().copied()),
                BatchSize::LargeInput,
            );
        });
    }
    let mut group = c.benchmark_group("set_range_2^16_by_hasher");
    group.sample_size(10);
    run::<hasher::LightPoseidonHasher>(&mut group, "light-poseidon");
    run::<tree_bench::ZerokitPoseidonHasher>(&mut group, "zerokit-poseidon");
    run::<PoseidonHasher>(&mut group, "canopy");
    group.finish();
}

fn rehash_seq_par(c: &mut Criterion) {
    let mut group = c.benchmark_group("rehash");
    group.sample_size(10);
    let new = leaves(BASE, 1 << 10);
    for (name, threshold) in [("seq", usize::MAX), ("par", 8)] {
        let tree = prefilled_optimal(RehashConfig::with_min_parallel_nodes(threshold));
        group.bench_function(BenchmarkId::new(name, 1 << 10), |b| {
            b.iter_batched(
                || tree.clone(),
                |mut t| t.set_range(BASE, new.iter().copied()),
                BatchSize::LargeInput,
            );
        });
    }
    // The same with Keccak: here the hash is cheap, so the tree's own overhead shows.
    let keccak_leaves: Vec<[u8; 32]> = (0..1u64 << 14)
        .map(|i| {
            let mut l = [0u8; 32];
            l[..8].copy_from_slice(&i.to_le_bytes());
            l
        })
        .collect();
    for (name, threshold) in [("keccak-seq", usize::MAX), ("keccak-par", 8)] {
        let tree = FullMerkleTree::<Keccak256Hasher>::with_config(
            Depth::new(DEPTH).unwrap_or_else(|_| unreachable!()),
            RehashConfig::with_min_parallel_nodes(threshold),
        )
        .unwrap_or_else(|_| unreachable!());
        group.bench_function(BenchmarkId::new(name, 1 << 14), |b| {
            b.iter_batched(
                || tree.clone(),
                |mut t| t.set_range(0, keccak_leaves.iter().copied()),
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

fn proof(c: &mut Criterion) {
    let mut group = c.benchmark_group("proof");
    let tree = prefilled_optimal(RehashConfig::default());
    group.bench_function(BenchmarkId::new("optimal", DEPTH), |b| {
        b.iter(|| tree.proof(BASE / 2))
    });
    group.finish();
}

fn sled(c: &mut Criterion) {
    let mut group = c.benchmark_group("sled");
    group.sample_size(20);
    let dir = tempfile::tempdir().unwrap_or_else(|_| unreachable!());
    let config = SledConfig::new(dir.path());
    let depth = Depth::new(DEPTH).unwrap_or_else(|_| unreachable!());
    {
        let mut tree = SledMerkleTree::<PoseidonHasher>::open(&config, depth)
            .unwrap_or_else(|_| unreachable!());
        tree.set_range(0, leaves(0, BASE)).unwrap_or(());
        let mut next = BASE;
        group.bench_function(BenchmarkId::new("apply/update_next", BASE), |b| {
            b.iter(|| {
                tree.set(next, Fr::from(next)).unwrap_or(());
                next += 1;
            });
        });
        group.bench_function(BenchmarkId::new("proof", DEPTH), |b| {
            b.iter(|| tree.proof(BASE / 2))
        });
    }
    group.bench_function("open", |b| {
        b.iter(|| SledMerkleTree::<PoseidonHasher>::open(&config, depth).map(|t| t.root()));
    });
    group.finish();
}

criterion_group!(
    benches,
    set_range,
    set_range_by_hasher,
    rehash_seq_par,
    proof,
    sled
);
criterion_main!(benches);
