//! The follower against a real local chain (hardhat's node, started and stopped here) and the
//! test membership contract built on WakuRlnV2's libraries: the contract's `root()` and
//! `getMerkleProof` are the oracle.

use alloy::eips::BlockId;
use alloy::primitives::Bytes;
use chain_harness::workload::{Sent, Workload};
use chain_harness::LocalChain;
use follower::{contract_root, FollowError, FollowerConfig, RootCheck, SyncMode};
use integration_tests::chain::{
    assert_history_on_chain, assert_members_match, check_proofs, quick_retry, root_of,
    temp_follower,
};
use integration_tests::proxy::{FaultProxy, Tamper};
use integration_tests::report;
use rand::{Rng, SeedableRng};
use tree_core::{History, HistoryConfig, MerkleTree};

fn config(sync: SyncMode) -> FollowerConfig {
    FollowerConfig {
        sync,
        retry: quick_retry(),
        poll_interval_ms: 50,
        ..FollowerConfig::default()
    }
}

/// A local node with the test contract deployed (`rate_commitment`: the older event revision),
/// automine off so each test decides what goes into a block.
async fn chain_with_contract(rate_commitment: bool) -> (LocalChain, alloy::primitives::Address) {
    let chain = LocalChain::start().await.unwrap();
    let contract = chain.deploy_membership(rate_commitment).await.unwrap();
    chain.set_automine(false).await.unwrap();
    (chain, contract)
}

fn blocks() -> u64 {
    std::env::var("CANOPY_CHAIN_BLOCKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// ≥ 300 blocks of registrations (single and batched), lazy and full erasures, expiries, reuse
/// and empty blocks. After every block: the replaying follower's root equals `root()`; a
/// state-synced follower joins half-way and must agree too; every 20 blocks random proofs equal
/// `getMerkleProof`. At the end a fresh replay over adaptive ranges lands on the same root and
/// every one of its checkpoints holds the contract's root at that block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_match_the_contract_after_every_block() {
    let (chain, contract) = chain_with_contract(false).await;
    let mut replay = temp_follower(chain.url(), contract, config(SyncMode::Replay));
    let mut state: Option<follower::Follower> = None;
    let mut workload = Workload::new(15);
    let mut sent = Sent::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut root_checks, mut proofs) = (0u64, 0u64);
    let total = blocks();
    for i in 0..total {
        let block = workload.block(&chain, contract, &mut sent).await.unwrap();
        let outcome = replay.sync_to_head().await.unwrap();
        assert_eq!(outcome.block, block);
        let expected = contract_root(replay.client(), block).await.unwrap();
        assert_eq!(root_of(&replay), expected, "replay, block {block}");
        root_checks += 1;
        if i == total / 2 {
            let mut joining = temp_follower(chain.url(), contract, config(SyncMode::State));
            let outcome = joining.sync_to_head().await.unwrap();
            assert_eq!(outcome.block, block);
            state = Some(joining);
        }
        if let Some(joining) = state.as_mut() {
            joining.sync_to_head().await.unwrap();
            assert_eq!(root_of(joining), expected, "state sync, block {block}");
            root_checks += 1;
        }
        if i % 20 == 0 {
            let members = replay.tree().read(MerkleTree::next_index);
            if members > 0 {
                let picks: Vec<u64> = (0..3).map(|_| rng.gen_range(0..members)).collect();
                proofs += check_proofs(&replay, block, &picks).await;
                if let Some(joining) = state.as_ref() {
                    proofs += check_proofs(joining, block, &picks).await;
                }
            }
        }
    }
    assert!(sent.registrations > 0 && sent.lazy_erasures > 0 && sent.full_erasures > 0);
    // The member index, replayed and backfilled after the state sync, for every id ever
    // registered.
    let last = replay.last_block().unwrap().unwrap().number;
    let ids = workload.registered_ids().to_vec();
    let mut member_checks = assert_members_match(&replay, last, &ids, "replay").await;
    if let Some(joining) = state.as_ref() {
        member_checks += assert_members_match(joining, last, &ids, "state sync").await;
    }

    // A fresh replay of everything over adaptive ranges, roots checked per range.
    let mut fresh_config = config(SyncMode::Replay);
    fresh_config.root_check = RootCheck::EveryRange;
    fresh_config.log_ranges.initial = 16;
    let mut fresh = temp_follower(chain.url(), contract, fresh_config);
    fresh
        .tree()
        .write(|t| {
            t.set_history_config(HistoryConfig {
                max_checkpoints: 10_000,
                root_window: 5,
            })
        })
        .unwrap();
    fresh.sync_to_head().await.unwrap();
    assert_eq!(root_of(&fresh), root_of(&replay));
    member_checks += assert_members_match(&fresh, last, &ids, "fresh replay").await;
    let checkpoints = fresh.tree().read(|t| t.checkpoints()).unwrap();
    for checkpoint in &checkpoints {
        let theirs = fresh
            .client()
            .root(BlockId::Number(checkpoint.id.into()))
            .await
            .unwrap();
        assert_eq!(
            checkpoint.root, theirs,
            "fresh replay, block {}",
            checkpoint.id
        );
        root_checks += 1;
    }
    let stats = replay.stats();
    println!(
        "{total} blocks: {sent:?}; {root_checks} root checks, {proofs} proofs, {member_checks} member checks; replay follower {stats:?}"
    );
    report::record(
        "chain",
        "workload",
        &[
            ("blocks", total),
            ("root_checks", root_checks),
            ("proofs", proofs),
            ("registrations", sent.registrations),
            ("erasures", sent.lazy_erasures + sent.full_erasures),
            ("member_checks", member_checks),
            ("mismatches", 0),
        ],
        &[],
    );
}

/// `evm_snapshot`/`evm_revert` and a different, longer branch: the follower rewinds to the last
/// common checkpoint and converges; a reorg past its checkpoint window is a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorgs_rewind_to_the_common_block_and_converge() {
    let (chain, contract) = chain_with_contract(false).await;
    let mut follower = temp_follower(chain.url(), contract, config(SyncMode::Replay));
    let mut shallow = temp_follower(chain.url(), contract, config(SyncMode::Replay));
    shallow
        .tree()
        .write(|t| {
            t.set_history_config(HistoryConfig {
                max_checkpoints: 3,
                root_window: 3,
            })
        })
        .unwrap();
    let mut workload = Workload::new(3);
    workload.empty_block = 0.0;
    let mut sent = Sent::default();
    for _ in 0..10 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    follower.sync_to_head().await.unwrap();
    shallow.sync_to_head().await.unwrap();

    let mut reorgs = 0u64;
    for round in 0..3u64 {
        let fork_point = chain.block_number().await.unwrap();
        let snapshot = chain.snapshot().await.unwrap();
        let saved = workload.clone();
        for _ in 0..4 {
            workload.block(&chain, contract, &mut sent).await.unwrap();
        }
        follower.sync_to_head().await.unwrap();
        if round == 0 {
            shallow.sync_to_head().await.unwrap();
        }
        let old_branch = follower.last_block().unwrap().unwrap();

        chain.revert(snapshot).await.unwrap();
        workload = saved;
        workload.reseed(100 + round);
        for _ in 0..6 {
            workload.block(&chain, contract, &mut sent).await.unwrap();
        }
        let head = chain.block_number().await.unwrap();
        let outcome = follower.sync_to_head().await.unwrap();
        assert_eq!(outcome.block, head);
        assert!(
            outcome.rewound >= old_branch.number - fork_point,
            "round {round}: rewound {} blocks, the branch had {}",
            outcome.rewound,
            old_branch.number - fork_point
        );
        let expected = contract_root(follower.client(), head).await.unwrap();
        assert_eq!(root_of(&follower), expected, "round {round}");
        // Every retained checkpoint is on the new chain.
        let case = format!("round {round}");
        assert_history_on_chain(&follower, follower.client(), false, &case).await;
        reorgs += 1;
        // The shallow follower (3 checkpoints) lost the fork point: a typed error, no change.
        if round == 0 {
            let before = root_of(&shallow);
            match shallow.step().await {
                Err(FollowError::ReorgTooDeep { .. }) => {}
                other => panic!("expected ReorgTooDeep, got {other:?}"),
            }
            assert_eq!(root_of(&shallow), before);
        }
    }
    assert_eq!(follower.stats().reorgs, reorgs);
    report::record(
        "chain",
        "reorgs",
        &[("reorgs", reorgs), ("deep_reorg_errors", 1)],
        &[],
    );
}

/// A database follows one chain and one contract: another contract is a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_refuses_another_contract() {
    let chain = LocalChain::start().await.unwrap();
    let first = chain.deploy_membership(false).await.unwrap();
    let second = chain.deploy_membership(false).await.unwrap();
    let follower = temp_follower(chain.url(), first, config(SyncMode::State));
    let mut follower = follower;
    follower.sync_to_head().await.unwrap();
    let tree = follower.tree().clone();
    let client = follower::ChainClient::new(chain.url().clone(), second, quick_retry()).unwrap();
    let mut other = follower::Follower::new(client, config(SyncMode::State), tree).unwrap();
    match other.step().await {
        Err(FollowError::WrongContract { stored, requested }) => {
            assert_eq!((stored, requested), (first, second));
        }
        other => panic!("expected WrongContract, got {other:?}"),
    }
}

/// WakuRlnV2 behind its ERC1967 proxy, upgraded mid-chain from the implementation without a
/// root history to the one with (the newest contract's path), in a block that also holds
/// registrations and erasures before and after the upgrade. A follower that follows across the
/// upgrade, a fresh replay from the deployment over ranges that span it, and a state sync after
/// it all hold `root()` and the member index, and after the upgrade the root history
/// `getRecentRoots()` gives. Before upgrade-aware replay the fresh replay stopped at the first
/// block after the upgrade ("comes without its RootStored").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_upgraded_to_a_root_history_replays_from_its_deployment() {
    let chain = LocalChain::start().await.unwrap();
    let contract = chain.deploy_membership_proxy(false).await.unwrap();
    chain.set_automine(false).await.unwrap();
    let mut live = temp_follower(chain.url(), contract, config(SyncMode::Replay));
    let mut workload = Workload::new(38);
    let mut sent = Sent::default();
    let mut blocks = 0u64;
    let check = |follower: &follower::Follower, block: u64, case: &'static str| {
        let client = follower.client().clone();
        let ours = root_of(follower);
        async move {
            let theirs = contract_root(&client, block).await.unwrap();
            assert_eq!(ours, theirs, "{case}, block {block}");
        }
    };
    while blocks < 40 || sent.lazy_erasures == 0 || sent.full_erasures == 0 {
        let block = workload.block(&chain, contract, &mut sent).await.unwrap();
        live.sync_to_head().await.unwrap();
        check(&live, block, "before the upgrade").await;
        blocks += 1;
    }
    assert!(live.last_block().unwrap().unwrap().roots.is_none());

    // One block: two of the workload's transactions, the upgrade, two more.
    let implementation = chain.deploy_membership_implementation(true).await.unwrap();
    let mut hashes = Vec::new();
    for step in 0..5 {
        let data = if step == 2 {
            chain_harness::calls::upgrade_to(implementation)
        } else {
            workload.next_tx(&mut sent)
        };
        hashes.push(chain.send(contract, data).await.unwrap());
    }
    let upgraded = chain.mine().await.unwrap();
    assert_eq!(chain.failed_transactions(&hashes).await.unwrap(), 0);
    live.sync_to_head().await.unwrap();
    check(&live, upgraded, "the upgrade's block").await;

    let (lazy, full) = (sent.lazy_erasures, sent.full_erasures);
    let mut after = 0u64;
    while after < 40 || sent.lazy_erasures == lazy || sent.full_erasures == full {
        let block = workload.block(&chain, contract, &mut sent).await.unwrap();
        live.sync_to_head().await.unwrap();
        check(&live, block, "after the upgrade").await;
        after += 1;
    }
    let head = live.last_block().unwrap().unwrap();
    let at = follower::BlockRef {
        number: head.number,
        hash: head.hash.unwrap(),
    };
    let recent = live.client().recent_roots(at).await.unwrap();
    assert!(recent.is_some_and(|r| !r.is_empty()));
    assert_eq!(head.roots, recent, "the live follower's root history");
    let ids = workload.registered_ids().to_vec();
    assert_members_match(&live, head.number, &ids, "live").await;

    // A fresh replay from the deployment, over ranges with the upgrade inside one.
    let mut fresh_config = config(SyncMode::Replay);
    fresh_config.root_check = RootCheck::EveryRange;
    fresh_config.log_ranges.initial = 16;
    let mut fresh = temp_follower(chain.url(), contract, fresh_config);
    fresh.sync_to_head().await.unwrap();
    assert_eq!(root_of(&fresh), root_of(&live));
    assert_eq!(fresh.last_block().unwrap().unwrap().roots, recent);
    assert_members_match(&fresh, head.number, &ids, "fresh replay").await;
    let direct = follower::ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
    assert_history_on_chain(&fresh, &direct, true, "fresh replay").await;

    // A state sync after the upgrade seeds the history from the contract.
    let mut joining = temp_follower(chain.url(), contract, config(SyncMode::State));
    joining.sync_to_head().await.unwrap();
    assert_eq!(root_of(&joining), root_of(&live));
    assert_eq!(joining.last_block().unwrap().unwrap().roots, recent);
    println!(
        "proxy upgraded at block {upgraded} (no root history -> RootStored), {} blocks before and {after} after; {sent:?}",
        blocks + 1
    );
    report::record(
        "chain",
        "upgrade",
        &[
            ("blocks", blocks + 1 + after),
            ("root_checks", blocks + 1 + after + 2),
            ("proxy_upgrades", 1),
            ("mismatches", 0),
        ],
        &[],
    );
}

/// Several erasure calls in one transaction, as a multicall or a smart account sends them (anyone
/// may erase an expired membership): lazy then full, full then lazy, a registration with its
/// lazy erasures beside a full erasure, lazy ones around a full one. For both implementations
/// behind the proxy (with and without the root history): the live follower, a fresh replay and a
/// state sync all hold `root()` after every block, and the indices freed lazily are reused as
/// the contract reuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erasures_of_several_calls_in_one_transaction_are_resolved_per_call() {
    use alloy::primitives::U256;
    use chain_harness::calls;
    let chain = LocalChain::start().await.unwrap();
    let mut transactions = 0u64;
    for stores_roots in [true, false] {
        let contract = chain.deploy_membership_proxy(stores_roots).await.unwrap();
        let multicall = chain.deploy_multicall().await.unwrap();
        chain.set_automine(false).await.unwrap();
        let mut live = temp_follower(chain.url(), contract, config(SyncMode::Replay));
        let id = |n: u64| U256::from(1_000 + n);
        let mine = |batches| mine_calls(&chain, contract, multicall, batches);
        let registrations = (0..12)
            .map(|n| vec![calls::register(id(n), 1 + n as u32)])
            .collect();
        let (block, _) = mine(registrations).await;
        holds_root(&mut live, block, "registrations", stores_roots).await;
        let erase = |n: u64, full: Option<bool>| calls::erase(vec![id(n)], full);
        let batches = vec![
            // lazy, then full (the case)
            vec![erase(0, None), erase(1, Some(true))],
            // full, then lazy
            vec![erase(2, Some(true)), erase(3, None)],
            // lazy, full, lazy; an explicit `false` is lazy too
            vec![erase(4, None), erase(5, Some(true)), erase(6, Some(false))],
            // a registration with its lazy erasure (reusing the index freed), then a full one
            vec![
                calls::register_erasing(id(100), 7, vec![id(7)]),
                erase(8, Some(true)),
            ],
            // two full erasures, then an expiry kept lazy
            vec![
                calls::erase(vec![id(9), id(10)], Some(true)),
                calls::expire(vec![id(11)], false),
            ],
        ];
        let (block, sent) = mine(batches).await;
        transactions += sent;
        holds_root(&mut live, block, "multicalls", stores_roots).await;
        // The lazily freed indices are reused by the next registrations.
        let registrations = (200..206)
            .map(|n| vec![calls::register(id(n), 3)])
            .collect();
        let (block, _) = mine(registrations).await;
        holds_root(&mut live, block, "reuse", stores_roots).await;

        let mut fresh = temp_follower(chain.url(), contract, config(SyncMode::Replay));
        fresh.sync_to_head().await.unwrap();
        assert_eq!(root_of(&fresh), root_of(&live), "fresh replay");
        let mut joining = temp_follower(chain.url(), contract, config(SyncMode::State));
        joining.sync_to_head().await.unwrap();
        assert_eq!(root_of(&joining), root_of(&live), "state sync");
        let ids: Vec<U256> = (0..12).chain(100..101).chain(200..206).map(id).collect();
        let head = live.last_block().unwrap().unwrap().number;
        assert_members_match(&live, head, &ids, "live").await;
        assert_members_match(&fresh, head, &ids, "fresh replay").await;
    }
    report::record(
        "chain",
        "multicall",
        &[("multicall_transactions", transactions), ("mismatches", 0)],
        &[],
    );
}

/// Sends each of `batches` as one transaction (a batch of one straight to `contract`, more
/// through `multicall`) and mines them in one block; returns the block and the transactions.
async fn mine_calls(
    chain: &LocalChain,
    contract: alloy::primitives::Address,
    multicall: alloy::primitives::Address,
    batches: Vec<Vec<Bytes>>,
) -> (u64, u64) {
    let mut hashes = Vec::new();
    for calls in batches {
        let hash = match calls.as_slice() {
            [one] => chain.send(contract, one.clone()).await,
            _ => {
                let data = chain_harness::calls::multicall(contract, calls);
                chain.send(multicall, data).await
            }
        };
        hashes.push(hash.unwrap());
    }
    let block = chain.mine().await.unwrap();
    assert_eq!(chain.failed_transactions(&hashes).await.unwrap(), 0);
    (block, hashes.len() as u64)
}

/// Brings `live` to the head and checks its root against the contract's `root()` at `block`.
async fn holds_root(live: &mut follower::Follower, block: u64, case: &str, stores_roots: bool) {
    live.sync_to_head().await.unwrap();
    let theirs = contract_root(live.client(), block).await.unwrap();
    assert_eq!(
        root_of(live),
        theirs,
        "{case} (root history: {stores_roots})"
    );
}

/// Through a proxy that drops connections, delays, answers 500 and 429 and truncates bodies on
/// a third of the requests, the follower still converges on the contract's root, and says it
/// retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_faults_are_retried_and_the_follower_converges() {
    let (chain, contract) = chain_with_contract(false).await;
    let proxy = FaultProxy::start(chain.url(), 5).await;
    proxy.mode.lock().fault_rate = 0.3;
    let mut follower = temp_follower(&proxy.url, contract, config(SyncMode::Replay));
    let mut workload = Workload::new(8);
    let mut sent = Sent::default();
    for round in 0..6 {
        for _ in 0..10 {
            workload.block(&chain, contract, &mut sent).await.unwrap();
        }
        let head = chain.block_number().await.unwrap();
        let outcome = follower.sync_to_head().await.unwrap();
        assert_eq!(outcome.block, head, "round {round}");
        let direct =
            follower::ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
        let expected = contract_root(&direct, head).await.unwrap();
        assert_eq!(root_of(&follower), expected, "round {round}");
    }
    let faults = proxy
        .counts
        .faults
        .load(std::sync::atomic::Ordering::Relaxed);
    let retries = follower.stats().retries;
    println!(
        "{faults} faults injected, {retries} retries, {:?}",
        follower.stats()
    );
    assert!(faults > 20 && retries > 0);
    report::record(
        "chain",
        "rpc_faults",
        &[
            ("faults_injected", faults),
            ("retries", retries),
            ("mismatches", 0),
        ],
        &[],
    );
}

/// Logs that cannot be right — an extra topic, a short data field, an index past capacity or
/// leaving a gap, a non-canonical field element, another emitter — are typed errors, and
/// nothing from their block is applied; the untouched answer then applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_log_data_is_a_typed_error_and_applies_nothing() {
    let (chain, contract) = chain_with_contract(false).await;
    let proxy = FaultProxy::start(chain.url(), 1).await;
    let mut follower = temp_follower(&proxy.url, contract, config(SyncMode::Replay));
    let mut workload = Workload::new(4);
    workload.empty_block = 0.0;
    let mut sent = Sent::default();
    for _ in 0..3 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    follower.sync_to_head().await.unwrap();
    let mut cases = 0u64;
    for tamper in [
        Tamper::ExtraTopic,
        Tamper::ShortData,
        Tamper::IndexPastCapacity,
        Tamper::IndexGap,
        Tamper::NonCanonical,
        Tamper::OtherAddress,
    ] {
        workload
            .register_block(&chain, contract, 3, 3, &mut sent)
            .await
            .unwrap();
        let (root, last) = (root_of(&follower), follower.last_block().unwrap());
        proxy.mode.lock().tamper = Some(tamper);
        match follower.step().await {
            Err(FollowError::BadData { reason, .. }) => println!("{tamper:?}: {reason}"),
            other => panic!("{tamper:?}: expected BadData, got {other:?}"),
        }
        assert_eq!(root_of(&follower), root, "{tamper:?} changed the tree");
        assert_eq!(follower.last_block().unwrap(), last);
        proxy.mode.lock().tamper = None;
        let head = chain.block_number().await.unwrap();
        follower.sync_to_head().await.unwrap();
        let expected = contract_root(follower.client(), head).await.unwrap();
        assert_eq!(root_of(&follower), expected);
        cases += 1;
    }
    // A stored root that is not the root after its call: the per-call check refuses the
    // block, nothing lands, and with honest logs the follower goes on.
    workload
        .register_block(&chain, contract, 3, 3, &mut sent)
        .await
        .unwrap();
    let (root, last) = (root_of(&follower), follower.last_block().unwrap());
    proxy.mode.lock().tamper = Some(Tamper::StoredRoot);
    match follower.step().await {
        Err(FollowError::RootMismatch { contract, .. }) => assert!(contract.ends_with("07")),
        other => panic!("StoredRoot: expected RootMismatch, got {other:?}"),
    }
    assert_eq!(
        root_of(&follower),
        root,
        "a wrong stored root changed the tree"
    );
    assert_eq!(follower.last_block().unwrap(), last);
    proxy.mode.lock().tamper = None;
    follower.sync_to_head().await.unwrap();
    let head = chain.block_number().await.unwrap();
    assert_eq!(
        root_of(&follower),
        contract_root(follower.client(), head).await.unwrap()
    );
    cases += 1;
    report::record(
        "chain",
        "bad_logs",
        &[("bad_log_cases", cases), ("mismatches", 0)],
        &[],
    );
}

/// A deployment whose event carries the rate commitment (an earlier WakuRlnV2 revision): the
/// matching `ContractProfile` follows it; the default profile computes other leaves, and the
/// root check refuses the block with a typed error naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_check_decides_the_contract_profile() {
    let (chain, contract) = chain_with_contract(true).await;
    let mut workload = Workload::new(2);
    workload.empty_block = 0.0;
    let mut sent = Sent::default();
    for _ in 0..5 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    let mut matching = config(SyncMode::Replay);
    matching.profile.leaf = follower::LeafRule::RateCommitmentInEvent;
    let mut right = temp_follower(chain.url(), contract, matching);
    let outcome = right.sync_to_head().await.unwrap();
    let expected = contract_root(right.client(), outcome.block).await.unwrap();
    assert_eq!(root_of(&right), expected);

    let mut wrong = temp_follower(chain.url(), contract, config(SyncMode::Replay));
    match wrong.sync_to_head().await {
        Err(FollowError::RootMismatch { block, .. }) => assert!(block <= outcome.block),
        other => panic!("expected RootMismatch, got {other:?}"),
    }
    assert_eq!(
        wrong.tree().read(MerkleTree::next_index),
        0,
        "nothing applied"
    );
}

/// `confirmations: K` keeps the follower K blocks behind the head, with the contract's root of
/// that block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmations_keep_the_follower_behind_the_head() {
    let (chain, contract) = chain_with_contract(false).await;
    let mut workload = Workload::new(11);
    workload.empty_block = 0.0;
    let mut sent = Sent::default();
    for _ in 0..8 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    for sync in [SyncMode::Replay, SyncMode::State] {
        let mut behind = config(sync);
        behind.confirmations = 3;
        let mut follower = temp_follower(chain.url(), contract, behind);
        let head = chain.block_number().await.unwrap();
        let outcome = follower.sync_to_head().await.unwrap();
        assert_eq!(outcome.block, head - 3, "{sync:?}");
        let expected = contract_root(follower.client(), head - 3).await.unwrap();
        assert_eq!(root_of(&follower), expected, "{sync:?}");
        assert_ne!(
            expected,
            contract_root(follower.client(), head).await.unwrap(),
            "the last blocks change the root"
        );
    }
}

/// The reorg race: the follower has applied block F+1 (a registration) and reads the logs of
/// the empty blocks after it; a proxy holds that `eth_getLogs` answer (read from the old chain)
/// while the chain reorgs below it — back to F, another registration in F+1', empty blocks, or
/// blocks with events, on top. The follower must never commit on the orphaned F+1: the step
/// that was under way ends on the new branch, with the contract's root at the block it reports
/// and every retained checkpoint on the chain. Ranges ending in 1, 2 and 5 empty blocks, and
/// ranges whose new branch has events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_while_a_range_is_read_never_commits_on_the_orphaned_block() {
    let (chain, contract) = chain_with_contract(false).await;
    let proxy = FaultProxy::start(chain.url(), 3).await;
    let direct = follower::ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
    let mut workload = Workload::new(21);
    workload.empty_block = 0.0;
    let mut sent = Sent::default();
    for _ in 0..3 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    let mut follower = temp_follower(&proxy.url, contract, config(SyncMode::Replay));
    follower.sync_to_head().await.unwrap();
    let mut cases = 0u64;
    for (round, (empty, new_events)) in [(1, false), (2, false), (5, false), (2, true), (5, true)]
        .into_iter()
        .enumerate()
    {
        let case = format!("{empty} blocks after F+1, events on the new branch: {new_events}");
        let snapshot = chain.snapshot().await.unwrap();
        let saved = workload.clone();
        workload
            .register_block(&chain, contract, 1, 1, &mut sent)
            .await
            .unwrap();
        follower.sync_to_head().await.unwrap();
        let orphaned = follower.last_block().unwrap().unwrap();
        let reorgs_before = follower.stats().reorgs;
        chain.mine_empty(empty).await.unwrap();

        proxy.hold_logs();
        let task = tokio::spawn(async move {
            let result = follower.sync_to_head().await;
            (follower, result)
        });
        proxy.until_held(1).await;
        chain.revert(snapshot).await.unwrap();
        workload = saved;
        workload.reseed(300 + round as u64);
        workload
            .register_block(&chain, contract, 1, 1, &mut sent)
            .await
            .unwrap();
        for _ in 0..empty {
            if new_events {
                workload
                    .register_block(&chain, contract, 2, 1, &mut sent)
                    .await
                    .unwrap();
            } else {
                chain.mine_empty(1).await.unwrap();
            }
        }
        let (hash_now, _) = direct.header(orphaned.number).await.unwrap().unwrap();
        assert_ne!(Some(hash_now), orphaned.hash, "{case}: no reorg happened");
        proxy.release_logs();
        proxy
            .counts
            .held
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let (returned, result) = task.await.unwrap();
        follower = returned;
        let outcome = result.unwrap_or_else(|e| panic!("{case}: {e}"));

        // What the step reported is the chain's: the block it ends on, and its root.
        let last = follower.last_block().unwrap().unwrap();
        assert_eq!(last.number, outcome.block, "{case}");
        let (hash, _) = direct.header(last.number).await.unwrap().unwrap();
        assert_eq!(last.hash, Some(hash), "{case}: ends on an orphaned block");
        let expected = contract_root(&direct, last.number).await.unwrap();
        assert_eq!(root_of(&follower), expected, "{case}: orphaned root");
        assert!(follower.stats().reorgs > reorgs_before, "{case}: no rewind");
        assert_history_on_chain(&follower, &direct, false, &case).await;

        // And it goes on from there to the head.
        let head = chain.block_number().await.unwrap();
        follower.sync_to_head().await.unwrap();
        assert_eq!(
            root_of(&follower),
            contract_root(&direct, head).await.unwrap(),
            "{case}"
        );
        cases += 1;
    }
    report::record(
        "chain",
        "reorg_race",
        &[("reorg_race_cases", cases), ("orphaned_commits", 0)],
        &[],
    );
}

/// A database that an earlier build left on an orphaned branch — block F+1 applied, then a
/// reorg, then an empty block of the new branch committed on top without a root check — is
/// rewound on start (every retained checkpoint is compared with the node's, not only the
/// newest), and converges on the contract's root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_left_on_an_orphaned_block_is_rewound_on_start() {
    let (chain, contract) = chain_with_contract(false).await;
    let mut workload = Workload::new(22);
    workload.empty_block = 0.0;
    let mut sent = Sent::default();
    for _ in 0..3 {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    let mut old = temp_follower(chain.url(), contract, config(SyncMode::Replay));
    old.sync_to_head().await.unwrap();
    let snapshot = chain.snapshot().await.unwrap();
    let saved = workload.clone();
    workload
        .register_block(&chain, contract, 1, 1, &mut sent)
        .await
        .unwrap();
    old.sync_to_head().await.unwrap();
    let orphaned = old.last_block().unwrap().unwrap();

    chain.revert(snapshot).await.unwrap();
    workload = saved;
    workload.reseed(77);
    workload
        .register_block(&chain, contract, 1, 1, &mut sent)
        .await
        .unwrap();
    let head = chain.mine_empty(2).await.unwrap();
    // What the earlier build did: the range's last, empty block committed with no root check.
    let (hash, _) = old.client().header(head).await.unwrap().unwrap();
    let meta = follower::BlockMeta {
        roots: None,
        number: head,
        hash: Some(hash),
        binding: orphaned.binding,
        members_from: orphaned.members_from,
    };
    follower::commit_block(old.tree(), &meta, &follower::BlockChanges::new(), None).unwrap();
    let expected = contract_root(old.client(), head).await.unwrap();
    assert_ne!(root_of(&old), expected, "the database is not stuck");

    // A restart: a new follower over the same database.
    let client = follower::ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
    let mut restarted =
        follower::Follower::new(client, config(SyncMode::Replay), old.tree().clone()).unwrap();
    let outcome = restarted.sync_to_head().await.unwrap();
    assert_eq!(outcome.block, head);
    assert!(outcome.rewound > head - orphaned.number, "{outcome:?}");
    assert_eq!(root_of(&restarted), expected);
    assert_history_on_chain(&restarted, restarted.client(), false, "restart").await;
    report::record(
        "chain",
        "orphaned_database",
        &[("orphaned_databases_repaired", 1)],
        &[],
    );
}
