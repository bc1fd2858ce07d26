//! The Postgres store under the suites sled and redb pass (the model, history and records
//! models with reopens; kill -9 runs in `crash.rs`), and what only a shared database has: several
//! trees in one database, a fenced writer, a standby that takes over from a killed writer, a
//! Postgres crash and restart in the middle of writing, readers, and a schema of another version.
//!
//! Every test starts its own throw-away cluster (pg-harness), stopped when the test ends or
//! fails; each proptest case is a tree of its own in it. Writer processes are this test binary
//! re-run (`CANOPY_PG_CHILD` set), so they can be stopped and killed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use integration_tests::engines::TestEngine;
use integration_tests::steps::batch;
use integration_tests::{cases, report, tally};
use pg_harness::PgCluster;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tree_core::persistent::PersistentTreeError;
use tree_core::testing::{
    arb_history_ops, arb_ops, arb_record_ops, check_history_ops, check_ops, check_records,
    mix_leaf, MixHasher,
};
use tree_core::{Depth, HistoryConfig, MerkleTree, MerkleTreeExt, OptimalMerkleTree};
use tree_postgres::{LockWait, PgConfig, PgError, PgMerkleTree, PgStore, Role};

type Tree = PgMerkleTree<MixHasher>;

/// A fresh tree name per call, so every case has its own namespace in the suite's cluster.
fn fresh_tree(cluster: &PgCluster, what: &str) -> PgConfig {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    PgConfig::new(cluster.url(), format!("{what}-{n}"))
        .cached_levels(2)
        .cached_band_chunks(0)
        .lock_wait(LockWait::Wait)
}

fn open(config: &PgConfig, depth: Depth) -> Tree {
    Tree::open(config, depth).unwrap()
}

fn runner(default_cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(default_cases),
        failure_persistence: None,
        ..Config::default()
    })
}

/// Every operation against the reference, reopens included, each case a tree of its own.
#[test]
fn postgres_tree_matches_reference() {
    let cluster = PgCluster::start().unwrap();
    let strategy = (1u8..=5).prop_flat_map(|d| (Just(d), arb_ops(d, 24, mix_leaf)));
    runner(16)
        .run(&strategy, |(depth, ops)| {
            let _case = tally!(
                suite = "postgres_model",
                "postgres_tree_matches_reference",
                ops.len()
            );
            let config = fresh_tree(&cluster, "model");
            let depth = Depth::new(depth).unwrap();
            let tree = check_ops(open(&config, depth), &ops, |tree| {
                drop(tree);
                open(&config, depth)
            });
            prop_assert!(tree.verify_integrity().unwrap().is_empty());
            Ok(())
        })
        .unwrap();
}

/// Checkpoints, rewinds, pruning and the root window against the history model, across reopens.
#[test]
fn postgres_history_matches_model_across_restarts() {
    let cluster = PgCluster::start().unwrap();
    let strategy = (
        0usize..5,
        1usize..5,
        (1u8..=4).prop_flat_map(|d| (Just(d), arb_history_ops(d, 24, mix_leaf))),
    );
    runner(16)
        .run(&strategy, |(max_checkpoints, root_window, (depth, ops))| {
            let _case = tally!(
                suite = "postgres_model",
                "postgres_history_matches_model_across_restarts",
                ops.len()
            );
            let config = fresh_tree(&cluster, "history");
            let depth = Depth::new(depth).unwrap();
            let history = HistoryConfig {
                max_checkpoints,
                root_window,
            };
            let tree = check_history_ops(open(&config, depth), history, &ops, |tree| {
                drop(tree);
                open(&config, depth)
            });
            prop_assert!(tree.verify_integrity().unwrap().is_empty());
            Ok(())
        })
        .unwrap();
}

/// Records written with leaves in one commit, restored by rewinds, kept across reopens.
#[test]
fn postgres_keeps_records_with_the_tree_across_reopens() {
    let cluster = PgCluster::start().unwrap();
    let strategy = (
        (0usize..4).prop_map(|max_checkpoints| HistoryConfig {
            max_checkpoints,
            root_window: 2,
        }),
        arb_record_ops(30),
    );
    runner(12)
        .run(&strategy, |(history, ops)| {
            let _case = tally!(
                suite = "postgres_model",
                "postgres_keeps_records_with_the_tree_across_reopens",
                ops.len()
            );
            let config = fresh_tree(&cluster, "records");
            let depth = Depth::new(4).unwrap();
            let tree = check_records(open(&config, depth), history, &ops, |tree| {
                drop(tree);
                open(&config, depth)
            });
            prop_assert!(tree.verify_integrity().unwrap().is_empty());
            Ok(())
        })
        .unwrap();
}

/// Trees are namespaces: two trees in one database keep their own leaves, depths and roots; a
/// second writer of a tree is refused, a reader reads and cannot write, a missing tree and a
/// schema of another version are typed errors.
#[test]
fn trees_are_namespaces_with_one_writer_each() {
    let cluster = PgCluster::start().unwrap();
    let a = PgConfig::new(cluster.url(), "a");
    let b = PgConfig::new(cluster.url(), "b");
    let mut tree_a = open(&a, Depth::new(8).unwrap());
    let mut tree_b = open(&b, Depth::new(5).unwrap());
    tree_a.set_range(0, [1u64, 2, 3]).unwrap();
    tree_b.set_range(0, [9u64]).unwrap();
    let (root_a, root_b) = (tree_a.root(), tree_b.root());
    assert_ne!(root_a, root_b);

    // One writer per tree.
    let second = Tree::open(&a, Depth::new(8).unwrap());
    assert!(
        matches!(second, Err(PersistentTreeError::Store(PgError::Locked { ref tree })) if tree == "a"),
        "{second:?}"
    );
    // A reader reads the committed tree and writes nothing.
    let mut reader = Tree::open_existing(&a.clone().role(Role::Reader)).unwrap();
    assert_eq!((reader.root(), reader.next_index()), (root_a, 3));
    assert!(matches!(
        reader.set(5, 5),
        Err(PersistentTreeError::Store(PgError::ReadOnly { .. }))
    ));
    drop(reader);
    let missing = Tree::open_existing(&PgConfig::new(cluster.url(), "c").role(Role::Reader));
    assert!(matches!(
        missing,
        Err(PersistentTreeError::Store(PgError::NoSuchTree { .. }))
    ));
    let bad_name = Tree::open(&PgConfig::new(cluster.url(), "a b"), Depth::new(4).unwrap());
    assert!(matches!(
        bad_name,
        Err(PersistentTreeError::Store(PgError::BadTreeName(_)))
    ));
    drop((tree_a, tree_b));

    let tree_a = Tree::open_existing(&a).unwrap();
    let tree_b = Tree::open_existing(&b).unwrap();
    assert_eq!((tree_a.root(), tree_a.depth().get()), (root_a, 8));
    assert_eq!((tree_b.root(), tree_b.depth().get()), (root_b, 5));
    drop((tree_a, tree_b));
    // Another depth is refused, as on every store.
    assert!(matches!(
        Tree::open(&a, Depth::new(9).unwrap()),
        Err(PersistentTreeError::DepthMismatch {
            stored: 8,
            requested: 9
        })
    ));

    cluster
        .psql("UPDATE canopy_schema SET version = 99")
        .unwrap();
    assert!(matches!(
        Tree::open(&a, Depth::new(8).unwrap()),
        Err(PersistentTreeError::Store(PgError::SchemaVersion {
            found: 99,
            supported: 1
        }))
    ));
    // An unreachable server is an error once the reconnect window is over, not a hang.
    let port = pg_harness::PgCluster::start().unwrap().port(); // started and dropped: nothing listens
    let unreachable = PgConfig::new(format!("postgres://canopy@127.0.0.1:{port}/postgres"), "a")
        .reconnect_for(Duration::from_millis(300));
    let err = Tree::open(&unreachable, Depth::new(8).unwrap()).unwrap_err();
    assert!(
        matches!(&err, PersistentTreeError::Store(e @ PgError::Postgres(_)) if e.is_transient()),
        "{err:?}"
    );
}

// ---- writer processes ----------------------------------------------------------------------

const DEPTH: u8 = 16;

/// A writer process: opens the tree `CANOPY_PG_CHILD` names (a prepared directory), applies
/// batches 1, 2, ... printing `ack k` after each, and on an error prints `error: …` and exits.
#[test]
fn pg_child_writer() {
    let (Ok(dir), Ok(seed)) = (
        std::env::var("CANOPY_PG_CHILD"),
        std::env::var("CANOPY_PG_SEED"),
    ) else {
        return;
    };
    let seed: u64 = seed.parse().unwrap();
    let lease = Duration::from_millis(
        std::env::var("CANOPY_PG_LEASE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5000),
    );
    let config = <PgStore as TestEngine>::durable(Path::new(&dir)).lease(lease);
    let mut tree = Tree::open(&config, Depth::new(DEPTH).unwrap()).unwrap();
    let mut out = std::io::stdout().lock();
    for k in tree_k(&tree) + 1.. {
        if let Err(error) = tree.apply(batch(seed, k, tree.next_index())) {
            writeln!(out, "error: {error}").unwrap();
            out.flush().unwrap();
            std::process::exit(3);
        }
        writeln!(out, "ack {k}").unwrap();
        out.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The batch number a tree's metadata records (0 for a fresh tree).
fn tree_k(tree: &Tree) -> u64 {
    let meta = tree.metadata().unwrap();
    meta.try_into().map(u64::from_be_bytes).unwrap_or(0)
}

/// A running writer process and what it printed.
struct Writer {
    child: Child,
    lines: mpsc::Receiver<String>,
    acked: Arc<AtomicU64>,
}

impl Writer {
    fn start(dir: &Path, seed: u64, lease_ms: u64) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "pg_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CANOPY_PG_CHILD", dir)
            .env("CANOPY_PG_SEED", seed.to_string())
            .env("CANOPY_PG_LEASE_MS", lease_ms.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        let acked = Arc::new(AtomicU64::new(0));
        let seen = acked.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some((_, k)) = line.rsplit_once("ack ") {
                    if let Ok(k) = k.trim().parse() {
                        seen.store(k, Ordering::Release);
                    }
                } else if let Some((_, error)) = line.split_once("error: ") {
                    let _ = send.send(error.to_owned());
                }
            }
        });
        Self {
            child,
            lines,
            acked,
        }
    }

    fn wait_for_ack(&self, k: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.acked.load(Ordering::Acquire) < k {
            assert!(
                Instant::now() < deadline,
                "the writer never acknowledged batch {k}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The model after batches 1..=k of `seed`.
fn model_after(seed: u64, k: u64) -> OptimalMerkleTree<MixHasher> {
    let mut model = OptimalMerkleTree::<MixHasher>::new(Depth::new(DEPTH).unwrap());
    for j in 1..=k {
        let next = model.next_index();
        model.apply(batch(seed, j, next)).unwrap();
    }
    model
}

/// The reopened tree is exactly batches 1..=k for its recorded k, and k is at least `acked`.
fn assert_prefix(tree: &Tree, seed: u64, acked: u64) -> u64 {
    let k = tree_k(tree);
    assert!(
        k >= acked,
        "the tree holds batch {k} but {acked} were acknowledged"
    );
    let model = model_after(seed, k);
    assert_eq!(tree.root(), model.root(), "not batches 1..={k}");
    assert_eq!(tree.next_index(), model.next_index());
    assert!(tree.verify_integrity().unwrap().is_empty());
    k
}

/// kill -9 of the writer mid-stream: a waiting standby takes the tree over, finds every
/// acknowledged batch and none torn, and goes on committing.
#[test]
fn a_standby_takes_over_from_a_killed_writer() {
    if std::env::var("CANOPY_PG_CHILD").is_ok() {
        return;
    }
    let cluster = PgCluster::start().unwrap();
    let mut takeovers = Vec::new();
    for (trial, seed) in [11u64, 12, 13].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        <PgStore as TestEngine>::prepare_dir(&cluster, dir.path());
        let writer = Writer::start(dir.path(), seed, 5000);
        writer.wait_for_ack(3 + trial as u64 * 5);
        // The standby waits on the lock while the writer runs.
        let config = <PgStore as TestEngine>::durable(dir.path());
        let standby = std::thread::spawn(move || {
            let tree = Tree::open(&config, Depth::new(DEPTH).unwrap()).unwrap();
            (tree, Instant::now())
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !standby.is_finished(),
            "the standby took a tree that is held"
        );
        writer.signal("-KILL");
        let killed = Instant::now();
        let acked = writer.acked.load(Ordering::Acquire);
        let (mut tree, opened) = standby.join().unwrap();
        let k = assert_prefix(&tree, seed, acked);
        tree.apply(batch(seed, k + 1, tree.next_index())).unwrap();
        let committed = Instant::now();
        assert_prefix(&tree, seed, k + 1);
        takeovers.push((opened - killed, committed - killed));
        drop(writer);
    }
    for (open, commit) in &takeovers {
        println!(
            "take-over after kill -9: lock and open {:.1} ms, first commit {:.1} ms",
            open.as_secs_f64() * 1e3,
            commit.as_secs_f64() * 1e3
        );
    }
    report::record(
        "postgres_failover",
        "takeover",
        &[("takeovers", takeovers.len() as u64)],
        &[],
    );
}

/// Fencing: a writer stopped (SIGSTOP) past its lease loses the tree to the standby, which
/// commits; continued (SIGCONT), the old writer's next commit is refused as fenced, nothing it
/// writes lands, and it steps down.
#[test]
fn a_stalled_writer_is_fenced_after_its_successor_commits() {
    if std::env::var("CANOPY_PG_CHILD").is_ok() {
        return;
    }
    let cluster = PgCluster::start().unwrap();
    let seed = 21;
    let dir = tempfile::tempdir().unwrap();
    <PgStore as TestEngine>::prepare_dir(&cluster, dir.path());
    let writer = Writer::start(dir.path(), seed, 600);
    writer.wait_for_ack(5);
    writer.signal("-STOP");
    let acked = writer.acked.load(Ordering::Acquire);
    // The stopped writer sends no heartbeat: the server ends its session after the lease.
    let config = <PgStore as TestEngine>::durable(dir.path());
    let mut tree = Tree::open(&config, Depth::new(DEPTH).unwrap()).unwrap();
    let k = assert_prefix(&tree, seed, acked);
    // The successor's own commit: a batch the old writer would never write.
    let mut own = batch(seed ^ 0xdead, 1, tree.next_index());
    own.metadata((k + 1000).to_be_bytes().to_vec());
    tree.apply(own).unwrap();
    let root = tree.root();
    let (term, commits) = tree.store().stored_state().unwrap();
    assert_eq!(
        (term, commits),
        (tree.store().term(), tree.store().commits())
    );
    // The successor lets go, so the lock is free: only the term can stop the old writer now.
    drop(tree);
    writer.signal("-CONT");
    let refusal = writer
        .lines
        .recv_timeout(Duration::from_secs(60))
        .expect("the old writer must fail its next commit");
    assert!(
        refusal.contains("superseded"),
        "the old writer failed for another reason: {refusal}"
    );
    println!("the old writer's refusal: {refusal}");
    drop(writer);
    // Nothing of the old writer landed after the successor's commit.
    let reopened = Tree::open_existing(&config).unwrap();
    assert_eq!(reopened.root(), root);
    assert_eq!(tree_k(&reopened), k + 1000);
    assert!(reopened.verify_integrity().unwrap().is_empty());
    let (_, after) = reopened.store().stored_state().unwrap();
    assert_eq!(after, commits, "a commit landed after the successor's");
    report::record(
        "postgres_failover",
        "fencing",
        &[("fenced_writers", 1)],
        &[],
    );
}

/// `pg_ctl stop -m immediate` and a restart while a writer commits: every apply returns Ok
/// (the lost connection is retried), and the tree holds every batch exactly once.
#[test]
fn a_postgres_crash_mid_stream_loses_nothing_and_applies_nothing_twice() {
    let cluster = PgCluster::start().unwrap();
    let seed = 31;
    let config = fresh_tree(&cluster, "restart").lock_wait(LockWait::Wait);
    let mut tree = open(&config, Depth::new(DEPTH).unwrap());
    let total = 80u64;
    let (progress, seen) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        for k in 1..=total {
            tree.apply(batch(seed, k, tree.next_index())).unwrap();
            let _ = progress.send(k);
        }
        tree
    });
    for (at, down_ms) in [(10u64, 300u64), (40, 1500)] {
        while seen.recv().unwrap() < at {}
        cluster.stop_immediate().unwrap();
        std::thread::sleep(Duration::from_millis(down_ms));
        cluster.start_again().unwrap();
    }
    let tree = writer.join().unwrap();
    assert_eq!(assert_prefix(&tree, seed, total), total);
    drop(tree);
    let tree = open(&config, Depth::new(DEPTH).unwrap());
    assert_eq!(assert_prefix(&tree, seed, total), total);
    report::record(
        "postgres_failover",
        "restart",
        &[("restarts", 2), ("restart_batches", total)],
        &[],
    );
}

/// A read replica follows a writer commit by commit (applies, checkpoints, rewinds with their
/// removals): after each catch-up its root, size, checkpoints, metadata and proofs equal the
/// writer's; one that fell behind the tombstones' horizon reloads and still matches; readers
/// during catch-ups always get a proof of the root they read with it.
#[test]
fn a_replica_serves_exactly_the_writers_tree_after_every_catch_up() {
    use integration_tests::steps::{history_step, HISTORY};
    use tree_core::History;
    use tree_engines::{DbConfig, DbReplica, SharedDbTree};

    let cluster = PgCluster::start().unwrap();
    let config = fresh_tree(&cluster, "replicated");
    let mut tree = open(&config, Depth::new(10).unwrap());
    tree.set_history_config(HISTORY).unwrap();
    history_step(&mut tree, 7, 1).unwrap();
    let db = DbConfig::new(cluster.url()).tree(config.tree.clone());
    let (mut replica, served) = DbReplica::open::<MixHasher>(&db).unwrap();
    let served = Arc::new(SharedDbTree::new(served));
    assert_eq!(served.read(|t| t.root()), tree.root());

    // Readers check every (root, proof) pair they get while the replica catches up.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (served, stop) = (served.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut checked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    served.read(|t| {
                        let n = t.next_index();
                        if n > 0 {
                            let index = (checked * 31 + r) % n;
                            let proof = t.proof(index).unwrap();
                            let leaf = t.get(index).unwrap();
                            assert_eq!(proof.compute_root(&leaf), t.root(), "a torn read");
                        }
                    });
                    checked += 1;
                }
                checked
            })
        })
        .collect();

    let same = |served: &SharedDbTree<MixHasher>, tree: &Tree| {
        served.read(|t| {
            assert_eq!(t.root(), tree.root());
            assert_eq!(t.next_index(), tree.next_index());
            assert_eq!(t.metadata().unwrap(), tree.metadata().unwrap());
            assert_eq!(t.checkpoints().unwrap(), tree.checkpoints().unwrap());
            assert_eq!(t.roots().unwrap(), tree.roots().unwrap());
            for index in (0..tree.next_index()).step_by(7) {
                assert_eq!(t.proof(index).unwrap(), tree.proof(index).unwrap());
            }
        });
    };
    let mut rewinds = 0;
    for s in 2..120u64 {
        rewinds += u64::from(history_step(&mut tree, 7, s).unwrap());
        if s % 3 == 0 {
            let lag = replica.catch_up(&served).unwrap();
            assert_eq!(lag.commits, tree.store().commits());
            same(&served, &tree);
        }
    }
    assert!(rewinds > 0, "the workload rewound nothing");
    // Far behind: more commits than tombstones are kept, so the replica reloads the tree.
    for s in 120..1400u64 {
        tree.checkpoint(s * 2).unwrap();
    }
    let lag = replica.catch_up(&served).unwrap();
    assert!(lag.caught_up > 1024, "{lag:?}");
    same(&served, &tree);
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    report::record(
        "postgres_failover",
        "replica",
        &[("replica_catch_ups", 40), ("replica_rewinds", rewinds)],
        &[],
    );
}

/// A replica across a Postgres crash: while the server is down its catch-up waits on the
/// reconnect (serving its last state meanwhile); once the server is back it reconnects and
/// catches up with what the writer committed before and after, exactly.
#[test]
fn a_replica_resumes_after_a_postgres_crash() {
    use tree_engines::{DbConfig, DbReplica, SharedDbTree};

    let cluster = PgCluster::start().unwrap();
    let config = fresh_tree(&cluster, "replica-restart");
    let mut tree = open(&config, Depth::new(DEPTH).unwrap());
    let seed = 41;
    for k in 1..=5 {
        tree.apply(batch(seed, k, tree.next_index())).unwrap();
    }
    let db = DbConfig::new(cluster.url()).tree(config.tree.clone());
    let (mut replica, served) = DbReplica::open::<MixHasher>(&db).unwrap();
    let served = Arc::new(SharedDbTree::new(served));
    assert_eq!(served.read(|t| t.root()), tree.root());

    cluster.stop_immediate().unwrap();
    let waiting = {
        let served = served.clone();
        std::thread::spawn(move || {
            // Blocks on the reconnect until the server is back (within the 30 s window).
            let lag = replica.catch_up(&served);
            (replica, lag)
        })
    };
    std::thread::sleep(Duration::from_millis(800));
    // Meanwhile the replica serves its last committed state.
    served.read(|t| assert_eq!(t.root(), model_after(seed, 5).root()));
    cluster.start_again().unwrap();
    let (mut replica, lag) = waiting.join().unwrap();
    lag.unwrap();
    for k in 6..=9 {
        tree.apply(batch(seed, k, tree.next_index())).unwrap();
    }
    let lag = replica.catch_up(&served).unwrap();
    assert_eq!(lag.commits, tree.store().commits());
    served.read(|t| {
        assert_eq!(t.root(), tree.root());
        assert_eq!(t.root(), model_after(seed, 9).root());
        assert_eq!(t.proof(3).unwrap(), tree.proof(3).unwrap());
    });
    report::record(
        "postgres_failover",
        "replica_restart",
        &[("restarts", 1), ("replica_restarts", 1)],
        &[],
    );
}

/// Polls `done` every 10 ms for up to `limit`; whether it came true.
fn until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A listening replica is woken by its own tree's commits (LISTEN/NOTIFY), not by another
/// tree's, and listens again after a Postgres crash; one told not to listen is never woken.
/// Every wait below is a minute long: only a notification ends it within the test's time.
#[test]
fn a_listening_replica_wakes_on_its_own_trees_commits() {
    use tree_engines::{DbConfig, DbReplica, SharedDbTree};

    let cluster = PgCluster::start().unwrap();
    let ours = fresh_tree(&cluster, "listened");
    let other = fresh_tree(&cluster, "neighbour");
    let depth = Depth::new(DEPTH).unwrap();
    let (mut tree, mut neighbour) = (open(&ours, depth), open(&other, depth));
    let seed = 43;
    tree.apply(batch(seed, 1, 0)).unwrap();
    let db = DbConfig::new(cluster.url()).tree(ours.tree.clone());
    let (mut replica, served) = DbReplica::open::<MixHasher>(&db).unwrap();
    let served = SharedDbTree::new(served);
    let minute = Duration::from_secs(60);
    assert!(until(Duration::from_secs(10), || replica.is_listening()));
    // The listener's own wake on connecting (commits may have landed before it listened).
    replica.wait_for_commit(Duration::ZERO);

    neighbour.apply(batch(seed + 1, 1, 0)).unwrap();
    assert!(
        !replica.wait_for_commit(Duration::from_millis(500)),
        "woken by another tree's commit"
    );
    let mut k = 1;
    let mut commit_and_catch_up = |tree: &mut Tree, replica: &mut DbReplica| {
        k += 1;
        tree.apply(batch(seed, k, tree.next_index())).unwrap();
        assert!(replica.wait_for_commit(minute), "not woken by commit {k}");
        let lag = replica.catch_up(&served).unwrap();
        assert_eq!(lag.commits, tree.store().commits());
        assert!(lag.caught_up >= 1, "{lag:?}");
        served.read(|t| {
            assert_eq!(t.root(), tree.root());
            assert_eq!(t.root(), model_after(seed, k).root());
        });
    };
    for _ in 0..3 {
        commit_and_catch_up(&mut tree, &mut replica);
    }
    // A crash of Postgres ends the listening session; the listener reconnects by itself.
    cluster.stop_immediate().unwrap();
    assert!(until(Duration::from_secs(10), || !replica.is_listening()));
    cluster.start_again().unwrap();
    assert!(until(Duration::from_secs(30), || replica.is_listening()));
    replica.wait_for_commit(Duration::ZERO);
    commit_and_catch_up(&mut tree, &mut replica);

    // Told not to listen: never listening, never woken.
    let mut quiet = db.clone();
    quiet.postgres.listen = false;
    let (deaf, _) = DbReplica::open::<MixHasher>(&quiet).unwrap();
    tree.apply(batch(seed, 99, tree.next_index())).unwrap();
    assert!(!deaf.wait_for_commit(Duration::from_millis(300)));
    assert!(!deaf.is_listening());
    report::record(
        "postgres_failover",
        "listen",
        &[("notified_catch_ups", 4), ("restarts", 1)],
        &[],
    );
}

/// A replica reading a hot standby (streaming the primary's WAL): the standby refuses LISTEN,
/// so the replica polls, and after every commit on the primary it catches up to exactly the
/// writer's tree once the standby has replayed it.
#[test]
fn a_replica_of_a_hot_standby_polls_and_serves_the_primarys_tree() {
    use tree_engines::{DbConfig, DbReplica, SharedDbTree};

    let primary = PgCluster::start().unwrap();
    let config = fresh_tree(&primary, "on-standby");
    let mut tree = open(&config, Depth::new(DEPTH).unwrap());
    let seed = 47;
    tree.apply(batch(seed, 1, 0)).unwrap();
    let standby = primary.hot_standby().unwrap();
    let db = DbConfig::new(standby.url()).tree(config.tree.clone());
    // The standby has the tree once it has replayed the primary's WAL up to its first commit.
    let mut opened = None;
    assert!(until(Duration::from_secs(30), || {
        opened = DbReplica::open::<MixHasher>(&db).ok();
        opened.is_some()
    }));
    let Some((mut replica, served)) = opened else {
        unreachable!("opened above")
    };
    let served = SharedDbTree::new(served);
    assert!(
        until(Duration::from_secs(10), || replica
            .listen_refusal()
            .is_some()),
        "the standby did not refuse LISTEN"
    );
    assert!(!replica.is_listening());
    for k in 2..=6 {
        tree.apply(batch(seed, k, tree.next_index())).unwrap();
        let commits = tree.store().commits();
        let deadline = Instant::now() + Duration::from_secs(30);
        // What `serve --replica` does without notifications: look every 20 ms.
        while replica.catch_up(&served).unwrap().commits != commits {
            assert!(
                Instant::now() < deadline,
                "the standby never showed commit {commits}"
            );
            replica.wait_for_commit(Duration::from_millis(20));
        }
        served.read(|t| {
            assert_eq!(t.root(), tree.root());
            assert_eq!(t.root(), model_after(seed, k).root());
            assert_eq!(t.proof(5).unwrap(), tree.proof(5).unwrap());
        });
    }
    report::record(
        "postgres_failover",
        "hot_standby",
        &[("standby_catch_ups", 5)],
        &[],
    );
}
