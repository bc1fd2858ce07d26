//! LeanIMT side by side, one run, the same hash (circomlib Poseidon) for everyone: ours
//! (`tree_core::lean::LeanImt` over the sparse engine tree at depth 32, whole levels hashed on
//! IFMA lanes where the CPU has them, large levels on every core) against zk-kit's Rust crate
//! (`zk-kit-lean-imt`, given our fastest scalar Poseidon) and the `lean-imt` port (string nodes,
//! its own API; no proofs). Runs interleaved round-robin; medians (min–max).
//!
//! `cargo run --release -p tree-bench --bin lean_imt [-- --log2 16 --reps 5 --portable]`

use std::time::{Duration, Instant};

use clap::Parser;
use hasher::{fr_from_le_bytes, fr_to_le_bytes, Arithmetic, Fr, Hasher, Lean, PoseidonHasher};
use tree_bench::{fmt_stats, leaves, time_round_robin, Stats};
use tree_core::lean::LeanImt;
use tree_core::{Depth, OptimalMerkleTree};
use zk_kit_lean_imt::hashed_tree::{HashedLeanIMT, LeanIMTHasher};

/// What to measure.
#[derive(Parser, Debug)]
struct Args {
    /// Leaves of the batch insert and of the tree the single operations run on (2^log2).
    #[arg(long, default_value_t = 16)]
    log2: u32,
    /// Repetitions of each batch insert.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Single operations timed per implementation.
    #[arg(long, default_value_t = 200)]
    singles: usize,
    /// Our hashing on ark-ff only (what a CPU without IFMA runs).
    #[arg(long)]
    portable: bool,
}

type Ours = LeanImt<OptimalMerkleTree<Lean<PoseidonHasher>>>;

fn ours() -> Ours {
    LeanImt::new(OptimalMerkleTree::new(
        Depth::new(32).unwrap_or_else(|e| panic!("{e}")),
    ))
}

/// zk-kit's hasher: circomlib Poseidon on the 32-byte little-endian encodings.
struct ZkPoseidon;

impl LeanIMTHasher<32> for ZkPoseidon {
    fn hash(input: &[u8]) -> [u8; 32] {
        let left = fr_from_le_bytes(&input[..32]).unwrap_or_default();
        let right = fr_from_le_bytes(&input[32..]).unwrap_or_default();
        fr_to_le_bytes(&PoseidonHasher::hash_pair(&left, &right))
    }
}

type ZkKit = HashedLeanIMT<32, ZkPoseidon>;

fn zk_kit() -> ZkKit {
    HashedLeanIMT::new(&[], ZkPoseidon).unwrap_or_else(|e| panic!("{e:?}"))
}

/// The port's hash function: decimal strings in and out.
fn port_hash(nodes: Vec<String>) -> String {
    let parse = |s: &String| s.parse::<Fr>().unwrap_or_default();
    PoseidonHasher::hash_pair(&parse(&nodes[0]), &parse(&nodes[1])).to_string()
}

fn port() -> lean_imt_port::LeanIMT {
    lean_imt_port::LeanIMT::new(port_hash)
}

fn ratio(theirs: Duration, ours: Duration) -> String {
    format!("{:.1}x", theirs.as_secs_f64() / ours.as_secs_f64())
}

/// Median per operation of `n` single operations, each timed.
fn singles(n: usize, mut op: impl FnMut(usize)) -> Stats {
    let samples = (0..n)
        .map(|i| {
            let started = Instant::now();
            op(i);
            started.elapsed()
        })
        .collect();
    Stats::from_samples(samples)
}

fn main() {
    let args = Args::parse();
    if args.portable {
        hasher::set_poseidon_arithmetic(Arithmetic::Portable).unwrap_or_else(|e| panic!("{e}"));
    }
    let n = 1u64 << args.log2;
    let batch = leaves(1, n);
    let batch_bytes: Vec<[u8; 32]> = batch.iter().map(fr_to_le_bytes).collect();
    let batch_strings: Vec<String> = batch.iter().map(ToString::to_string).collect();
    println!(
        "LeanIMT, 2^{} leaves, circomlib Poseidon; ours on {} ({} threads); {} reps",
        args.log2,
        if !args.portable && hasher::ifma_available() {
            "IFMA lanes"
        } else {
            "ark-ff"
        },
        rayon::current_num_threads(),
        args.reps
    );
    println!();
    println!(
        "| operation | Canopy | zk-kit-lean-imt | lean-imt | zk-kit / Canopy | lean-imt / Canopy |"
    );
    println!("|---|---|---|---|---|---|");

    // Batch insert into an empty tree; the trees are built untimed and moved into the timed ops.
    let (mut a, mut b, mut c) = (Some(ours()), Some(zk_kit()), Some(port()));
    let mut roots = (None, None, None);
    let stats = time_round_robin(
        args.reps,
        &mut [
            &mut || {
                let mut t = a.take().unwrap_or_else(ours);
                t.insert_many(&batch).unwrap_or_else(|e| panic!("{e}"));
                roots.0 = t.root();
                a = Some(ours());
                drop(t);
            },
            &mut || {
                let mut t = b.take().unwrap_or_else(zk_kit);
                t.insert_many(&batch_bytes)
                    .unwrap_or_else(|e| panic!("{e:?}"));
                roots.1 = t.root();
                b = Some(zk_kit());
            },
            &mut || {
                let mut t = c.take().unwrap_or_else(port);
                t.insert_many(batch_strings.clone())
                    .unwrap_or_else(|e| panic!("{e}"));
                roots.2 = t.root();
                c = Some(port());
            },
        ],
    );
    let (ours_root, zk_root, port_root) = roots;
    assert_eq!(
        ours_root.map(|r| fr_to_le_bytes(&r)),
        zk_root,
        "zk-kit's root differs"
    );
    assert_eq!(
        ours_root.map(|r| r.to_string()),
        port_root,
        "lean-imt's root differs"
    );
    println!(
        "| insert_many 2^{} | {} | {} | {} | {} | {} |",
        args.log2,
        fmt_stats(stats[0]),
        fmt_stats(stats[1]),
        fmt_stats(stats[2]),
        ratio(stats[1].median, stats[0].median),
        ratio(stats[2].median, stats[0].median)
    );

    // Single operations on the 2^log2 trees.
    let mut our_tree = ours();
    our_tree
        .insert_many(&batch)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut zk_tree = zk_kit();
    zk_tree
        .insert_many(&batch_bytes)
        .unwrap_or_else(|e| panic!("{e:?}"));
    let mut port_tree = port();
    port_tree
        .insert_many(batch_strings.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    let extra = leaves(n + 1, args.singles as u64);
    let insert = [
        singles(args.singles, |i| {
            our_tree.insert(extra[i]).unwrap_or_else(|e| panic!("{e}"))
        }),
        singles(args.singles, |i| zk_tree.insert(&fr_to_le_bytes(&extra[i]))),
        singles(args.singles, |i| {
            port_tree
                .insert(extra[i].to_string())
                .unwrap_or_else(|e| panic!("{e}"));
        }),
    ];
    assert_eq!(our_tree.root().map(|r| fr_to_le_bytes(&r)), zk_tree.root());
    println!(
        "| insert one (tree of 2^{}) | {} | {} | {} | {} | {} |",
        args.log2,
        fmt_stats(insert[0]),
        fmt_stats(insert[1]),
        fmt_stats(insert[2]),
        ratio(insert[1].median, insert[0].median),
        ratio(insert[2].median, insert[0].median)
    );

    // Updates: indices spread over the tree; the port takes the old leaf and its siblings (from
    // our proof, prepared untimed), as its API asks.
    let size = our_tree.size();
    let index = |i: usize| (i as u64 * 7919) % size;
    let fresh = leaves(10 * n, args.singles as u64);
    let mut port_args = Vec::with_capacity(args.singles);
    let mut shadow = our_tree.clone();
    for (i, leaf) in fresh.iter().enumerate() {
        let proof = shadow.proof(index(i)).unwrap_or_else(|e| panic!("{e}"));
        port_args.push((
            proof.leaf.to_string(),
            proof
                .siblings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
        ));
        shadow
            .update(index(i), *leaf)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let update = [
        singles(args.singles, |i| {
            our_tree
                .update(index(i), fresh[i])
                .unwrap_or_else(|e| panic!("{e}"))
        }),
        singles(args.singles, |i| {
            zk_tree
                .update(index(i) as usize, &fr_to_le_bytes(&fresh[i]))
                .unwrap_or_else(|e| panic!("{e:?}"));
        }),
        singles(args.singles, |i| {
            let (old, siblings) = &port_args[i];
            port_tree
                .update(old, fresh[i].to_string(), siblings)
                .unwrap_or_else(|e| panic!("{e}"));
        }),
    ];
    assert_eq!(our_tree.root().map(|r| fr_to_le_bytes(&r)), zk_tree.root());
    assert_eq!(our_tree.root().map(|r| r.to_string()), port_tree.root());
    println!(
        "| update one | {} | {} | {} | {} | {} |",
        fmt_stats(update[0]),
        fmt_stats(update[1]),
        fmt_stats(update[2]),
        ratio(update[1].median, update[0].median),
        ratio(update[2].median, update[0].median)
    );

    let proof = [
        singles(args.singles, |i| {
            std::hint::black_box(our_tree.proof(index(i)).unwrap_or_else(|e| panic!("{e}")));
        }),
        singles(args.singles, |i| {
            std::hint::black_box(
                zk_tree
                    .generate_proof(index(i) as usize)
                    .unwrap_or_else(|e| panic!("{e:?}")),
            );
        }),
    ];
    println!(
        "| proof | {} | {} | — | {} | — |",
        fmt_stats(proof[0]),
        fmt_stats(proof[1]),
        ratio(proof[1].median, proof[0].median)
    );
}
