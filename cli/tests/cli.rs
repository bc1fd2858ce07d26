//! The `canopy` binary driven as a user drives it: spawned, fed events files, killed mid-way and
//! restarted, given bad input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hasher::{Fr, PoseidonHasher};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tree_core::{Depth, MerkleTree, OptimalMerkleTree, UpdateBatch};

fn canopy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(args)
        .output()
        .unwrap()
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = canopy(&all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fails_with(args: &[&str], needle: &str) {
    let out = canopy(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line on error: {stderr:?}");
}

/// One block's registrations (leaf values) and removals (indices).
type TestBlock = (Vec<u64>, Vec<u64>);

/// Blocks 1..=n: registrations of seeded leaves and a removal from block 2 on.
fn events(n: u64, per_block: u64) -> (String, Vec<TestBlock>) {
    let mut rng = StdRng::seed_from_u64(n);
    let (mut text, mut blocks, mut next) = (String::new(), Vec::new(), 0u64);
    for b in 1..=n {
        let register: Vec<u64> = (0..per_block).map(|_| rng.gen_range(1..u64::MAX)).collect();
        let remove: Vec<u64> = if next > 0 {
            vec![rng.gen_range(0..next)]
        } else {
            vec![]
        };
        let reg: Vec<String> = register.iter().map(u64::to_string).collect();
        text.push_str(
            &serde_json::json!({"block": b, "register": reg, "remove": remove}).to_string(),
        );
        text.push('\n');
        next += per_block;
        blocks.push((register, remove));
    }
    (text, blocks)
}

/// The root after all blocks, computed in memory with the library.
fn expected_root(depth: u8, blocks: &[TestBlock]) -> String {
    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(depth).unwrap());
    for (register, remove) in blocks {
        let mut batch = UpdateBatch::new();
        batch.set_range(tree.next_index(), register.iter().map(|&v| Fr::from(v)));
        for &i in remove {
            batch.delete(i);
        }
        tree.apply(batch).unwrap();
    }
    let mut hex = String::from("0x");
    for b in hasher::fr_to_be_bytes(&tree.root()) {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

fn write(path: &Path, text: &str) {
    std::fs::File::create(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

#[test]
fn init_apply_root_proof_rewind_export_import_check() {
    operator_cycle("sled", "redb");
}

/// The same on a redb database (every command after `init` detects the engine), with the
/// snapshot imported into sled: the engines hold the same tree.
#[test]
fn init_apply_root_proof_rewind_export_import_check_on_redb() {
    operator_cycle("redb", "sled");
}

fn operator_cycle(engine: &str, import_engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    let init = ok_json(&["init", "--db", db_s, "--depth", "12", "--engine", engine]);
    assert_eq!(init["engine"], engine);
    assert_eq!(
        db.join("canopy.redb").is_file(),
        engine == "redb",
        "the database is a {engine} database"
    );
    let (text, blocks) = events(6, 5);
    let file = dir.path().join("events.jsonl");
    write(&file, &text);
    let applied = ok_json(&["apply", "--db", db_s, file.to_str().unwrap()]);
    assert_eq!(applied["applied"], 6);
    let root = ok_json(&["root", "--db", db_s]);
    assert_eq!(root["root"], expected_root(12, &blocks));
    assert_eq!(root["last_block"], 6);
    // Re-applying the same file is refused block by block: nothing changes.
    let again = ok_json(&["apply", "--db", db_s, file.to_str().unwrap()]);
    assert_eq!(
        (again["applied"].as_u64(), again["skipped"].as_u64()),
        (Some(0), Some(6))
    );
    let proof = ok_json(&["proof", "--db", db_s, "3"]);
    assert_eq!(proof["path_elements"].as_array().unwrap().len(), 12);
    // A reorg back to block 4, as the library computes it.
    ok_json(&["rewind", "--db", db_s, "4"]);
    assert_eq!(
        ok_json(&["root", "--db", db_s])["root"],
        expected_root(12, &blocks[..4])
    );
    fails_with(&["rewind", "--db", db_s, "5"], "unknown block 5");
    // Snapshot round trip, with and against the expected root.
    let snap = dir.path().join("tree.snap");
    ok_json(&["export", "--db", db_s, snap.to_str().unwrap()]);
    let copy = dir.path().join("copy");
    let want = expected_root(12, &blocks[..4]);
    fails_with(
        &[
            "import",
            "--db",
            copy.to_str().unwrap(),
            snap.to_str().unwrap(),
            "--expect-root",
            "0x1234",
        ],
        "not the expected root",
    );
    let copy2 = dir.path().join("copy2");
    let imported = ok_json(&[
        "import",
        "--db",
        copy2.to_str().unwrap(),
        snap.to_str().unwrap(),
        "--expect-root",
        &want,
        "--engine",
        import_engine,
    ]);
    assert_eq!(imported["root"], want);
    assert_eq!(copy2.join("canopy.redb").is_file(), import_engine == "redb");
    assert_eq!(
        ok_json(&["root", "--db", copy2.to_str().unwrap()])["root"],
        want
    );
    assert_eq!(
        ok_json(&["check", "--db", copy2.to_str().unwrap()])["ok"],
        true
    );
    fails_with(
        &[
            "import",
            "--db",
            copy2.to_str().unwrap(),
            snap.to_str().unwrap(),
        ],
        "not empty",
    );
}

/// The same commands on a PostgreSQL database (a throw-away cluster): `--db postgres://…` and
/// `--tree NAME`, two trees in one database, a snapshot of one imported into the other.
#[test]
fn init_apply_root_proof_rewind_export_import_check_on_postgres() {
    let cluster = pg_harness::PgCluster::start().unwrap();
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    let init = ok_json(&["init", "--db", &url, "--tree", "a", "--depth", "12"]);
    assert_eq!(init["engine"], "postgres");
    let (text, blocks) = events(6, 5);
    let file = dir.path().join("events.jsonl");
    write(&file, &text);
    let applied = ok_json(&["apply", "--db", &url, "--tree", "a", file.to_str().unwrap()]);
    assert_eq!(applied["applied"], 6);
    let root = ok_json(&["root", "--db", &url, "--tree", "a"]);
    assert_eq!(root["root"], expected_root(12, &blocks));
    // Another tree of the same database is another namespace: it does not exist yet.
    fails_with(
        &["root", "--db", &url, "--tree", "b"],
        "no Canopy tree there",
    );
    fails_with(&["init", "--db", &url, "--tree", "a"], "not empty");
    let proof = ok_json(&["proof", "--db", &url, "--tree", "a", "3"]);
    assert_eq!(proof["path_elements"].as_array().unwrap().len(), 12);
    ok_json(&["rewind", "--db", &url, "--tree", "a", "4"]);
    let want = expected_root(12, &blocks[..4]);
    assert_eq!(
        ok_json(&["root", "--db", &url, "--tree", "a"])["root"],
        want
    );
    let snap = dir.path().join("tree.snap");
    ok_json(&[
        "export",
        "--db",
        &url,
        "--tree",
        "a",
        snap.to_str().unwrap(),
    ]);
    let imported = ok_json(&[
        "import",
        "--db",
        &url,
        "--tree",
        "b",
        snap.to_str().unwrap(),
        "--expect-root",
        &want,
    ]);
    assert_eq!(imported["root"], want);
    assert_eq!(ok_json(&["check", "--db", &url, "--tree", "b"])["ok"], true);
    // And out to a sled directory: the engines hold the same tree.
    let copy = dir.path().join("copy");
    ok_json(&[
        "import",
        "--db",
        copy.to_str().unwrap(),
        snap.to_str().unwrap(),
    ]);
    assert_eq!(
        ok_json(&["root", "--db", copy.to_str().unwrap()])["root"],
        want
    );
    // A password in the URL never reaches the output.
    let secret = url.replace("canopy@", "canopy:hunter2@");
    let out = canopy(&["root", "--db", &secret, "--tree", "a"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hunter2"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"));
}

/// `serve --replica` on another tree's writer: two replicas load a PostgreSQL tree, follow
/// what `apply` commits to it block by block, and answer the writer's root and proofs once
/// their `/health` shows the commit; a writer held by another is refused. The replicas poll
/// only once a minute: each block reaches them within the test's 10 s through the writer's
/// commit notification.
#[test]
fn replicas_serve_what_the_writer_commits() {
    let cluster = pg_harness::PgCluster::start().unwrap();
    let url = cluster.url();
    let dir = tempfile::tempdir().unwrap();
    ok_json(&["init", "--db", &url, "--tree", "m", "--depth", "12"]);
    let (text, blocks) = events(12, 4);
    let lines: Vec<&str> = text.lines().collect();
    let config = dir.path().join("replica.toml");
    write(
        &config,
        "[postgres]\nreplica_poll_ms = 60000\nreplica_listen_poll_ms = 60000\n",
    );
    let replicas: Vec<_> = (0..2)
        .map(|i| {
            common::spawn_server(
                &[
                    "serve",
                    "--replica",
                    "--db",
                    &url,
                    "--tree",
                    "m",
                    "--listen",
                    "127.0.0.1:0",
                    "--config",
                    config.to_str().unwrap(),
                ],
                &[],
                &dir.path().join(format!("replica{i}.log")),
            )
        })
        .collect();
    // A replica prints its port before it loads the tree and answers once it has: the first
    // answer says it loaded the tree before the first block, so that block is one it follows.
    for (_, port) in &replicas {
        let (status, health) = common::get_json(*port, "/health");
        assert_eq!(status, 200, "{health}");
        assert_eq!(health["commits"], 1, "loaded after init only: {health}");
    }
    for (k, line) in lines.iter().enumerate() {
        let file = dir.path().join(format!("block{k}.jsonl"));
        write(&file, &format!("{line}\n"));
        let applied = ok_json(&["apply", "--db", &url, "--tree", "m", file.to_str().unwrap()]);
        let want = expected_root(12, &blocks[..=k]);
        assert_eq!(applied["root"], want);
        let last = (applied["next_index"].as_u64().unwrap() - 1).to_string();
        let writer = canopy(&["--json", "proof", "--db", &url, "--tree", "m", &last]);
        for (_, port) in &replicas {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                let (status, health) = common::get_json(*port, "/health");
                assert_eq!(status, 200, "{health}");
                assert_eq!(health["status"], "replica");
                if health["last_block"] == (k + 1) as u64 {
                    // One block per commit: the look that found it was one block behind.
                    assert_eq!(health["lag_blocks"], 1, "{health}");
                    assert_eq!(health["listening"], true, "{health}");
                    assert!(health["lag_seconds"].as_f64().unwrap() < 10.0, "{health}");
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "replica stuck at {health}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            let (_, root) = common::get_json(*port, "/root");
            assert_eq!(root["root"], want, "block {}", k + 1);
            let (status, proof) = common::get_json(*port, &format!("/proof/{last}"));
            assert_eq!(status == 200, writer.status.success(), "{proof}");
            if status == 200 {
                let writer: serde_json::Value = serde_json::from_slice(&writer.stdout).unwrap();
                assert_eq!(proof["path_elements"], writer["path_elements"]);
            }
        }
    }
    let (_, metrics) = common::http(replicas[0].1, "GET", "/metrics", None);
    assert!(metrics.contains("canopy_replica_commits"), "{metrics}");
    assert!(metrics.contains("canopy_replica_listening 1"), "{metrics}");
    assert!(metrics.contains("canopy_replica_lag_blocks 1"), "{metrics}");
    // A replica of a tree that does not exist is refused at start.
    let out = canopy(&[
        "serve",
        "--replica",
        "--db",
        &url,
        "--tree",
        "nope",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no tree named"),
        "{out:?}"
    );
}

#[test]
fn bad_events_and_bad_databases_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    fails_with(&["root", "--db", db_s], "no Canopy tree");
    ok_json(&["init", "--db", db_s, "--depth", "8"]);
    fails_with(&["init", "--db", db_s], "not empty");
    // A usage error (clap's own message, with its usage hint), not a database error.
    let rocks = canopy(&["init", "--db", db_s, "--engine", "rocks"]);
    assert!(!rocks.status.success());
    assert!(String::from_utf8_lossy(&rocks.stderr).contains("unknown engine \"rocks\""));
    let bad = dir.path().join("bad.jsonl");
    for (text, needle) in [
        ("{\"block\": 1, \"register\": [\"1\"]}\n{\"block\": 2, \"register\": [\"x\"]}\n", "events line 2"),
        ("{\"block\": 1}\nnot json\n", "events line 2"),
        ("{\"block\": 2}\n{\"block\": 1}\n", "events line 2: block 1 does not follow block 2"),
        ("{\"block\": 9, \"remove\": [0]}\n", "events line 1: block 9: cannot delete unset leaf 0"),
        ("{\"block\": 9, \"register\": [\"21888242871839275222246405745257275088548364400416034343698204186575808495617\"]}\n", "not below the field modulus"),
    ] {
        write(&bad, text);
        fails_with(&["apply", "--db", db_s, bad.to_str().unwrap()], needle);
    }
    fails_with(
        &["apply", "--db", db_s, "/nonexistent/events.jsonl"],
        "No such file",
    );
    fails_with(&["proof", "--db", db_s, "0"], "is not a member");
    // A database another process holds is refused at once.
    let held =
        tree_engines::DbTree::<PoseidonHasher>::open_existing(&tree_engines::DbConfig::new(&db))
            .unwrap();
    fails_with(&["root", "--db", db_s], "locked");
    drop(held);
    assert!(canopy(&["root", "--db", db_s]).status.success());
}

/// A new depth-16 database and an events file holding `text`, in a directory that lives as
/// long as the returned guard: (guard, database path, events path).
fn fresh_db_and_events(text: &str) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").to_str().unwrap().to_owned();
    ok_json(&["init", "--db", &db, "--depth", "16"]);
    let file = dir.path().join("events.jsonl");
    write(&file, text);
    let file = file.to_str().unwrap().to_owned();
    (dir, db, file)
}

/// kill -9 during `apply`, then run it again: the database ends exactly at the root of all
/// blocks, whatever block the kill interrupted. The kills land at random points of an
/// uninterrupted run's duration, measured first (a faster build must not move them past the end).
#[test]
fn killed_apply_resumes_where_it_stopped() {
    let (text, blocks) = events(1000, 20);
    let want = expected_root(16, &blocks);
    let full_run = {
        let (_dir, db, file) = fresh_db_and_events(&text);
        let started = std::time::Instant::now();
        assert_eq!(ok_json(&["apply", "--db", &db, &file])["root"], want);
        started.elapsed()
    };
    let mut rng = StdRng::seed_from_u64(99);
    let mut interrupted = 0;
    for _ in 0..4 {
        let (_dir, db, file) = fresh_db_and_events(&text);
        let (db_s, file) = (db.as_str(), file.as_str());
        let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
            .args(["apply", "--db", db_s, file])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(full_run.mul_f64(rng.gen_range(0.2..0.8)));
        let _ = child.kill();
        let _ = child.wait();
        // The lock of the killed process is gone with it.
        let resumed = ok_json(&["apply", "--db", db_s, file]);
        if resumed["skipped"].as_u64().unwrap_or(0) > 0
            && resumed["applied"].as_u64().unwrap_or(0) > 0
        {
            interrupted += 1;
        }
        assert_eq!(resumed["root"], want);
        assert_eq!(ok_json(&["check", "--db", db_s])["ok"], true);
        assert_eq!(ok_json(&["root", "--db", db_s])["last_block"], 1000);
    }
    assert!(
        interrupted > 0,
        "no kill landed mid-file: the test proved nothing"
    );
}

#[test]
fn demo_proves_a_member_with_a_real_rln_proof() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = ok_json(&[
        "demo",
        "--db",
        db.to_str().unwrap(),
        "--members",
        "300",
        "--blocks",
        "5",
    ]);
    assert_eq!(out["merkle_witness_verified"], true);
    assert_eq!(out["rln_proof_verified"], true);
    assert_eq!(out["members"], 300);
    fails_with(&["demo", "--blocks", "1"], "--blocks >= 3");
    // The `[prover]` section: no tables (the bases alone) still proves; a budget no table
    // fits and a misspelt key are one-line errors.
    let config = dir.path().join("prover.toml");
    write(
        &config,
        "[prover]\ntable_budget_bytes = 0\narithmetic = \"portable\"\n",
    );
    let config = config.to_str().unwrap();
    let demo = ["demo", "--members", "40", "--blocks", "3", "--config"];
    let out = ok_json(&[&demo[..], &[config]].concat());
    assert_eq!(out["rln_proof_verified"], true);
    let small = dir.path().join("small.toml");
    write(&small, "[prover]\ntable_budget_bytes = 1000\n");
    fails_with(
        &[&demo[..], &[small.to_str().unwrap()]].concat(),
        "the budget is 1000",
    );
    let typo = dir.path().join("typo.toml");
    write(&typo, "[prover]\ntable_budget = 0\n");
    fails_with(
        &[&demo[..], &[typo.to_str().unwrap()]].concat(),
        "table_budget",
    );
}

/// `canopy serve` answers a real HTTP client on loopback while it applies an events file;
/// bad requests get 4xx JSON errors.
#[test]
fn serve_answers_while_it_applies_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    ok_json(&["init", "--db", db_s, "--depth", "12"]);
    let (text, blocks) = events(30, 10);
    let file = dir.path().join("events.jsonl");
    write(&file, &text);
    let (mut child, port) = common::spawn_server(
        &[
            "serve",
            "--db",
            db_s,
            "--listen",
            "127.0.0.1:0",
            "--events",
            file.to_str().unwrap(),
        ],
        &[],
        &dir.path().join("serve.log"),
    );

    let mut last = serde_json::Value::Null;
    for _ in 0..300 {
        let (status, health) = common::get_json(port, "/health");
        assert_eq!(status, 200);
        // Every proof served while blocks land is consistent with the root served with it.
        // (Member 0 may be removed by a block: then it is "not a member", in words.)
        let (status, proof) = common::get_json(port, "/proof/0");
        if status == 200 {
            assert_eq!(proof["path_elements"].as_array().unwrap().len(), 12);
        } else {
            assert_eq!(status, 404);
            assert!(proof["error"].as_str().unwrap().contains("is not a member"));
        }
        last = health["last_block"].clone();
        if last == 30 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(last, 30, "the events were not applied");
    let (_, root) = common::get_json(port, "/root");
    assert_eq!(root["root"], expected_root(12, &blocks));
    let (_, roots) = common::get_json(port, "/roots");
    assert_eq!(roots["roots"][0], root["root"]);
    assert_eq!(roots["roots"].as_array().unwrap().len(), 5);
    let kept = (0u64..)
        .find(|i| !blocks.iter().any(|(_, removed)| removed.contains(i)))
        .unwrap();
    let (status, proof) = common::get_json(port, &format!("/proof/{kept}"));
    assert_eq!(status, 200);
    assert_eq!(proof["root"], root["root"]);
    assert_eq!(
        proof["zerokit_path_elements_le"].as_str().unwrap().len(),
        12 * 64
    );
    let (status, body) = common::get_json(port, "/proof/abc");
    assert_eq!(status, 400);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .contains("not a member index"));
    let (status, body) = common::get_json(port, "/proof/100000");
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("is not a member"));
    assert_eq!(common::get_json(port, "/nope").0, 404);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
}

/// `canopy serve` of a new empty tree (depth 12) with `env`: its directory, process and port.
fn serve_empty(env: &[(&str, &str)]) -> (tempfile::TempDir, common::KillOnDrop, u16) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    ok_json(&["init", "--db", db_s, "--depth", "12"]);
    let (child, port) = common::spawn_server(
        &["serve", "--db", db_s, "--listen", "127.0.0.1:0"],
        env,
        &dir.path().join("serve.log"),
    );
    (dir, child, port)
}

/// A client that sends no request, or stays idle after one, loses its connection after the
/// header-read timeout, and the server goes on answering.
#[test]
fn slow_clients_are_cut_off() {
    use std::io::Read;
    let (_dir, _child, port) = serve_empty(&[("CANOPY_SERVER__HEADER_READ_TIMEOUT_MS", "300")]);
    // Silent: closed by the server (EOF), long before the read timeout of this test.
    let mut silent = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buffer = [0u8; 64];
    let n = silent.read(&mut buffer).unwrap_or(0);
    assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&buffer[..n]));
    assert!(started.elapsed() < Duration::from_secs(10));

    // The server still answers.
    assert_eq!(common::http(port, "GET", "/root", None).0, 200);
}

/// A client with its cap of requests in flight gets 429 for one more, before it takes a
/// server-wide place, and its place back once that request ends. The request in flight has sent
/// its headers and not its body, and is held past the header-read timeout: that timeout is for
/// headers, a slow body is the request timeout's.
#[test]
fn greedy_clients_are_refused_past_their_cap() {
    use std::io::Write;
    let (_dir, _child, port) = serve_empty(&[
        ("CANOPY_SERVER__MAX_CONCURRENT_PER_CLIENT", "1"),
        ("CANOPY_SERVER__HEADER_READ_TIMEOUT_MS", "300"),
    ]);
    // A request in flight: its headers sent, its body not yet.
    let mut pending = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        pending,
        "POST /verify HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    )
    .unwrap();
    pending.flush().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let mut refused = None;
    for _ in 0..100 {
        let (status, body) = common::http(port, "GET", "/root", None);
        if status == 429 {
            refused = Some(body);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = refused.expect("a second request of the same client was not refused");
    assert!(
        refused.contains("more than 1 requests of this client"),
        "{refused}"
    );
    drop(pending);
    let mut answered = false;
    for _ in 0..250 {
        if common::http(port, "GET", "/root", None).0 == 200 {
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(answered, "the client's place was not given back");
}

fn hex(bytes: &[u8]) -> String {
    format!(
        "0x{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// `canopy verify`: a file of real proofs (the demo's, re-randomized) and spoiled ones against
/// the database's root window, one verdict per line in order, then the summary; the same from
/// stdin and as JSON.
#[test]
fn verify_checks_a_file_of_proofs_in_batches() {
    use rln_glue::verifier::{proof_from_bytes, proof_to_bytes, rerandomize, RlnVerifier};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    let demo = ok_json(&["demo", "--db", db_s, "--members", "100", "--blocks", "3"]);
    let request = demo["verify_request"].clone();
    let proof_hex = request["proof"].as_str().unwrap().trim_start_matches("0x");
    let proof_bytes: Vec<u8> = (0..proof_hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&proof_hex[i..i + 2], 16).unwrap())
        .collect();
    let proof = proof_from_bytes(&proof_bytes).unwrap();
    let vk = RlnVerifier::from_bytes(&rln_glue::zerokit::verifying_key_bytes()).unwrap();
    let mut rng = StdRng::seed_from_u64(5);

    let mut lines = vec![request.to_string()];
    let mut expected = vec!["valid"];
    for _ in 0..10 {
        let mut fresh = request.clone();
        fresh["proof"] = hex(&proof_to_bytes(&rerandomize(
            &proof,
            vk.verifying_key(),
            &mut rng,
        )))
        .into();
        lines.push(fresh.to_string());
        expected.push("valid");
    }
    let mut spoil = |field: &str, value: &str, verdict: &'static str| {
        let mut item = request.clone();
        item[field] = value.into();
        lines.push(item.to_string());
        expected.push(verdict);
    };
    spoil("signal", "0x0102", "signal_mismatch");
    spoil("nullifier", "0x05", "bad_proof");
    spoil("root", "0x02", "unknown_root");
    spoil("proof", &proof_hex[..200], "malformed");
    spoil("y", &format!("0x{}", "f".repeat(64)), "malformed");
    lines.push("not json".into());
    expected.push("malformed");
    lines.push(String::new()); // blank lines are skipped
    let file = dir.path().join("proofs.jsonl");
    write(&file, &(lines.join("\n") + "\n"));

    let out = canopy(&["verify", "--db", db_s, file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let printed: Vec<&str> = text.lines().collect();
    assert_eq!(printed.len(), expected.len() + 1, "{text}");
    for (i, (line, verdict)) in printed.iter().zip(&expected).enumerate() {
        assert!(
            line.starts_with(&format!("{} {verdict}", i + 1)),
            "line {}: {line:?}, expected {verdict}",
            i + 1
        );
    }
    assert!(
        printed[expected.len()].starts_with("17 proofs: 11 valid, 6 not"),
        "{text}"
    );

    let json = ok_json(&["verify", "--db", db_s, file.to_str().unwrap()]);
    let verdicts = common::verdict_names(&json);
    assert_eq!(verdicts, expected);
    assert_eq!(json["summary"]["counts"]["valid"], 11);
    assert_eq!(json["summary"]["counts"]["malformed"], 3);

    // From stdin.
    let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(["--json", "verify", "--db", db_s, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(std::fs::read(&file).unwrap().as_slice())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let from_stdin: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(from_stdin["verdicts"], json["verdicts"]);

    // No tree there, no key there: one-line errors.
    fails_with(
        &[
            "verify",
            "--db",
            dir.path().join("none").to_str().unwrap(),
            file.to_str().unwrap(),
        ],
        "no Canopy tree",
    );
    fails_with(
        &[
            "verify",
            "--db",
            db_s,
            "--verifying-key",
            "/nonexistent",
            file.to_str().unwrap(),
        ],
        "verifying key",
    );
}

/// `canopy follow --once` of a contract on a node that is not there (nothing listens on port
/// 1), into `db`, giving up after `once_timeout` seconds; then `extra`.
fn follow_nowhere<'a>(db: &'a str, once_timeout: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "follow",
        "--rpc",
        "http://127.0.0.1:1",
        "--contract",
        "0x5FbDB2315678afecb367f032d93F642f64180aa3",
        "--db",
        db,
        "--once",
        "--once-timeout",
        once_timeout,
    ];
    args.extend_from_slice(extra);
    args
}

/// The command's last line on stderr says that `address` could not be bound.
fn assert_cannot_listen(stderr: &str, address: &str) {
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with(&format!("error: cannot listen on {address}")),
        "{stderr}"
    );
}

/// `follow --serve` and `serve` on an address that is taken, or with a server setting that is
/// invalid, stop before any work: status 2 and one clear line, no following without a server.
#[test]
fn a_server_that_cannot_start_stops_the_command_at_once() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    // No node listens on port 1: without the check at start the follower would retry until
    // its deadline (status 3) instead.
    let follow = |extra: &[&str]| {
        let started = std::time::Instant::now();
        let out = canopy(&follow_nowhere(db, "20", extra));
        (out, started.elapsed())
    };
    let (out, took) = follow(&["--serve", &address]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_cannot_listen(&stderr, &address);
    assert!(
        took < Duration::from_secs(10),
        "stopped only after {took:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Settings that cannot work: refused before anything is bound.
    let config = dir.path().join("canopy.toml");
    for (settings, says) in [
        (
            "[server]\ncors_origins = [\"http://bad\\u0001origin\"]\n",
            "is not an origin",
        ),
        (
            "[jsonrpc]\nforward_deadline_ms = 10000\n",
            "jsonrpc.forward_deadline_ms (10000) plus jsonrpc.latest_wait_ms (1000) must be below",
        ),
    ] {
        write(&config, settings);
        let (out, _) = follow(&[
            "--serve",
            "127.0.0.1:0",
            "--config",
            config.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{settings}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening on"));
    }

    ok_json(&["init", "--db", db, "--depth", "20"]);
    let out = canopy(&["serve", "--db", db, "--listen", &address]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_cannot_listen(&stderr, &address);
    drop(taken);
}

/// A log reader that goes away (`canopy follow … 2>&1 | head`) costs the lines, not a panic:
/// the command ends as it would have (here: its `--once` deadline, status 3).
#[test]
fn a_closed_log_pipe_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args(follow_nowhere(db.to_str().unwrap(), "2", &[]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both pipes closed before the first line: every write fails with EPIPE.
    drop(child.stderr.take());
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{status:?}");
}
