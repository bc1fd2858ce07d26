//! sled's failpoints (feature `failpoints`): random schedules arm its named I/O failure points
//! while a writer runs history steps on a real database.
//!
//! Every call a failpoint hits must return an error (a panic is counted and fails the test),
//! leave the in-memory tree as it was before the call, and after reopen the database holds a
//! committed prefix: the state before the failed call, or after it when sled made the write
//! durable before failing. Opening while a failpoint is armed must be an error or a good tree.
//! Schedules: `CANOPY_FAILPOINT_SCHEDULES` (default 200).
//!
//! sled's failpoint registry is global to the process, so this binary has one test.

use std::panic::{catch_unwind, AssertUnwindSafe};

use integration_tests::report;
use integration_tests::steps::{history_step, observe, Observed, HISTORY};
use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use tree_core::testing::MixHasher;
use tree_core::{Depth, History, OptimalMerkleTree};
use tree_sled::{Durability, SledConfig, SledMerkleTree};

/// Every failure point sled 0.34.7 defines.
const FAILPOINTS: &[&str] = &[
    "buffer write",
    "buffer write post",
    "blob blob write",
    "write_blob write crc",
    "write_blob write kind_byte",
    "write_blob write buf",
    "write_config bytes",
    "write_config crc",
    "write_config post",
    "zero garbage segment SA",
    "file truncation",
    "segment initial free zero",
    "snap write",
    "snap write len",
    "snap write crc",
    "snap write post",
    "snap write mv",
    "snap write mv post",
    "snap write rm old",
];

/// The points every durable commit passes.
const HOT: &[&str] = &["buffer write", "buffer write post", "write_blob write buf"];

const DEPTH: u8 = 12;
const STEPS: u64 = 40;

/// What a failed call must leave untouched: the tree's in-memory view (the store may be poisoned).
fn in_memory<T: History<Hasher = MixHasher>>(tree: &T) -> (u64, u64, Vec<u8>, Vec<u64>) {
    (
        tree.root(),
        tree.next_index(),
        tree.metadata().unwrap(),
        tree.checkpoints().unwrap().iter().map(|c| c.id).collect(),
    )
}

#[derive(Default)]
struct Counts {
    schedules: u64,
    fired: u64,
    /// Failure points that fired at least once (armed in a schedule whose call failed).
    reached: std::collections::BTreeSet<&'static str>,
    panics: u64,
    violations: Vec<String>,
}

type Tree = SledMerkleTree<MixHasher>;

/// Opens the database; a panic counts, an error is returned.
fn open(config: &SledConfig, counts: &mut Counts) -> Option<Result<Tree, String>> {
    let depth = Depth::new(DEPTH).unwrap();
    match catch_unwind(|| Tree::open(config, depth)) {
        Ok(result) => Some(result.map_err(|e| e.to_string())),
        Err(_) => {
            counts.panics += 1;
            None
        }
    }
}

/// Reopens after a failure with nothing armed; the state must be `before` or `after`.
fn reopen(
    config: &SledConfig,
    before: &Observed,
    after: Option<&Observed>,
    counts: &mut Counts,
    what: &str,
) -> Option<(Tree, bool)> {
    sled::fail::reset();
    let mut tree = match open(config, counts)? {
        Ok(tree) => tree,
        Err(e) => {
            counts
                .violations
                .push(format!("{what}: reopen failed: {e}"));
            return None;
        }
    };
    tree.set_history_config(HISTORY).ok()?;
    let got = observe(&tree).ok()?;
    let advanced = after.is_some_and(|a| *a == got);
    if got != *before && !advanced {
        counts
            .violations
            .push(format!("{what}: reopened state is not a committed prefix"));
        return None;
    }
    if !tree
        .verify_integrity()
        .is_ok_and(|issues| issues.is_empty())
    {
        counts
            .violations
            .push(format!("{what}: inconsistent nodes"));
        return None;
    }
    Some((tree, advanced))
}

fn run_schedule(seed: u64, counts: &mut Counts) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let config = SledConfig::new(dir.path()).durability(Durability::EveryCommit);
    let mut model = OptimalMerkleTree::<MixHasher>::new(Depth::new(DEPTH).unwrap());
    model.set_history_config(HISTORY).unwrap();

    // Arm one or two failure points, each on a random hit; sometimes already during open.
    let mut armed = Vec::new();
    for _ in 0..rng.gen_range(1..=2) {
        // Half the time a point on every commit's path, on any of the run's hits; otherwise
        // any point on one of its first hits (most are reached only at open or on rare paths).
        let (name, bits) = if rng.gen_bool(0.5) {
            (*HOT.choose(&mut rng).unwrap(), 1u64 << rng.gen_range(0..48))
        } else {
            (
                *FAILPOINTS.choose(&mut rng).unwrap(),
                1u64 << rng.gen_range(0..8),
            )
        };
        armed.push((name, bits));
    }
    let arm = |armed: &[(&'static str, u64)]| {
        for &(name, bits) in armed {
            sled::fail::set(name, bits);
        }
    };
    let open_armed = rng.gen_ratio(1, 4);
    if open_armed {
        arm(&armed);
    }
    let mut tree = match open(&config, counts) {
        None => return,
        Some(Ok(tree)) => tree,
        Some(Err(_)) => {
            counts.fired += 1;
            // A failed create: reopening must give an empty tree or a clean error-free create.
            let empty = observe(&model).unwrap();
            let Some((tree, _)) = reopen(&config, &empty, None, counts, "create") else {
                return;
            };
            tree
        }
    };
    if tree.set_history_config(HISTORY).is_err() {
        counts.fired += 1;
        drop(tree);
        let empty = observe(&model).unwrap();
        let Some((reopened, _)) = reopen(&config, &empty, None, counts, "history config") else {
            return;
        };
        tree = reopened;
    }
    if !open_armed {
        arm(&armed);
    }
    let mut s = 0;
    while s < STEPS {
        s += 1;
        let before_memory = in_memory(&tree);
        let before = observe(&model).unwrap();
        let mut next_model = model.clone();
        history_step(&mut next_model, seed, s).unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| history_step(&mut tree, seed, s)));
        match result {
            Err(_) => {
                counts.panics += 1;
                return;
            }
            Ok(Ok(_)) => {
                model = next_model;
                if in_memory(&tree) != in_memory(&model) {
                    counts.violations.push(format!(
                        "seed {seed:#x} step {s}: succeeded with a wrong state"
                    ));
                    return;
                }
            }
            Ok(Err(_)) => {
                counts.fired += 1;
                counts.reached.extend(armed.iter().map(|(name, _)| *name));
                if in_memory(&tree) != before_memory {
                    counts.violations.push(format!(
                        "seed {seed:#x} step {s}: a failed call changed the in-memory tree"
                    ));
                }
                drop(tree);
                let what = format!("seed {seed:#x} step {s}");
                let after = observe(&next_model).unwrap();
                let Some((reopened, advanced)) =
                    reopen(&config, &before, Some(&after), counts, &what)
                else {
                    return;
                };
                if advanced {
                    model = next_model;
                }
                tree = reopened;
            }
        }
    }
    sled::fail::reset();
}

#[test]
fn failpoints_return_errors_and_leave_a_committed_prefix() {
    let schedules = std::env::var("CANOPY_FAILPOINT_SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200u64);
    let mut rng = StdRng::seed_from_u64(0xfa11);
    let mut counts = Counts::default();
    for _ in 0..schedules {
        counts.schedules += 1;
        run_schedule(rng.gen(), &mut counts);
        sled::fail::reset();
    }
    for v in &counts.violations {
        eprintln!("{v}");
    }
    let reached = counts
        .reached
        .iter()
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "failpoints: {} schedules, {} fired, {} panics, {} violations; reached: {reached}",
        counts.schedules,
        counts.fired,
        counts.panics,
        counts.violations.len()
    );
    report::record(
        "failpoints",
        "history",
        &[
            ("schedules", counts.schedules),
            ("fired", counts.fired),
            ("panics", counts.panics),
            ("violations", counts.violations.len() as u64),
        ],
        &[],
    );
    assert_eq!((counts.panics, counts.violations.len()), (0, 0));
    assert!(
        counts.fired > 0,
        "no failure point fired: nothing was tested"
    );
}
