//! The redb store under the suites sled passes: the model and history models with reopens on a
//! real redb file, power loss through a fault-injecting redb `StorageBackend`, and a table of
//! hostile environments and bad input. (kill -9 runs on both engines in `crash.rs`.)

use integration_tests::engines::TestEngine;
use integration_tests::redb_backend::PowerLossBackend;
use integration_tests::report;
use integration_tests::steps::{history_step, observe, Observed, HISTORY};
use integration_tests::{cases, tally};
use proptest::prelude::*;
use rand::{rngs::StdRng, Rng, SeedableRng};
use tree_core::persistent::{Durability, PersistentTreeError};
use tree_core::testing::{
    arb_history_ops, arb_ops, check_apply_checkpointed, check_history_ops, check_ops, mix_leaf,
    MixHasher,
};
use tree_core::{Depth, History, HistoryConfig, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_redb::{RedbConfig, RedbMerkleTree, RedbStore, RedbTreeError, DATABASE_FILE};

fn open(config: &RedbConfig, depth: Depth) -> RedbMerkleTree<MixHasher> {
    RedbMerkleTree::open(
        &config.clone().cached_levels(2).cached_band_chunks(0),
        depth,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(32)))]

    /// Every operation against the reference, restarts (drop and reopen the file) included.
    #[test]
    fn redb_tree_matches_reference(
        (depth, ops) in (1u8..=5).prop_flat_map(|d| (Just(d), arb_ops(d, 24, mix_leaf))),
    ) {
        let _case = tally!(suite = "redb_model", "redb_tree_matches_reference", ops.len());
        let dir = tempfile::tempdir().unwrap();
        let config = RedbConfig::new(dir.path());
        let depth = Depth::new(depth).unwrap();
        let tree = check_ops(open(&config, depth), &ops, |tree| {
            drop(tree);
            open(&config, depth)
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }

    /// Checkpoints, rewinds, pruning and the root window against the history model, across
    /// reopens.
    #[test]
    fn redb_history_matches_model_across_restarts(
        max_checkpoints in 0usize..5,
        root_window in 1usize..5,
        (depth, ops) in (1u8..=4).prop_flat_map(|d| (Just(d), arb_history_ops(d, 24, mix_leaf))),
    ) {
        let _case = tally!(suite = "redb_model", "redb_history_matches_model_across_restarts", ops.len());
        let dir = tempfile::tempdir().unwrap();
        let config = RedbConfig::new(dir.path());
        let depth = Depth::new(depth).unwrap();
        let history = HistoryConfig { max_checkpoints, root_window };
        let tree = check_history_ops(open(&config, depth), history, &ops, |tree| {
            drop(tree);
            open(&config, depth)
        });
        prop_assert!(tree.verify_integrity().unwrap().is_empty());
    }
}

const DEPTH: u8 = 10;

fn power_loss_cases() -> u64 {
    std::env::var("CANOPY_POWER_LOSS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(200, |n: u64| n / 5)
}

/// One power-loss case: history steps on a redb database over [`PowerLossBackend`], some of
/// them failing part-way (an injected write or sync error), then power is cut: the disk keeps
/// what was synced and a random subset of the writes since. The reopened tree must equal the
/// model after some step, never one before the last step acknowledged as durable.
fn power_loss_case(seed: u64) -> Result<CaseStats, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let depth = Depth::new(DEPTH).unwrap();
    let every_commit = rng.gen_bool(0.5);
    // Periodic with an interval no run reaches: only explicit flushes make steps durable.
    let durability = if every_commit {
        Durability::EveryCommit
    } else {
        Durability::Periodic {
            every_ms: 3_600_000,
        }
    };
    let disk = PowerLossBackend::new(seed);
    let store = RedbStore::with_backend(disk.clone(), durability).map_err(|e| e.to_string())?;
    let mut tree = RedbMerkleTree::<MixHasher>::open_store(
        store,
        depth,
        Default::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .map_err(|e| format!("open: {e}"))?;
    tree.set_history_config(HISTORY)
        .map_err(|e| e.to_string())?;
    let mut model = OptimalMerkleTree::<MixHasher>::new(depth);
    model
        .set_history_config(HISTORY)
        .map_err(|e| e.to_string())?;
    let mut states: Vec<Observed> = vec![observe(&model).map_err(|e| e.to_string())?];
    let mut durable = 0usize;
    let steps = rng.gen_range(0..=30u64);
    let mut stats = CaseStats::default();
    for s in 1..=steps {
        stats.steps += 1;
        if rng.gen_ratio(1, 8) {
            disk.fail_after(rng.gen_range(0..6));
        }
        let result = history_step(&mut tree, seed, s);
        disk.stop_failing();
        match result {
            Ok(_) => {
                history_step(&mut model, seed, s).map_err(|e| e.to_string())?;
                states.push(observe(&model).map_err(|e| e.to_string())?);
                if every_commit {
                    durable = states.len() - 1;
                } else if rng.gen_ratio(1, 5) {
                    match tree.flush() {
                        Ok(()) => durable = states.len() - 1,
                        Err(_) => break,
                    }
                }
            }
            // The failed step may or may not have landed; the tree refuses further work until
            // reopened, and the model may be at either state.
            Err(_) => {
                stats.failed_commit = true;
                let mut landed = model.clone();
                history_step(&mut landed, seed, s).map_err(|e| e.to_string())?;
                states.push(observe(&landed).map_err(|e| e.to_string())?);
                break;
            }
        }
    }
    drop(tree);
    let after = disk.power_loss();
    let store = RedbStore::with_backend(after, durability)
        .map_err(|e| format!("reopen after power loss: {e}"))?;
    let tree = RedbMerkleTree::<MixHasher>::open_store(
        store,
        depth,
        Default::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .map_err(|e| format!("reopen after power loss: {e}"))?;
    let got = observe(&tree).map_err(|e| e.to_string())?;
    let Some(at) = states.iter().rposition(|s| *s == got) else {
        return Err(format!(
            "state after power loss matches no step (durable {durable})"
        ));
    };
    if at < durable {
        return Err(format!(
            "reopened at step {at}, but step {durable} was durable"
        ));
    }
    if !tree
        .verify_integrity()
        .map_err(|e| e.to_string())?
        .is_empty()
    {
        return Err("stored nodes inconsistent".into());
    }
    stats.rolled_back = at + 1 < states.len();
    Ok(stats)
}

/// What a power-loss case exercised, so the suite can show it did something.
#[derive(Default)]
struct CaseStats {
    steps: u64,
    failed_commit: bool,
    rolled_back: bool,
}

#[test]
fn redb_power_loss_reopens_at_an_acknowledged_step_or_later() {
    let cases = power_loss_cases();
    let mut violations = Vec::new();
    let (mut steps, mut failed, mut rolled_back) = (0u64, 0u64, 0u64);
    for seed in 0..cases {
        match power_loss_case(seed ^ 0x7ed8) {
            Ok(stats) => {
                steps += stats.steps;
                failed += u64::from(stats.failed_commit);
                rolled_back += u64::from(stats.rolled_back);
            }
            Err(why) => violations.push(format!("seed {seed}: {why}")),
        }
    }
    println!(
        "redb power loss: {cases} cases, {steps} steps, {failed} with an injected failure, \
         {rolled_back} reopened before their last step, {} violations",
        violations.len()
    );
    report::record(
        &RedbStore::report_suite("power_loss"),
        "history",
        &[("cases", cases), ("violations", violations.len() as u64)],
        &[],
    );
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(
        failed > 0 && rolled_back > 0,
        "no failure injected or nothing lost: the suite proved nothing"
    );
}

/// The redb-specific rows of the bad-input table: a database of another depth or hasher, a
/// locked path, a foreign directory, a path that is a file, garbage and truncated database
/// files. Each must be its typed error at once, never a panic, and must leave the files alone.
#[test]
fn redb_bad_input_table() {
    let depth = Depth::new(8).unwrap();
    type Check = Box<dyn Fn(&std::path::Path) -> Result<(), String>>;
    let made = move |dir: &std::path::Path| {
        let mut tree = RedbMerkleTree::<MixHasher>::open(&RedbConfig::new(dir), depth).unwrap();
        tree.set_range(0, [1u64, 2, 3]).unwrap();
        tree.close().unwrap();
        tree.root()
    };
    let expect = |got: Result<RedbMerkleTree<MixHasher>, RedbTreeError>,
                  want: fn(&RedbTreeError) -> bool|
     -> Result<(), String> {
        match got {
            Err(e) if want(&e) => Ok(()),
            Err(e) => Err(format!("wrong error: {e}")),
            Ok(_) => Err("opened".into()),
        }
    };
    let rows: Vec<(&str, Check)> = vec![
        (
            "another depth",
            Box::new(move |dir| {
                let root = made(dir);
                expect(
                    RedbMerkleTree::open(&RedbConfig::new(dir), Depth::new(9).unwrap()),
                    |e| {
                        matches!(
                            e,
                            PersistentTreeError::DepthMismatch {
                                stored: 8,
                                requested: 9
                            }
                        )
                    },
                )?;
                let tree = RedbMerkleTree::<MixHasher>::open(&RedbConfig::new(dir), depth)
                    .map_err(|e| e.to_string())?;
                (tree.root() == root).then_some(()).ok_or("changed".into())
            }),
        ),
        (
            "another hasher",
            Box::new(move |dir| {
                made(dir);
                match RedbMerkleTree::<hasher::Keccak256Hasher>::open(&RedbConfig::new(dir), depth)
                {
                    Err(PersistentTreeError::HasherMismatch { .. }) => Ok(()),
                    Err(e) => Err(format!("wrong error: {e}")),
                    Ok(_) => Err("opened".into()),
                }
            }),
        ),
        (
            "locked by another handle",
            Box::new(move |dir| {
                made(dir);
                let _held = RedbMerkleTree::<MixHasher>::open(&RedbConfig::new(dir), depth)
                    .map_err(|e| e.to_string())?;
                expect(RedbMerkleTree::open(&RedbConfig::new(dir), depth), |e| {
                    matches!(e, PersistentTreeError::Locked { .. })
                })
            }),
        ),
        (
            "a directory holding other files",
            Box::new(move |dir| {
                std::fs::write(dir.join("notes.txt"), b"mine").map_err(|e| e.to_string())?;
                expect(RedbMerkleTree::open(&RedbConfig::new(dir), depth), |e| {
                    matches!(e, PersistentTreeError::ForeignDirectory { .. })
                })?;
                (!dir.join(DATABASE_FILE).exists())
                    .then_some(())
                    .ok_or("wrote".into())
            }),
        ),
        (
            "a path that is a file",
            Box::new(move |dir| {
                let file = dir.join("plain");
                std::fs::write(&file, b"x").map_err(|e| e.to_string())?;
                expect(RedbMerkleTree::open(&RedbConfig::new(&file), depth), |e| {
                    matches!(e, PersistentTreeError::Io { .. })
                })
            }),
        ),
        (
            "a garbage database file",
            Box::new(move |dir| {
                std::fs::write(dir.join(DATABASE_FILE), vec![0x5a; 8192])
                    .map_err(|e| e.to_string())?;
                expect(RedbMerkleTree::open(&RedbConfig::new(dir), depth), |e| {
                    matches!(e, PersistentTreeError::Store(_))
                })
            }),
        ),
        (
            "a truncated database file",
            Box::new(move |dir| {
                made(dir);
                let file = dir.join(DATABASE_FILE);
                let bytes = std::fs::read(&file).map_err(|e| e.to_string())?;
                std::fs::write(&file, &bytes[..100]).map_err(|e| e.to_string())?;
                expect(RedbMerkleTree::open(&RedbConfig::new(dir), depth), |e| {
                    matches!(e, PersistentTreeError::Store(_))
                })
            }),
        ),
        (
            "open_existing on an empty directory",
            Box::new(move |dir| {
                expect(
                    RedbMerkleTree::open_existing(&RedbConfig::new(dir.join("none"))),
                    |e| matches!(e, PersistentTreeError::NotATree),
                )
            }),
        ),
    ];
    let total = rows.len() as u64;
    let mut failed = Vec::new();
    for (name, check) in &rows {
        let dir = tempfile::tempdir().unwrap();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(dir.path())));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(why)) => failed.push(format!("{name}: {why}")),
            Err(_) => failed.push(format!("{name}: panicked")),
        }
    }
    report::record(
        &RedbStore::report_suite("bad_input"),
        "table",
        &[("total", total), ("passed", total - failed.len() as u64)],
        &[],
    );
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Periodic durability: commits are not durable until the interval passes or a flush, and a
/// flush makes all of them durable at once (checked by cutting power).
#[test]
fn redb_periodic_durability_is_made_durable_by_flush() {
    let depth = Depth::new(6).unwrap();
    let disk = PowerLossBackend::new(1);
    let store = RedbStore::with_backend(
        disk.clone(),
        Durability::Periodic {
            every_ms: 3_600_000,
        },
    )
    .unwrap();
    let mut tree = RedbMerkleTree::<MixHasher>::open_store(
        store,
        depth,
        Default::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .unwrap();
    let empty = tree.root();
    tree.set_range(0, [1u64, 2]).unwrap();
    let first = tree.root();
    // Not yet durable: a power cut now loses the batch (the subset of unsynced writes kept is
    // random, so only "one of the two states" is certain).
    let lost = disk.clone().power_loss();
    let reopened = RedbMerkleTree::<MixHasher>::open_store(
        RedbStore::with_backend(lost, Durability::EveryCommit).unwrap(),
        depth,
        Default::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .unwrap();
    assert!([empty, first].contains(&reopened.root()));
    drop(reopened);
    tree.flush().unwrap();
    let kept = disk.clone().power_loss();
    let reopened = RedbMerkleTree::<MixHasher>::open_store(
        RedbStore::with_backend(kept, Durability::EveryCommit).unwrap(),
        depth,
        Default::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .unwrap();
    assert_eq!(reopened.root(), first);
}

/// `apply_checkpointed` on redb: one write transaction leaves exactly the state, checkpoints
/// and undo records of `apply` then `checkpoint` (two), with and without pruning.
#[test]
fn redb_apply_checkpointed_equals_apply_then_checkpoint() {
    let depth = Depth::new(8).unwrap();
    for max_checkpoints in [1, 2, 5] {
        let dirs = [(); 3].map(|()| tempfile::tempdir().unwrap());
        let [mut one, mut two, mut three] = dirs
            .each_ref()
            .map(|d| open(&RedbConfig::new(d.path()), depth));
        check_apply_checkpointed(&mut one, &mut two, &mut three, max_checkpoints, |t| {
            t.history_size().unwrap()
        });
    }
}
