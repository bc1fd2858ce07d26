//! ns per `hash_pair` for each hasher (and zerokit's Poseidon for reference, same run).
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use hasher::{FastPoseidonHasher, Fr, Hasher, Keccak256Hasher, PoseidonHasher};

fn hash_pair(c: &mut Criterion) {
    let mut group = c.benchmark_group("hash_pair");
    let (l, r) = (Fr::from(12345u64), Fr::from(67890u64));
    group.bench_function("poseidon/light-poseidon", |b| {
        b.iter(|| PoseidonHasher::hash_pair(black_box(&l), black_box(&r)));
    });
    group.bench_function("poseidon/fast", |b| {
        b.iter(|| FastPoseidonHasher::hash_pair(black_box(&l), black_box(&r)));
    });
    let zerokit = zerokit_utils::poseidon::Poseidon::<Fr>::from(&[(3, 8, 57, 0)]);
    group.bench_function("poseidon/zerokit", |b| {
        b.iter(|| zerokit.hash(black_box(&[l, r])));
    });
    let (kl, kr) = ([7u8; 32], [9u8; 32]);
    group.bench_function("keccak256", |b| {
        b.iter(|| Keccak256Hasher::hash_pair(black_box(&kl), black_box(&kr)));
    });
    group.finish();
}

criterion_group!(benches, hash_pair);
criterion_main!(benches);
