//! Latency of one field product when every product depends on the previous one (a chain of
//! squarings): ark-ff's scalar `Fr` product against one IFMA lane product. This is what a single
//! dependent chain — the 20 hashes of one tree `set`, or the partial rounds of one Poseidon
//! permutation — could gain from lanes. Throughput (eight independent products) is measured by
//! the hasher's `-- lanes` bench.
//!
//! `cargo bench -p field-lanes --bench latency`
#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::hint::black_box;

use ark_bn254::Fr;
use ark_ff::Field;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const CHAIN: usize = 1000;

fn chain(c: &mut Criterion) {
    let x = Fr::from(0x1234_5678_9abc_u64).inverse().unwrap_or_default();
    let mut group = c.benchmark_group("dependent_products");
    group.throughput(Throughput::Elements(CHAIN as u64));
    group.bench_function(BenchmarkId::new("ark-ff square", CHAIN), |b| {
        b.iter(|| {
            let mut v = black_box(x);
            for _ in 0..CHAIN {
                v.square_in_place();
            }
            v
        });
    });
    group.bench_function(BenchmarkId::new("ark-ff mul", CHAIN), |b| {
        b.iter(|| {
            let mut v = black_box(x);
            for _ in 0..CHAIN {
                v *= v;
            }
            v
        });
    });
    if field_lanes::ifma_available() {
        group.bench_function(BenchmarkId::new("lane square", CHAIN), |b| {
            b.iter(|| field_lanes::power_chain(black_box(x), CHAIN, true));
        });
        group.bench_function(BenchmarkId::new("lane mul (CIOS)", CHAIN), |b| {
            b.iter(|| field_lanes::power_chain(black_box(x), CHAIN, false));
        });
    } else {
        eprintln!("no AVX-512 IFMA on this CPU: only ark-ff measured");
    }
    group.finish();
}

criterion_group!(benches, chain);
criterion_main!(benches);
