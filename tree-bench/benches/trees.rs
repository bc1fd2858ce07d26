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
use zerokit_utils::merkle_tree::{
    FullMerkleTree as ZkFull, OptimalMerkleTree as ZkOptimal, ZerokitMerkleTree,
};

const DEPTH: u8 = 20;

/// Runs `op` on `tree` and hands the tree back with the result, so criterion drops it after the
/// timed region: freeing a dense depth-20 tree (64 MiB) takes longer than a `set`.
fn keep<T, R>(mut tree: T, op: impl FnOnce(&mut T) -> R) -> (T, R) {
    let result = op(&mut tree);
    (tree, result)
}
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
                    |t| keep(t, |t| t.set_range(BASE, new.iter().copied())),
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
                    |t| keep(t, |t| t.set_range(BASE as usize, new.iter().copied())),
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
                |t| keep(t, |t| t.set_range(0, new.iter().copied())),
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

/// `set`, `delete` and `override_range` (2^12 writes + 2^8 removals) on every in-memory tree and
/// its zerokit counterpart, same prefilled state, each iteration from a fresh clone.
fn operations(c: &mut Criterion) {
    let depth = Depth::new(DEPTH).unwrap_or_else(|_| unreachable!());
    let base = leaves(0, BASE);
    let writes = leaves(BASE, 1 << 12);
    let removes: Vec<u64> = (0..1u64 << 8).map(|i| i * (BASE / 256)).collect();
    let mut group = c.benchmark_group("ops");
    group.sample_size(10);

    macro_rules! ours {
        ($name:literal, $tree:expr) => {{
            let mut tree = $tree;
            tree.set_range(0, base.iter().copied()).unwrap_or(());
            group.bench_function(BenchmarkId::new(concat!($name, "/set"), DEPTH), |b| {
                b.iter_batched(
                    || tree.clone(),
                    |t| keep(t, |t| t.set(BASE / 2, Fr::from(3u64))),
                    BatchSize::LargeInput,
                );
            });
            group.bench_function(BenchmarkId::new(concat!($name, "/delete"), DEPTH), |b| {
                b.iter_batched(
                    || tree.clone(),
                    |t| keep(t, |t| t.delete(BASE / 3)),
                    BatchSize::LargeInput,
                );
            });
            group.bench_function(
                BenchmarkId::new(concat!($name, "/override_range"), 1 << 12),
                |b| {
                    b.iter_batched(
                        || tree.clone(),
                        |t| {
                            keep(t, |t| {
                                t.override_range(
                                    BASE,
                                    writes.iter().copied(),
                                    removes.iter().copied(),
                                )
                            })
                        },
                        BatchSize::LargeInput,
                    );
                },
            );
        }};
    }
    macro_rules! theirs {
        ($name:literal, $tree:ty) => {{
            let mut tree = <$tree>::default(usize::from(DEPTH)).unwrap_or_else(|_| unreachable!());
            tree.set_range(0, base.iter().copied()).unwrap_or(());
            group.bench_function(BenchmarkId::new(concat!($name, "/set"), DEPTH), |b| {
                b.iter_batched(
                    || tree.clone(),
                    |t| keep(t, |t| t.set(BASE as usize / 2, Fr::from(3u64))),
                    BatchSize::LargeInput,
                );
            });
            group.bench_function(BenchmarkId::new(concat!($name, "/delete"), DEPTH), |b| {
                b.iter_batched(
                    || tree.clone(),
                    |t| keep(t, |t| t.delete(BASE as usize / 3)),
                    BatchSize::LargeInput,
                );
            });
            group.bench_function(
                BenchmarkId::new(concat!($name, "/override_range"), 1 << 12),
                |b| {
                    b.iter_batched(
                        || tree.clone(),
                        |t| {
                            keep(t, |t| {
                                t.override_range(
                                    BASE as usize,
                                    writes.iter().copied(),
                                    removes.iter().map(|&i| i as usize),
                                )
                            })
                        },
                        BatchSize::LargeInput,
                    );
                },
            );
        }};
    }
    ours!("optimal", OptimalMerkleTree::<PoseidonHasher>::new(depth));
    theirs!("zerokit-optimal", ZkOptimal::<ZkPoseidon>);
    ours!(
        "full",
        FullMerkleTree::<PoseidonHasher>::new(depth).unwrap_or_else(|_| unreachable!())
    );
    theirs!("zerokit-full", ZkFull::<ZkPoseidon>);
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
                |t| keep(t, |t| t.set_range(BASE, new.iter().copied())),
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
                |t| keep(t, |t| t.set_range(0, keccak_leaves.iter().copied())),
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
        // Alternating between two values keeps the tree's shape fixed: no drift across
        // iterations, and every iteration really writes (an unchanged chunk is not rewritten).
        let mut flip = false;
        group.bench_function(BenchmarkId::new("apply/set", BASE), |b| {
            b.iter(|| {
                flip = !flip;
                tree.set(BASE / 2, Fr::from(u64::from(flip) + 5))
                    .unwrap_or(());
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
    operations,
    rehash_seq_par,
    proof,
    sled
);
criterion_main!(benches);
