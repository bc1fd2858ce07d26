//! Poseidon2 per hash: ours (scalar, and eight at a time on IFMA lanes where the CPU has them)
//! against `zkhash` (HorizenLabs' reference, t = 3) and `taceo-poseidon2` (t = 2, 3, 4) in one
//! run, with circomlib Poseidon (ours) beside it for scale.
//!
//! `cargo bench -p hasher --bench poseidon2`. Batched rows hash 1,024 independent inputs per
//! iteration and report the time per hash (criterion's throughput in elements).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;
use std::str::FromStr;

use ark_std::{rand::SeedableRng, UniformRand};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hasher::{
    ifma_available, poseidon2_t2, poseidon2_t3, poseidon2_t4, set_poseidon_arithmetic, Arithmetic,
    Fr, Hasher, Poseidon2Hasher, Poseidon2T3Hasher, PoseidonHasher,
};
use zkhash::merkle_tree::merkle_tree_fp::MerkleTreeHash;

type ZkFr = zkhash::fields::bn256::FpBN256;
type TaceoFr = ark_bn254_06::Fr;

const BATCH: usize = 1024;

fn random(count: usize) -> Vec<Fr> {
    let mut rng = ark_std::rand::rngs::StdRng::seed_from_u64(42);
    (0..count).map(|_| Fr::rand(&mut rng)).collect()
}

fn convert<T: FromStr>(xs: &[Fr]) -> Vec<T> {
    xs.iter()
        .filter_map(|x| T::from_str(&x.to_string()).ok())
        .collect()
}

/// One pair hash (two inputs) by each implementation, cycling through 1,024 inputs.
fn single(c: &mut Criterion) {
    let xs = random(2 * BATCH);
    let zk_xs: Vec<ZkFr> = convert(&xs);
    let taceo_xs: Vec<TaceoFr> = convert(&xs);
    let zk = zkhash::poseidon2::poseidon2::Poseidon2::new(
        &zkhash::poseidon2::poseidon2_instance_bn256::POSEIDON2_BN256_PARAMS,
    );
    let mut group = c.benchmark_group("poseidon2/one");
    let mut i = 0;
    let mut next = move || {
        i = (i + 2) % (2 * BATCH);
        i
    };
    group.bench_function("zkhash t3 compress", |b| {
        b.iter(|| {
            let k = next();
            black_box(zk.compress(&[&zk_xs[k], &zk_xs[k + 1]]))
        });
    });
    group.bench_function("taceo t3 permutation", |b| {
        b.iter(|| {
            let k = next();
            let state = [taceo_xs[k], taceo_xs[k + 1], TaceoFr::from(0u64)];
            black_box(taceo_poseidon2::bn254::t3::permutation(&state)[0])
        });
    });
    group.bench_function("canopy t3 compress", |b| {
        b.iter(|| {
            let k = next();
            black_box(Poseidon2T3Hasher::hash_pair(&xs[k], &xs[k + 1]))
        });
    });
    group.bench_function("taceo t2 compress", |b| {
        b.iter(|| {
            let k = next();
            let state = [taceo_xs[k], taceo_xs[k + 1]];
            black_box(taceo_poseidon2::bn254::t2::permutation(&state)[0] + taceo_xs[k])
        });
    });
    group.bench_function("canopy t2 compress", |b| {
        b.iter(|| {
            let k = next();
            black_box(Poseidon2Hasher::hash_pair(&xs[k], &xs[k + 1]))
        });
    });
    group.bench_function("taceo t4 permutation", |b| {
        b.iter(|| {
            let k = next() % (2 * BATCH - 4);
            let state = [
                taceo_xs[k],
                taceo_xs[k + 1],
                taceo_xs[k + 2],
                taceo_xs[k + 3],
            ];
            black_box(taceo_poseidon2::bn254::t4::permutation(&state)[0])
        });
    });
    group.bench_function("canopy t4 permutation", |b| {
        b.iter(|| {
            let k = next() % (2 * BATCH - 4);
            let mut state = [xs[k], xs[k + 1], xs[k + 2], xs[k + 3]];
            poseidon2_t4().permute(&mut state);
            black_box(state[0])
        });
    });
    group.bench_function("canopy circomlib poseidon pair", |b| {
        b.iter(|| {
            let k = next();
            black_box(PoseidonHasher::hash_pair(&xs[k], &xs[k + 1]))
        });
    });
    group.finish();
}

/// 1,024 hashes per iteration through the batch entry points, on lanes (where present) and on
/// the portable path, per hash.
fn batched(c: &mut Criterion) {
    let xs = random(4 * BATCH);
    let mut group = c.benchmark_group("poseidon2/batch");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut paths = vec![("portable", Arithmetic::Portable)];
    if ifma_available() {
        paths.push(("ifma", Arithmetic::Ifma));
    }
    let states2: Vec<[Fr; 2]> = xs
        .chunks_exact(2)
        .take(BATCH)
        .map(|c| [c[0], c[1]])
        .collect();
    let states3: Vec<[Fr; 3]> = xs
        .chunks_exact(2)
        .take(BATCH)
        .map(|c| [c[0], c[1], Fr::from(0u64)])
        .collect();
    let states4: Vec<[Fr; 4]> = xs
        .chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect();
    let mut out = vec![Fr::from(0u64); BATCH];
    for (name, arithmetic) in paths {
        if set_poseidon_arithmetic(arithmetic).is_err() {
            continue;
        }
        group.bench_function(BenchmarkId::new("t2 compress level", name), |b| {
            b.iter(|| Poseidon2Hasher::hash_level(black_box(&xs[..2 * BATCH]), &mut out));
        });
        group.bench_function(BenchmarkId::new("t3 compress level", name), |b| {
            b.iter(|| Poseidon2T3Hasher::hash_level(black_box(&xs[..2 * BATCH]), &mut out));
        });
        group.bench_function(BenchmarkId::new("t2 permutation", name), |b| {
            b.iter(|| poseidon2_t2().permute_first_many(black_box(&states2), &mut out));
        });
        group.bench_function(BenchmarkId::new("t3 permutation", name), |b| {
            b.iter(|| poseidon2_t3().permute_first_many(black_box(&states3), &mut out));
        });
        group.bench_function(BenchmarkId::new("t4 permutation", name), |b| {
            b.iter(|| poseidon2_t4().permute_first_many(black_box(&states4), &mut out));
        });
        group.bench_function(BenchmarkId::new("circomlib poseidon level", name), |b| {
            b.iter(|| PoseidonHasher::hash_level(black_box(&xs[..2 * BATCH]), &mut out));
        });
    }
    let _ = set_poseidon_arithmetic(Arithmetic::Auto);
    group.finish();
}

criterion_group!(benches, single, batched);
criterion_main!(benches);
