//! Poseidon single and batched, light-poseidon vs zerokit vs ours, in one run; Keccak for scale.
//!
//! `cargo bench -p hasher --bench hash_pair` (add `-- interleave` for the interleave sweep only,
//! `-- lanes` for IFMA lanes against the scalar path by batch size).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use ark_std::{rand::SeedableRng, UniformRand};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hasher::{
    hash_pairs, hash_pairs_interleaved, ifma_available, poseidon, poseidon_light, FastPoseidon, Fr,
    Hasher, Keccak256Hasher, LightPoseidonHasher, PoseidonHasher, INTERLEAVE,
};

fn zerokit() -> zerokit_utils::poseidon::Poseidon<Fr> {
    // circomlib's (t, R_F, R_P, skip) for 1, 2 and 3 inputs.
    zerokit_utils::poseidon::Poseidon::<Fr>::from(&[(2, 8, 56, 0), (3, 8, 57, 0), (4, 8, 56, 0)])
}

/// Random field elements. Benchmarks cycle through many inputs: hashing one input over and
/// over lets the branch predictor learn its carries, which flatters every implementation
/// (by ~15% here) and hides what branchless arithmetic buys.
fn random_inputs(count: usize, width: usize) -> Vec<Vec<Fr>> {
    let mut rng = ark_std::rand::rngs::StdRng::seed_from_u64(42);
    (0..count)
        .map(|_| (0..width).map(|_| Fr::rand(&mut rng)).collect())
        .collect()
}

/// Runs `f` on the next input of `inputs` each iteration.
fn cycling<'a, R>(
    inputs: &'a [Vec<Fr>],
    mut f: impl FnMut(&'a [Fr]) -> R + 'a,
) -> impl FnMut() -> R + 'a {
    let mut next = 0;
    move || {
        next = (next + 1) % inputs.len();
        f(black_box(&inputs[next]))
    }
}

/// One hash of 1, 2 and 3 inputs with each implementation.
fn single(c: &mut Criterion) {
    let zerokit = zerokit();
    let mut group = c.benchmark_group("poseidon");
    for n in 1..=3usize {
        let inputs = random_inputs(1024, n);
        group.bench_function(BenchmarkId::new("light-poseidon", n), |b| {
            b.iter(cycling(&inputs, poseidon_light));
        });
        group.bench_function(BenchmarkId::new("zerokit", n), |b| {
            b.iter(cycling(&inputs, |x| zerokit.hash(x)));
        });
        group.bench_function(BenchmarkId::new("canopy", n), |b| {
            b.iter(cycling(&inputs, poseidon));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("hash_pair");
    let pairs = random_inputs(1024, 2);
    group.bench_function("light-poseidon", |b| {
        b.iter(cycling(&pairs, |x| {
            LightPoseidonHasher::hash_pair(&x[0], &x[1])
        }));
    });
    group.bench_function("canopy", |b| {
        b.iter(cycling(&pairs, |x| PoseidonHasher::hash_pair(&x[0], &x[1])));
    });
    let (kl, kr) = ([7u8; 32], [9u8; 32]);
    group.bench_function("keccak256", |b| {
        b.iter(|| Keccak256Hasher::hash_pair(black_box(&kl), black_box(&kr)));
    });
    group.finish();
}

const BATCH: usize = 256;

fn batch_inputs() -> (Vec<Fr>, Vec<Fr>, Vec<Fr>) {
    let pairs = random_inputs(BATCH, 2);
    let (left, right): (Vec<Fr>, Vec<Fr>) = pairs.iter().map(|p| (p[0], p[1])).unzip();
    let children = left
        .iter()
        .zip(&right)
        .flat_map(|(l, r)| [*l, *r])
        .collect();
    (left, right, children)
}

/// A level of 256 independent pairs: each peer in a loop, ours through `hash_level`.
fn batched(c: &mut Criterion) {
    let zerokit = zerokit();
    let (left, right, children) = batch_inputs();
    let mut out = vec![Fr::from(0u64); BATCH];
    let mut group = c.benchmark_group("batch256");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("light-poseidon", |b| {
        b.iter(|| LightPoseidonHasher::hash_level(black_box(&children), &mut out));
    });
    group.bench_function("zerokit", |b| {
        b.iter(|| {
            for (o, pair) in out.iter_mut().zip(children.chunks_exact(2)) {
                *o = zerokit.hash(black_box(pair)).unwrap_or_default();
            }
        });
    });
    group.bench_function("canopy-single", |b| {
        b.iter(|| {
            for (o, pair) in out.iter_mut().zip(children.chunks_exact(2)) {
                *o = PoseidonHasher::hash_pair(black_box(&pair[0]), &pair[1]);
            }
        });
    });
    group.bench_function("canopy-scalar", |b| {
        b.iter(|| {
            hash_pairs_interleaved::<INTERLEAVE>(black_box(&left), black_box(&right), &mut out)
        });
    });
    group.bench_function("canopy", |b| {
        b.iter(|| PoseidonHasher::hash_level(black_box(&children), &mut out));
    });
    drop(group);
    interleave(c, &left, &right);
    lanes(c, &left, &right);
}

/// IFMA lanes (`hash_pairs`, eight at a time where the CPU has them) against the scalar path
/// (`hash_pairs_interleaved::<INTERLEAVE>`) by batch size: where lanes start to pay
/// (`LANE_MIN_BATCH`) and what they give on a whole level.
fn lanes(c: &mut Criterion, left: &[Fr], right: &[Fr]) {
    let mut out = vec![Fr::from(0u64); BATCH];
    let mut group = c.benchmark_group("lanes");
    let path = if ifma_available() {
        "ifma"
    } else {
        "portable (no IFMA)"
    };
    for n in [1usize, 2, 3, 4, 8, 16, 64, 256] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("scalar", n), |b| {
            b.iter(|| {
                hash_pairs_interleaved::<INTERLEAVE>(black_box(&left[..n]), &right[..n], &mut out)
            });
        });
        group.bench_function(BenchmarkId::new(path, n), |b| {
            b.iter(|| hash_pairs(black_box(&left[..n]), &right[..n], &mut out));
        });
    }
    group.finish();
}

/// The permutation states `[0, inputs…]` of `T - 1`-input hashes, built once, outside the timed
/// loop.
fn states<const T: usize>(inputs: &[Vec<Fr>]) -> Vec<[Fr; T]> {
    inputs
        .iter()
        .map(|input| {
            let mut state = [Fr::from(0u64); T];
            state[1..].copy_from_slice(input);
            state
        })
        .collect()
}

/// 256 independent hashes of 1 and of 3 inputs (the RLN primitives' widths), each peer in a loop.
fn batched_by_width(c: &mut Criterion) {
    let zerokit = zerokit();
    let (Ok(two), Ok(four)) = (FastPoseidon::<2>::new(), FastPoseidon::<4>::new()) else {
        return;
    };
    let mut out = vec![Fr::from(0u64); BATCH];
    let mut group = c.benchmark_group("batch256_inputs");
    group.throughput(Throughput::Elements(BATCH as u64));
    for n in [1usize, 3] {
        let inputs = random_inputs(BATCH, n);
        group.bench_function(BenchmarkId::new("light-poseidon", n), |b| {
            b.iter(|| {
                for (o, x) in out.iter_mut().zip(&inputs) {
                    *o = poseidon_light(black_box(x)).unwrap_or_default();
                }
            });
        });
        group.bench_function(BenchmarkId::new("zerokit", n), |b| {
            b.iter(|| {
                for (o, x) in out.iter_mut().zip(&inputs) {
                    *o = zerokit.hash(black_box(x)).unwrap_or_default();
                }
            });
        });
        let (states2, states4) = (states::<2>(&inputs), states::<4>(&inputs));
        group.bench_function(BenchmarkId::new("canopy-scalar", n), |b| {
            b.iter(|| match n {
                1 => two.permute_first_scalar(black_box(&states2), &mut out),
                _ => four.permute_first_scalar(black_box(&states4), &mut out),
            });
        });
        group.bench_function(BenchmarkId::new("canopy", n), |b| {
            b.iter(|| match n {
                1 => two.permute_first_many(black_box(&states2), &mut out),
                _ => four.permute_first_many(black_box(&states4), &mut out),
            });
        });
    }
    group.finish();
}

/// The interleave width sweep behind `hasher::INTERLEAVE`.
fn interleave(c: &mut Criterion, left: &[Fr], right: &[Fr]) {
    let mut out = vec![Fr::from(0u64); BATCH];
    let mut group = c.benchmark_group("interleave");
    group.throughput(Throughput::Elements(BATCH as u64));
    macro_rules! width {
        ($($k:literal),*) => {$(
            group.bench_function(BenchmarkId::from_parameter($k), |b| {
                b.iter(|| hash_pairs_interleaved::<$k>(black_box(left), black_box(right), &mut out));
            });
        )*};
    }
    width!(1, 2, 3, 4, 6, 8);
    group.finish();
}

criterion_group!(benches, single, batched, batched_by_width);
criterion_main!(benches);
