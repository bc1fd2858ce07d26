//! `canopy follow` against a real local chain (hardhat's node, started and stopped here):
//! caught up with `--once`, killed with SIGKILL at random moments while the chain advances and
//! restarted, and serving proofs with `--serve`; the contract's `root()` and `getMerkleProof`
//! are the oracle.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy::eips::BlockId;
use chain_harness::workload::{Sent, Workload};
use chain_harness::LocalChain;
use follower::{BlockMeta, ChainClient, RetryConfig};
use rand::{Rng, SeedableRng};
use tree_core::{History, MerkleTree};
use tree_engines::{DbConfig, DbTree};

fn follow_once(url: &str, contract: &str, db: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .args([
            "--json",
            "follow",
            "--rpc",
            url,
            "--contract",
            contract,
            "--db",
            db,
            "--once",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "canopy follow --once failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn hex(value: &hasher::Fr) -> String {
    follower::block::fr_hex(value)
}

fn trials() -> u64 {
    std::env::var("CANOPY_FOLLOW_KILL_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_survives_kill_9_and_serves_the_contracts_tree() {
    let chain = Arc::new(LocalChain::start().await.unwrap());
    let contract = chain.deploy_membership(false).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let url = chain.url().to_string();
    let contract_s = contract.to_string();
    let client = ChainClient::new(chain.url().clone(), contract, RetryConfig::default()).unwrap();
    let mut workload = Workload::new(21);
    let mut sent = Sent::default();
    for _ in 0..20 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap().to_owned();

    // Caught up once: the contract's root at the head.
    let head = chain.block_number().await.unwrap();
    let head_before = head;
    let first = follow_once(&url, &contract_s, &db_s);
    assert_eq!(first["block"], head);
    let root = client.root(BlockId::Number(head.into())).await.unwrap();
    assert_eq!(first["root"], hex(&root));
    let commits_before = DbTree::<hasher::PoseidonHasher>::open_existing(&DbConfig::new(&db))
        .unwrap()
        .commits();

    // SIGKILL at random moments while a miner keeps adding blocks.
    let mining = Arc::new(AtomicBool::new(true));
    let miner = {
        let (chain, mining) = (chain.clone(), mining.clone());
        let mut workload = workload.clone();
        tokio::spawn(async move {
            let mut sent = Sent::default();
            // At most 100 blocks, so the 128-checkpoint window keeps every block committed
            // during the kills and the exact commit count below holds on any machine speed.
            let mut mined = 0;
            while mining.load(Ordering::Relaxed) && mined < 100 {
                workload.block(&chain, contract, &mut sent).await.unwrap();
                mined += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (sent, workload)
        })
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let mut killed_while_running = 0u64;
    for trial in 0..trials() {
        let log = dir.path().join(format!("trial-{trial}.log"));
        let mut child = common::KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_canopy"))
                .args([
                    "follow",
                    "--rpc",
                    &url,
                    "--contract",
                    &contract_s,
                    "--db",
                    &db_s,
                ])
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..900))).await;
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!(
                "trial {trial}: follower exited by itself ({status}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        child.0.kill().unwrap(); // SIGKILL
        child.0.wait().unwrap();
        killed_while_running += 1;
    }
    mining.store(false, Ordering::Relaxed);
    let (sent, workload) = miner.await.unwrap();

    // Restarted once more: it continues from the last committed block to the head.
    let head = chain.block_number().await.unwrap();
    let last = follow_once(&url, &contract_s, &db_s);
    assert_eq!(last["block"], head);
    let root = client.root(BlockId::Number(head.into())).await.unwrap();
    assert_eq!(last["root"], hex(&root), "root after {} kills", trials());

    // Every retained checkpoint is a block of this chain holding the contract's root then.
    let tree = DbTree::<hasher::PoseidonHasher>::open_existing(&DbConfig::new(&db)).unwrap();
    let checkpoints = tree.checkpoints().unwrap();
    assert!(checkpoints.windows(2).all(|w| w[0].id < w[1].id));
    for checkpoint in &checkpoints {
        let meta = BlockMeta::decode(&checkpoint.metadata).unwrap().unwrap();
        assert_eq!(meta.number, checkpoint.id);
        let (hash, _) = client.header(meta.number).await.unwrap().unwrap();
        assert_eq!(meta.hash, Some(hash));
        let theirs = client
            .root(BlockId::Number(meta.number.into()))
            .await
            .unwrap();
        assert_eq!(checkpoint.root, theirs, "checkpoint {}", meta.number);
    }
    // No block applied twice, none skipped. Each commit is one block with its checkpoint, and the
    // store's commit counter is bumped in the same atomic batch: so the commits since the first
    // sync equal the checkpoints created since (a block committed twice would be one commit more),
    // and every block holding the contract's events is among them.
    let window = tree_core::HistoryConfig::default().max_checkpoints;
    let after: Vec<u64> = checkpoints
        .iter()
        .map(|c| c.id)
        .filter(|&id| id > head_before)
        .collect();
    assert!(after.len() < window, "the window must not have pruned any");
    assert_eq!(
        tree.commits() - commits_before,
        after.len() as u64,
        "commits since the first sync vs blocks committed in {}..={head}",
        head_before + 1
    );
    let topics = follower::ContractProfile::default().topics(false);
    let logs = client.logs(head_before + 1, head, &topics).await.unwrap();
    let mut event_blocks: Vec<u64> = logs.iter().filter_map(|l| l.block_number).collect();
    event_blocks.dedup();
    assert!(!event_blocks.is_empty());
    for block in &event_blocks {
        assert!(
            after.contains(block),
            "block {block} has events but was not committed"
        );
    }
    // The member index, built after the first state sync and changed by every block since,
    // kills included, answers getMembershipInfo as the contract does for every id ever
    // registered.
    let meta = BlockMeta::decode(&tree.metadata().unwrap())
        .unwrap()
        .unwrap();
    assert!(meta.members_from.is_some(), "the member index is complete");
    let mut member_checks = 0u64;
    for id in workload.registered_ids() {
        let theirs = client
            .membership_info(*id, BlockId::Number(head.into()))
            .await
            .unwrap();
        let fr = follower::profile::canonical(*id, "id").unwrap();
        let (rate_limit, index, leaf) = follower::membership_info(&tree, &fr).unwrap();
        assert_eq!(
            (rate_limit, index, follower::profile::to_u256(&leaf)),
            theirs,
            "getMembershipInfo({id:#x}) after {} kills",
            trials()
        );
        member_checks += 1;
    }
    let members = tree.next_index();
    drop(tree);
    println!(
        "{} kills while following, {} transactions sent meanwhile ({sent:?}), {} blocks with \
         events among {} blocks committed once each, {} checkpoints checked",
        killed_while_running,
        sent.txs,
        event_blocks.len(),
        after.len(),
        checkpoints.len()
    );
    integration_tests::report::record(
        "chain",
        "kill9",
        &[
            ("kill9_trials", killed_while_running),
            ("member_checks", member_checks),
            ("mismatches", 0),
            ("root_checks", checkpoints.len() as u64 + 2),
        ],
        &[],
    );

    // --serve: the HTTP API answers with the contract's root and proofs.
    let (mut server, port) = common::spawn_server(
        &[
            "follow",
            "--rpc",
            &url,
            "--contract",
            &contract_s,
            "--db",
            &db_s,
            "--serve",
            "127.0.0.1:0",
        ],
        &[],
        &dir.path().join("serve.log"),
    );
    let get = |path: String| async move {
        let (status, body) =
            tokio::task::spawn_blocking(move || common::http(port, "GET", &path, None))
                .await
                .unwrap();
        serde_json::from_str::<serde_json::Value>(&body).map(|v| (status, v))
    };
    let (status, body) = get("/root".into()).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["root"], hex(&root));
    for index in [0, members / 2, members - 1] {
        let (status, body) = get(format!("/proof/{index}")).await.unwrap();
        let theirs = client
            .merkle_proof(index, BlockId::Number(head.into()))
            .await
            .unwrap();
        if status == 404 {
            // An erased member: the contract's leaf there is 0.
            assert!(body["error"].as_str().unwrap().contains("erased"), "{body}");
            continue;
        }
        let ours: Vec<String> = body["path_elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        let theirs: Vec<String> = theirs.iter().map(|w| format!("{w:#066x}")).collect();
        assert_eq!(ours, theirs, "proof of {index}");
    }
    let (status, body) = get(format!("/proof/{members}")).await.unwrap();
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("is not a member"));
    server.0.kill().unwrap();
    server.0.wait().unwrap();
}

/// More than one machine, on one PostgreSQL database: a leader and a standby `follow` the
/// membership contract (deployed as WakuRlnV2 is, behind its proxy) into one tree, two
/// `serve --replica` read it. The leader is killed with SIGKILL mid-stream: the standby takes
/// over from the stored block. Whenever a replica reports a block, its root and proofs are the
/// contract's at that block; at the end both replicas serve the contract's root at the head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_standby_and_replicas_on_postgres_serve_the_contracts_tree() {
    let cluster = pg_harness::PgCluster::start().unwrap();
    let pg = cluster.url();
    let chain = Arc::new(LocalChain::start().await.unwrap());
    let contract = chain.deploy_membership_proxy(true).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let (url, contract_s) = (chain.url().to_string(), contract.to_string());
    let client = ChainClient::new(chain.url().clone(), contract, RetryConfig::default()).unwrap();
    let mut workload = Workload::new(5);
    let mut sent = Sent::default();
    for _ in 0..5 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let follow = |name: &str, standby: bool| {
        let mut args = vec![
            "follow",
            "--rpc",
            &url,
            "--contract",
            &contract_s,
            "--db",
            &pg,
            "--tree",
            "waku",
        ];
        if standby {
            args.push("--standby");
        }
        common::KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_canopy"))
                .args(&args)
                .env("RUST_LOG", "warn")
                .env("CANOPY_POSTGRES__LEASE_MS", "1000")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap())
                .spawn()
                .unwrap(),
        )
    };
    let mut leader = follow("leader", false);
    // The replicas need the tree to exist: wait for the leader's first commit.
    let head = chain.block_number().await.unwrap();
    wait_for_block(&pg, head).await;
    let mut standby = follow("standby", true);
    let replicas: Vec<_> = (0..2)
        .map(|i| {
            common::spawn_server(
                &[
                    "serve",
                    "--replica",
                    "--db",
                    &pg,
                    "--tree",
                    "waku",
                    "--listen",
                    "127.0.0.1:0",
                    "--rpc",
                    &url,
                    "--contract",
                    &contract_s,
                ],
                &[],
                &dir.path().join(format!("replica{i}.log")),
            )
        })
        .collect();
    let mut checked = 0u64;
    for round in 0..12 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
        if round == 5 {
            leader.0.kill().unwrap(); // SIGKILL: the standby takes the tree over
            leader.0.wait().unwrap();
        }
        for (_, port) in &replicas {
            checked += check_replica(*port, &client).await;
        }
    }
    assert!(checked >= 12, "the replicas answered {checked} checks");
    let head = chain.block_number().await.unwrap();
    let want = hex(&client.root(BlockId::Number(head.into())).await.unwrap());
    for (_, port) in &replicas {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let port = *port;
            let (_, health) =
                tokio::task::spawn_blocking(move || common::get_json(port, "/health"))
                    .await
                    .unwrap();
            if health["last_block"] == head {
                let (_, root) =
                    tokio::task::spawn_blocking(move || common::get_json(port, "/root"))
                        .await
                        .unwrap();
                assert_eq!(root["root"], want);
                checked += check_eth_calls(port, &url, &contract_s, head).await;
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "replica at {health}, head {head}: {}",
                std::fs::read_to_string(dir.path().join("standby.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(
        standby.0.try_wait().unwrap().is_none(),
        "the standby, now leader, exited"
    );
    standby.0.kill().unwrap();
    integration_tests::report::record(
        "chain",
        "postgres_deployment",
        &[("root_checks", checked), ("mismatches", 0)],
        &[],
    );
}

/// The contract's views by `eth_call` at `block` (by number and as `latest`), through the
/// replica's JSON-RPC endpoint and straight to the node: the same answers.
async fn check_eth_calls(port: u16, node: &str, contract: &str, block: u64) -> u64 {
    use alloy::sol_types::SolCall;
    use follower::profile::IMembershipSet as C;
    let node_port = url::Url::parse(node).unwrap().port().unwrap();
    let calls = [
        C::rootCall {}.abi_encode(),
        C::nextFreeIndexCall {}.abi_encode(),
        C::getMerkleProofCall {
            index: alloy::primitives::Uint::from(1u64),
        }
        .abi_encode(),
        C::getRecentRootsCall {}.abi_encode(),
    ];
    let mut checks = 0;
    for data in calls {
        for tag in [
            serde_json::json!(format!("{block:#x}")),
            serde_json::json!("latest"),
        ] {
            let body = serde_json::json!({
                "jsonrpc": "2.0", "id": 1, "method": "eth_call",
                "params": [{"to": contract, "data": common::hex(&data)}, tag],
            });
            let ours = common::ask(port, body.clone()).await;
            let theirs = common::ask(node_port, body).await;
            assert_eq!(ours, theirs, "eth_call through the replica at {tag}");
            checks += 1;
        }
    }
    checks
}

/// Waits until the PostgreSQL tree `waku` holds `block`.
async fn wait_for_block(pg: &str, block: u64) {
    let config = DbConfig::new(pg)
        .tree("waku")
        .postgres(tree_engines::PostgresOptions {
            tree: "waku".into(),
            role: tree_postgres::Role::Reader,
            ..tree_engines::PostgresOptions::default()
        });
    for _ in 0..600 {
        let config = config.clone();
        let at = tokio::task::spawn_blocking(move || {
            DbTree::<hasher::PoseidonHasher>::open_existing(&config)
                .ok()
                .and_then(|t| BlockMeta::decode(&t.metadata().ok()?).ok().flatten())
                .map(|m| m.number)
        })
        .await
        .unwrap();
        if at.is_some_and(|at| at >= block) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the leader never committed block {block}");
}

/// The replica's root and a proof, against the contract's at the block the replica reports;
/// returns the number of checks made (0 while it has no block).
async fn check_replica(port: u16, client: &ChainClient) -> u64 {
    let (health, root, proof) = tokio::task::spawn_blocking(move || {
        // One state for all three: read the block before and after, retry if it moved.
        loop {
            let (_, before) = common::get_json(port, "/health");
            let (_, root) = common::get_json(port, "/root");
            let (_, proof) = common::get_json(port, "/proof/1");
            let (_, after) = common::get_json(port, "/health");
            if before["last_block"] == after["last_block"] {
                return (after, root, proof);
            }
        }
    })
    .await
    .unwrap();
    let Some(block) = health["last_block"].as_u64() else {
        return 0;
    };
    let at = BlockId::Number(block.into());
    let theirs = client.root(at).await.unwrap();
    assert_eq!(root["root"], hex(&theirs), "replica root at block {block}");
    if let Some(path) = proof["path_elements"].as_array() {
        let theirs = client.merkle_proof(1, at).await.unwrap();
        let theirs: Vec<String> = theirs.iter().map(|w| format!("{:#066x}", w)).collect();
        let ours: Vec<String> = path
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ours, theirs, "replica proof of member 1 at block {block}");
    }
    1
}
