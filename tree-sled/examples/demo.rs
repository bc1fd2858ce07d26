//! Canopy's main job for now: a membership tree on sled, driven like an RLN node drives it.
//!
//! `cargo run --release -p tree-sled --example demo -- [--db DIR] [--members N] [--blocks B]`
//!
//! Plays B blocks of registrations and removals (each block one atomic batch carrying its block
//! number as metadata), closes and reopens the database, and proves and verifies one member.
//! Without `--db` the database lives in a fresh temporary directory.

use std::error::Error;
use std::time::Instant;

use hasher::{poseidon, Fr, PoseidonHasher};
use tree_core::{Depth, MerkleTree, UpdateBatch};
use tree_sled::{SledConfig, SledMerkleTree};

struct Args {
    db: Option<std::path::PathBuf>,
    members: u64,
    blocks: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: None,
        members: 20_000,
        blocks: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => args.db = Some(value()?.into()),
            "--members" => {
                args.members = value()?.parse().map_err(|e| format!("--members: {e}"))?
            }
            "--blocks" => args.blocks = value()?.parse().map_err(|e| format!("--blocks: {e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.blocks == 0 {
        return Err("--blocks must be at least 1".into());
    }
    Ok(args)
}

/// A member's leaf: `rate_commitment = Poseidon([Poseidon([secret]), limit])`.
fn leaf(member: u64) -> Result<Fr, Box<dyn Error>> {
    let id_commitment = poseidon(&[Fr::from(member + 1)])?;
    Ok(poseidon(&[id_commitment, Fr::from(100u64)])?)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()
        .map_err(|e| format!("{e}\nusage: demo [--db DIR] [--members N] [--blocks B]"))?;
    let temp = tempfile::tempdir()?;
    let path = args
        .db
        .clone()
        .unwrap_or_else(|| temp.path().join("canopy-db"));
    let depth = Depth::new(20)?;
    let config = SledConfig::new(&path);
    println!(
        "database: {} (depth {depth}, Poseidon/BN254)",
        path.display()
    );

    let started = Instant::now();
    let mut tree = SledMerkleTree::<PoseidonHasher>::open(&config, depth)?;
    println!(
        "opened in {:.1} ms with {} members already",
        started.elapsed().as_secs_f64() * 1e3,
        tree.next_index()
    );

    let per_block = args.members.div_ceil(args.blocks);
    let started = Instant::now();
    let mut removed = 0u64;
    for block in 1..=args.blocks {
        let first = tree.next_index();
        let mut batch = UpdateBatch::new();
        let leaves = (first..first + per_block)
            .map(leaf)
            .collect::<Result<Vec<_>, _>>()?;
        batch.set_range(first, leaves);
        if first > 0 {
            batch.delete(first / 2); // one member leaves per block
            removed += 1;
        }
        tree.apply_with_metadata(batch, block.to_be_bytes().to_vec())?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "applied {} blocks: {} registrations, {removed} removals in {secs:.2} s ({:.1} µs per member)",
        args.blocks,
        per_block * args.blocks,
        secs * 1e6 / (per_block * args.blocks) as f64
    );
    let root = tree.root();
    tree.close()?;
    drop(tree);

    let started = Instant::now();
    let tree = SledMerkleTree::<PoseidonHasher>::open(&config, depth)?;
    let reopen_ms = started.elapsed().as_secs_f64() * 1e3;
    let block = tree.metadata()?;
    println!(
        "reopened in {reopen_ms:.1} ms: {} members, last block {:?}, root unchanged: {}",
        tree.next_index(),
        <[u8; 8]>::try_from(block.as_slice())
            .map(u64::from_be_bytes)
            .ok(),
        tree.root() == root
    );

    let member = tree.next_index() - 1;
    let started = Instant::now();
    let proof = tree.proof(member)?;
    let proof_us = started.elapsed().as_secs_f64() * 1e6;
    let ok = tree.verify_proof(&proof, &leaf(member)?);
    println!(
        "proof for member {member}: {} siblings in {proof_us:.0} µs, verifies: {ok}",
        proof.len()
    );
    println!(
        "integrity check: {} mismatches",
        tree.verify_integrity()?.len()
    );
    if !ok || tree.root() != root {
        return Err("demo check failed".into());
    }
    Ok(())
}
