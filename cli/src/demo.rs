//! `canopy demo`: a membership contract played against an embedded sled tree.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use hasher::Fr;
use rln_glue::primitives::{
    external_nullifier, hash_to_field_le, id_commitment, rate_commitment, IdentitySecret,
};
use rln_glue::witness::RlnWitness;
use serde_json::json;
use tree_core::{Depth, History, MerkleTree};
use tree_engines::DbConfig;

use crate::events::{fr_hex, Block};
use crate::ops::{apply_block, last_block, Tree};
use crate::{CliError, Output};

const LIMIT: u64 = 100;

/// A demo member's secret (deterministic: this is a demo, not a wallet).
fn secret(member: u64, fork: u64) -> IdentitySecret {
    IdentitySecret::new(Fr::from(member * 7919 + fork * 1_000_003 + 1))
}

fn leaf(member: u64, fork: u64) -> Fr {
    rate_commitment(id_commitment(&secret(member, fork)), Fr::from(LIMIT))
}

/// Block `number` of fork `fork`: `per_block` registrations and, past the first block, one
/// removal of an earlier member.
fn block(number: u64, first: u64, per_block: u64, fork: u64) -> Block {
    Block {
        line: 0,
        number,
        register: (first..first + per_block).map(|m| leaf(m, fork)).collect(),
        remove: if first > 0 {
            vec![first / 2]
        } else {
            Vec::new()
        },
    }
}

/// Runs the demo.
///
/// # Errors
/// Bad arguments, a locked or foreign database, storage errors.
pub fn run(
    db: Option<PathBuf>,
    members: u64,
    blocks: u64,
    engine: tree_engines::Engine,
    settings: &crate::config::CanopyConfig,
    json: bool,
) -> Result<Output, CliError> {
    if blocks < 3 || members < blocks {
        return Err(CliError::Usage(
            "need --blocks >= 3 and --members >= --blocks".into(),
        ));
    }
    let temp = tempfile::tempdir().map_err(|source| CliError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let path = db.unwrap_or_else(|| temp.path().join("canopy-db"));
    let config = DbConfig::new(&path).engine(engine);
    let depth = Depth::new(20)?;
    let mut log = Vec::new();
    let mut say = |line: String| {
        if !json {
            // A reader that went away (`canopy demo | head`) is not a failure of the demo.
            let _ = writeln!(std::io::stdout(), "{line}");
        }
        log.push(line);
    };
    say(format!(
        "database {} (depth 20, Poseidon/BN254, {engine})",
        path.display()
    ));

    let mut tree = Tree::open(&config, depth)?;
    let start_block = last_block(&tree).unwrap_or(0);
    let per_block = members.div_ceil(blocks);
    let started = Instant::now();
    let bar = if json {
        indicatif::ProgressBar::hidden()
    } else {
        crate::progress::blocks_bar(blocks)
    };
    for n in 1..=blocks {
        let b = block(start_block + n, tree.next_index(), per_block, 0);
        apply_block(&mut tree, &b)?;
        bar.set_position(n);
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    say(format!(
        "applied {blocks} blocks ({} registrations, {} removals), each one atomic batch + checkpoint, in {secs:.2} s",
        per_block * blocks,
        blocks - 1
    ));

    // A reorg: the last two blocks are orphaned and replaced by two different ones.
    let last = start_block + blocks;
    let orphaned_root = tree.root();
    let started = Instant::now();
    tree.rewind_to(last - 2)?;
    let rewind_ms = started.elapsed().as_secs_f64() * 1e3;
    for n in [last - 1, last] {
        let b = block(n, tree.next_index(), per_block, 1);
        apply_block(&mut tree, &b)?;
    }
    say(format!(
        "reorg: rewound blocks {}..={last} in {rewind_ms:.1} ms and replayed two different blocks; orphaned root acceptable: {}",
        last - 1,
        tree.is_acceptable_root(&orphaned_root)?
    ));

    let root = tree.root();
    tree.close()?;
    drop(tree);
    let started = Instant::now();
    let tree = Tree::open(&config, depth)?;
    let reopen_ms = started.elapsed().as_secs_f64() * 1e3;
    say(format!(
        "reopened in {reopen_ms:.1} ms: {} members, last block {:?}, same root: {}, {} acceptable roots",
        tree.next_index(),
        last_block(&tree),
        tree.root() == root,
        tree.roots()?.len()
    ));

    // A member of the replayed last block proves membership.
    let member = tree.next_index() - 1;
    let x = hash_to_field_le(b"hello from canopy demo");
    let ext = external_nullifier(Fr::from(last), hash_to_field_le(b"canopy-demo"));
    let witness = RlnWitness::from_tree(
        &tree,
        member,
        &secret(member, 1),
        Fr::from(LIMIT),
        Fr::from(0u64),
        x,
        ext,
    )
    .map_err(CliError::rln)?;
    let merkle_ok = tree.verify_proof(&tree.proof(member)?, &tree.get(member)?);
    say(format!(
        "member {member}: Merkle witness of {} siblings, verified: {merkle_ok}",
        witness.path_elements.len()
    ));
    let (rln, verify_request) = rln_proof(&tree, &witness, settings, &mut say)?.unzip();
    Ok(Output {
        text: String::new(),
        json: json!({
            "db": path,
            "blocks": blocks,
            "members": tree.next_index(),
            "root": fr_hex(&tree.root()),
            "reopen_ms": reopen_ms,
            "merkle_witness_verified": merkle_ok,
            "rln_proof_verified": rln,
            // The proof as `POST /verify` of `canopy serve --db <this db>` takes it.
            "verify_request": verify_request,
            "log": log,
        }),
    })
}

/// A real RLN proof by our prover (`rln_glue::proving`: rln 3.0.0's circuit and key, fixed-base
/// tables), checked by our verifying-key-only verifier against the tree's root window; returns
/// the verdict and the proof as a `POST /verify` body.
#[cfg(feature = "rln")]
fn rln_proof(
    tree: &Tree,
    witness: &RlnWitness,
    config: &crate::config::CanopyConfig,
    say: &mut impl FnMut(String),
) -> Result<Option<(bool, serde_json::Value)>, CliError> {
    use rln_glue::verifier::RlnVerifier;
    let started = Instant::now();
    let prover = rln_glue::proving::RlnProver::load_with(&config.prover).map_err(CliError::rln)?;
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let started = Instant::now();
    let (proof, _) = prover
        .prove(witness, &mut rand::rngs::OsRng)
        .map_err(CliError::rln)?;
    let prove_ms = started.elapsed().as_secs_f64() * 1e3;
    let verifier = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes())
        .map_err(CliError::rln)?;
    let values = witness.public_values();
    let started = Instant::now();
    let verdict = verifier.verify_against(&proof, &values, &witness.x, tree);
    let verify_ms = started.elapsed().as_secs_f64() * 1e3;
    say(format!(
        "RLN proof (Groth16, rln 3.0.0 circuit and key, our prover: tables built once in {load_ms:.0} ms) generated in {prove_ms:.0} ms, verified against the root window in {verify_ms:.1} ms: {}",
        match &verdict {
            Ok(()) => "valid".to_owned(),
            Err(e) => format!("refused ({e})"),
        }
    ));
    let request = json!({
        "proof": format!("0x{}", rln_glue::verifier::proof_to_bytes(&proof).iter().map(|b| format!("{b:02x}")).collect::<String>()),
        "y": fr_hex(&values.y),
        "root": fr_hex(&values.root),
        "nullifier": fr_hex(&values.nullifier),
        "x": fr_hex(&values.x),
        "external_nullifier": fr_hex(&values.external_nullifier),
    });
    Ok(Some((verdict.is_ok(), request)))
}

/// Without the `rln` feature the demo stops at the Merkle witness.
#[cfg(not(feature = "rln"))]
fn rln_proof(
    _: &Tree,
    _: &RlnWitness,
    _: &crate::config::CanopyConfig,
    say: &mut impl FnMut(String),
) -> Result<Option<(bool, serde_json::Value)>, CliError> {
    say("RLN proof skipped (built without the `rln` feature)".into());
    Ok(None)
}
