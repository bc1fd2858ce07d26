//! kill -9 the writer: after reopen the tree equals the model after exactly k batches, with k at
//! least the last acknowledged batch (durable mode), and its stored nodes are self-consistent.
//!
//! The test binary re-runs itself as the writer child (`CANOPY_CRASH_CHILD` set, the engine in
//! `CANOPY_CRASH_ENGINE`), so no extra binary is needed. Every test runs on sled and on redb,
//! each with its own record. Trials per engine: `CANOPY_CRASH_TRIALS` (default 100).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use integration_tests::engines::TestEngine;
use integration_tests::report;
use integration_tests::steps::{batch, history_step, HISTORY};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tree_core::persistent::PersistentTree;
use tree_core::testing::MixHasher;
use tree_core::{Depth, History, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_postgres::PgStore;
use tree_redb::RedbStore;
use tree_sled::SledStore;

const DEPTH: u8 = 16;

fn open<S: TestEngine>(dir: &std::path::Path) -> PersistentTree<MixHasher, S> {
    S::open_tree(dir, Depth::new(DEPTH).unwrap()).unwrap()
}

/// History mode writer: runs history steps 1, 2, ... and prints `ack s` after each.
#[test]
fn crash_child_history_writer() {
    let (Ok(dir), Ok(seed)) = (
        std::env::var("CANOPY_CRASH_HISTORY_CHILD"),
        std::env::var("CANOPY_CRASH_SEED"),
    ) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap();
    match std::env::var("CANOPY_CRASH_ENGINE").as_deref() {
        Ok("redb") => history_writer::<RedbStore>(&dir, seed),
        Ok("postgres") => history_writer::<PgStore>(&dir, seed),
        _ => history_writer::<SledStore>(&dir, seed),
    }
}

fn history_writer<S: TestEngine>(dir: &str, seed: u64) {
    let mut tree = open::<S>(dir.as_ref());
    tree.set_history_config(HISTORY).unwrap();
    let mut out = std::io::stdout().lock();
    for s in 1.. {
        history_step(&mut tree, seed, s).unwrap();
        writeln!(out, "ack {s}").unwrap();
        out.flush().unwrap();
    }
}

/// Spawns this test binary as `child_test` with `env` set to a fresh directory, kills it with
/// SIGKILL after a random delay, and returns the directory and the last acknowledged step.
fn run_and_kill<S: TestEngine>(
    env: &S::Env,
    child_test: &str,
    env_var: &str,
    seed: u64,
    rng: &mut StdRng,
) -> (tempfile::TempDir, u64) {
    let exe = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    S::prepare_dir(env, dir.path());
    let mut child = Command::new(&exe)
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(env_var, dir.path())
        .env("CANOPY_CRASH_ENGINE", S::NAME)
        .env("CANOPY_CRASH_SEED", seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut last = 0u64;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints `test NAME ... ` without a newline before the test runs, so the
            // first ack shares its line: look for the marker anywhere in the line.
            if let Some((_, k)) = line.rsplit_once("ack ") {
                last = k.trim().parse().unwrap_or(last);
            }
        }
        last
    });
    // Kill at a random moment: sometimes before the first step, mostly mid-stream.
    std::thread::sleep(Duration::from_millis(rng.gen_range(5..250)));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    (dir, reader.join().unwrap())
}

fn trials() -> u64 {
    std::env::var("CANOPY_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// kill -9 during applies, checkpoints (with pruning) and rewinds: after reopen the tree, its
/// checkpoints and its undo frames equal the model after some prefix of steps, never before the
/// last acknowledged one; a crash during a rewind leaves the old or the rewound state, and
/// rewinding the reopened tree to its oldest checkpoint gives the model's state there.
#[test]
fn kill_9_during_checkpoints_and_rewinds() {
    checkpoints_and_rewinds::<SledStore>();
}

/// The same on redb.
#[test]
fn kill_9_during_redb_checkpoints_and_rewinds() {
    checkpoints_and_rewinds::<RedbStore>();
}

/// The same on Postgres (a throw-away cluster; each trial its own tree in it).
#[test]
fn kill_9_during_postgres_checkpoints_and_rewinds() {
    checkpoints_and_rewinds::<PgStore>();
}

fn is_child() -> bool {
    std::env::var("CANOPY_CRASH_HISTORY_CHILD").is_ok()
        || std::env::var("CANOPY_CRASH_CHILD").is_ok()
}

fn checkpoints_and_rewinds<S: TestEngine>() {
    if is_child() {
        return;
    }
    let env = S::start_env();
    let trials = trials() / 2;
    let mut rng = StdRng::seed_from_u64(0x415);
    let (mut torn, mut lost, mut max_acked, mut rewinds_seen) = (0u64, 0u64, 0, 0u64);
    let depth = Depth::new(DEPTH).unwrap();
    for trial in 0..trials {
        let seed = rng.gen::<u64>();
        let (dir, acked) = run_and_kill::<S>(
            &env,
            "crash_child_history_writer",
            "CANOPY_CRASH_HISTORY_CHILD",
            seed,
            &mut rng,
        );
        max_acked = max_acked.max(acked);
        let mut tree = open::<S>(dir.path());
        let observe = |root: u64, next: u64, meta: Vec<u8>, ids: Vec<u64>| (root, next, meta, ids);
        let got = observe(
            tree.root(),
            tree.next_index(),
            tree.metadata().unwrap(),
            tree.checkpoints().unwrap().iter().map(|c| c.id).collect(),
        );
        let mut model = OptimalMerkleTree::<MixHasher>::new(depth);
        model.set_history_config(HISTORY).unwrap();
        let mut matched = None;
        let mut snapshot = None;
        let mut candidates = Vec::new();
        for s in 0..=acked + 1 {
            if s > 0 && history_step(&mut model, seed, s).unwrap() {
                rewinds_seen += 1;
            }
            let want = observe(
                model.root(),
                model.next_index(),
                model.metadata().unwrap(),
                model.checkpoints().unwrap().iter().map(|c| c.id).collect(),
            );
            if want == got {
                matched = Some(s);
                snapshot = Some(model.clone());
            }
            candidates.push(want);
        }
        let (Some(s), Some(mut model)) = (matched, snapshot) else {
            torn += 1;
            // What was found and what each prefix would be, so a rare failure can be read.
            eprintln!(
                "trial {trial}: state matches no step prefix (acked {acked}): {got:?}, prefixes {candidates:?}"
            );
            continue;
        };
        if s < acked {
            lost += 1;
            eprintln!("trial {trial}: reopened at step {s} but {acked} were acknowledged");
            continue;
        }
        assert!(tree.verify_integrity().unwrap().is_empty(), "trial {trial}");
        // The undo frames on disk are complete: rewinding to the oldest checkpoint gives the
        // model's state there.
        if let Some(oldest) = model.checkpoints().unwrap().first().map(|c| c.id) {
            tree.rewind_to(oldest).unwrap();
            model.rewind_to(oldest).unwrap();
            assert_eq!(
                tree.root(),
                model.root(),
                "trial {trial}: rewind after reopen"
            );
            assert_eq!(tree.next_index(), model.next_index(), "trial {trial}");
            assert_eq!(
                tree.empty_leaves_indices().unwrap(),
                model.empty_leaves_indices().unwrap(),
                "trial {trial}"
            );
            assert_eq!(tree.metadata().unwrap(), model.metadata().unwrap());
        }
    }
    println!(
        "kill -9 with history ({}): {trials} trials, {torn} torn, {lost} lost (max acknowledged step \
         {max_acked}, {rewinds_seen} rewinds replayed)",
        S::NAME
    );
    report::record(
        &S::report_suite("kill9"),
        "history",
        &[("trials", trials), ("torn", torn), ("lost", lost)],
        &[],
    );
    assert_eq!((torn, lost), (0, 0));
    assert!(
        max_acked > 0 && rewinds_seen > 0,
        "the writer did too little to prove anything"
    );
}

/// The writer: applies batches 1, 2, ... and prints `ack k` after each commit returns.
#[test]
fn crash_child_writer() {
    let (Ok(dir), Ok(seed)) = (
        std::env::var("CANOPY_CRASH_CHILD"),
        std::env::var("CANOPY_CRASH_SEED"),
    ) else {
        return; // not a child: nothing to do
    };
    let seed: u64 = seed.parse().unwrap();
    match std::env::var("CANOPY_CRASH_ENGINE").as_deref() {
        Ok("redb") => batch_writer::<RedbStore>(&dir, seed),
        Ok("postgres") => batch_writer::<PgStore>(&dir, seed),
        _ => batch_writer::<SledStore>(&dir, seed),
    }
}

fn batch_writer<S: TestEngine>(dir: &str, seed: u64) {
    let mut tree = open::<S>(dir.as_ref());
    let mut out = std::io::stdout().lock();
    for k in 1.. {
        tree.apply(batch(seed, k, tree.next_index())).unwrap();
        writeln!(out, "ack {k}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn kill_9_never_tears_a_batch() {
    never_tears_a_batch::<SledStore>();
}

/// The same on redb.
#[test]
fn kill_9_never_tears_a_redb_batch() {
    never_tears_a_batch::<RedbStore>();
}

/// The same on Postgres.
#[test]
fn kill_9_never_tears_a_postgres_batch() {
    never_tears_a_batch::<PgStore>();
}

fn never_tears_a_batch<S: TestEngine>() {
    if is_child() {
        return;
    }
    let env = S::start_env();
    let trials = trials();
    let mut rng = StdRng::seed_from_u64(0xc4a5);
    let (mut torn, mut lost, mut max_acked) = (0u64, 0u64, 0);
    for trial in 0..trials {
        let seed = rng.gen::<u64>();
        let (dir, acked) = run_and_kill::<S>(
            &env,
            "crash_child_writer",
            "CANOPY_CRASH_CHILD",
            seed,
            &mut rng,
        );
        max_acked = max_acked.max(acked);

        // Reopen and find which prefix of batches the store holds.
        let tree = open::<S>(dir.path());
        let mut model = OptimalMerkleTree::<MixHasher>::new(Depth::new(DEPTH).unwrap());
        let mut k = 0u64;
        let mut found = model.root() == tree.root() && tree.next_index() == 0;
        while !found && k < acked + 2 {
            k += 1;
            let next = model.next_index();
            model.apply(batch(seed, k, next)).unwrap();
            found = model.root() == tree.root();
        }
        if !found {
            torn += 1;
            eprintln!("trial {trial}: root matches no batch prefix (acked {acked})");
            continue;
        }
        if k < acked {
            lost += 1;
            eprintln!("trial {trial}: reopened at batch {k} but {acked} were acknowledged");
        }
        assert_eq!(tree.next_index(), model.next_index(), "trial {trial}");
        assert_eq!(
            tree.empty_leaves_indices().unwrap(),
            model.empty_leaves_indices().unwrap(),
            "trial {trial}"
        );
        let want_meta = if k == 0 {
            Vec::new()
        } else {
            k.to_be_bytes().to_vec()
        };
        assert_eq!(
            tree.metadata().unwrap(),
            want_meta,
            "trial {trial}: metadata of batch {k}"
        );
        assert!(
            tree.verify_integrity().unwrap().is_empty(),
            "trial {trial}: stored nodes inconsistent"
        );
        // The stored root equals the root recomputed from the stored leaves alone.
        let mut rebuilt = OptimalMerkleTree::<MixHasher>::new(Depth::new(DEPTH).unwrap());
        let leaves: Vec<u64> = (0..tree.next_index())
            .map(|i| tree.get(i).unwrap())
            .collect();
        rebuilt.set_range(0, leaves).unwrap();
        assert_eq!(rebuilt.root(), tree.root(), "trial {trial}: root vs leaves");
    }
    println!(
        "kill -9 ({}): {trials} trials, {torn} torn, {lost} lost (max acknowledged batch \
         {max_acked})",
        S::NAME
    );
    report::record(
        &S::report_suite("kill9"),
        "batches",
        &[("trials", trials), ("torn", torn), ("lost", lost)],
        &[],
    );
    assert_eq!((torn, lost), (0, 0));
    assert!(
        max_acked > 0,
        "the writer never got a batch in: the test would prove nothing"
    );
}
