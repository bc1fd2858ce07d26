//! The follower against nodes and providers as they are: several providers with failover and
//! a quorum (one dies mid-sync, one lies), permanent errors that are not retried in a loop, and
//! a second node kind (ganache 7.9.2, which refuses EIP-1898 block-hash parameters). The
//! contract's own `root()` on a real local node is the oracle.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chain_harness::workload::{Sent, Workload};
use chain_harness::{LocalChain, NodeKind};
use follower::{contract_root, ChainClient, FollowError, FollowerConfig, SyncMode};
use integration_tests::chain::{
    assert_history_on_chain, follower_of, quick_retry, root_of, temp_follower,
};
use integration_tests::proxy::{FaultProxy, Refusal, Tamper};
use integration_tests::report;
use tree_core::MerkleTree;

fn config(sync: SyncMode) -> FollowerConfig {
    let mut config = FollowerConfig {
        sync,
        retry: quick_retry(),
        poll_interval_ms: 50,
        ..FollowerConfig::default()
    };
    // Small ranges: many steps, so a provider can die or lie in the middle of a sync.
    config.log_ranges.initial = 4;
    config.log_ranges.max = 8;
    config
}

/// A node with the test contract and `blocks` blocks of the mixed workload on it.
async fn chain_with_blocks(
    kind: NodeKind,
    blocks: u64,
    seed: u64,
) -> (LocalChain, alloy::primitives::Address) {
    let chain = LocalChain::start_kind(kind).await.unwrap();
    let contract = chain.deploy_membership(false).await.unwrap();
    if kind == NodeKind::Hardhat {
        chain.set_automine(false).await.unwrap();
    }
    let mut workload = Workload::new(seed);
    let mut sent = Sent::default();
    for _ in 0..blocks {
        workload.block(&chain, contract, &mut sent).await.unwrap();
    }
    assert!(sent.registrations > 0);
    (chain, contract)
}

async fn proxies(chain: &LocalChain, n: u64) -> Vec<FaultProxy> {
    let mut out = Vec::new();
    for seed in 0..n {
        out.push(FaultProxy::start(chain.url(), seed).await);
    }
    out
}

fn client_of(
    proxies: &[FaultProxy],
    contract: alloy::primitives::Address,
    quorum: usize,
) -> ChainClient {
    let urls = proxies.iter().map(|p| p.url.clone()).collect();
    ChainClient::with_providers(urls, contract, quick_retry(), quorum).unwrap()
}

/// Two and three providers of one node through proxies; the one in use dies mid-sync (then, of
/// three, a second one too): reads fail over, and the follower lands on the contract's root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_dies_mid_sync_is_failed_over() {
    let (chain, contract) = chain_with_blocks(NodeKind::Hardhat, 40, 41).await;
    let direct = ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
    let head = chain.block_number().await.unwrap();
    let expected = contract_root(&direct, head).await.unwrap();
    let mut failovers = 0u64;
    for n in [2u64, 3] {
        let proxies = proxies(&chain, n).await;
        let mut follower = follower_of(client_of(&proxies, contract, 1), config(SyncMode::Replay));
        for _ in 0..3 {
            let outcome = follower.step().await.unwrap();
            assert!(!outcome.caught_up, "{n} providers: the sync was too short");
        }
        proxies[0].mode.lock().down = true;
        for _ in 0..3 {
            follower.step().await.unwrap();
        }
        if n == 3 {
            proxies[1].mode.lock().down = true;
        }
        let outcome = follower.sync_to_head().await.unwrap();
        assert_eq!(outcome.block, head);
        assert_eq!(root_of(&follower), expected, "{n} providers");
        let health = follower.client().providers();
        assert!(health[0].errors > 0, "{health:?}");
        assert!(health[n as usize - 1].requests > 0, "{health:?}");
        assert_history_on_chain(&follower, &direct, true, &format!("{n} providers")).await;
        failovers += 1;
    }
    report::record(
        "chain",
        "failover",
        &[("failover_cases", failovers), ("mismatches", 0)],
        &[],
    );
}

/// One of three providers lies — rewrites `root()` results, or block hashes, or a leaf of a
/// range read — and is the first one asked. With `quorum = 2` nothing it alone says is
/// committed: the follower (replay and state sync) ends on the contract's root with every
/// checkpoint on the chain, and the liar is reported with its disagreements. With two providers
/// and `quorum = 2`, a liar leaves no quorum: the block waits and the tree does not change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_provider_is_outvoted_and_reported() {
    let (chain, contract) = chain_with_blocks(NodeKind::Hardhat, 30, 43).await;
    let direct = ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
    let head = chain.block_number().await.unwrap();
    let expected = contract_root(&direct, head).await.unwrap();
    let mut cases = 0u64;
    for tamper in [Tamper::Root, Tamper::BlockHash, Tamper::Leaf] {
        for sync in [SyncMode::Replay, SyncMode::State] {
            let case = format!("{tamper:?} liar, {sync:?}");
            let proxies = proxies(&chain, 3).await;
            proxies[0].mode.lock().tamper = Some(tamper);
            let mut follower = follower_of(client_of(&proxies, contract, 2), config(sync));
            let outcome = follower
                .sync_to_head()
                .await
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(outcome.block, head, "{case}");
            assert_eq!(root_of(&follower), expected, "{case}");
            assert_history_on_chain(&follower, &direct, true, &case).await;
            let tampered = proxies[0].counts.tampered.load(Ordering::Relaxed);
            let health = follower.client().providers();
            println!("{case}: {tampered} answers tampered; {health:?}");
            if tampered > 0 {
                assert!(health[0].disagreements > 0, "{case}: liar not reported");
            }
            assert!(
                health[1..].iter().all(|h| h.disagreements == 0),
                "{case}: an honest provider was blamed: {health:?}"
            );
            cases += 1;
        }
    }

    // Two providers, a quorum of two, one liar: no agreement, so nothing is committed.
    let proxies = proxies(&chain, 2).await;
    let mut follower = follower_of(client_of(&proxies, contract, 2), config(SyncMode::Replay));
    for _ in 0..2 {
        follower.step().await.unwrap();
    }
    let (root, last) = (root_of(&follower), follower.last_block().unwrap());
    proxies[0].mode.lock().tamper = Some(Tamper::Root);
    match follower.step().await {
        Err(e @ FollowError::Unavailable { .. }) => {
            assert!(e.to_string().contains("agree"), "{e}");
            assert!(e.is_transient());
        }
        other => panic!("expected no quorum, got {other:?}"),
    }
    assert_eq!(
        root_of(&follower),
        root,
        "a block without quorum changed the tree"
    );
    assert_eq!(follower.last_block().unwrap(), last);
    proxies[0].mode.lock().tamper = None;
    follower.sync_to_head().await.unwrap();
    assert_eq!(root_of(&follower), expected);
    report::record(
        "chain",
        "quorum",
        &[("lying_provider_cases", cases + 1), ("mismatches", 0)],
        &[],
    );
}

/// A permanent error (method not found) is not retried in a loop: one request, a typed error
/// naming the method and the provider, nothing applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_are_not_retried() {
    let (chain, contract) = chain_with_blocks(NodeKind::Hardhat, 5, 44).await;
    let proxy = FaultProxy::start(chain.url(), 9).await;
    proxy.mode.lock().refuse = Some(Refusal::Method("eth_getLogs", -32601));
    let mut follower = temp_follower(&proxy.url, contract, config(SyncMode::Replay));
    let started = Instant::now();
    match follower.step().await {
        Err(e @ FollowError::Refused { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("eth_getLogs") && text.contains("127.0.0.1"),
                "{text}"
            );
            assert!(!e.is_transient());
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(proxy.counts.refused.load(Ordering::Relaxed), 1, "retried");
    assert_eq!(follower.tree().read(MerkleTree::next_index), 0);
    report::record(
        "chain",
        "permanent_errors",
        &[("permanent_error_retries", 0)],
        &[],
    );
}

/// A node without EIP-1898 block-hash parameters: ganache 7.9.2 itself, and hardhat behind a
/// proxy that answers them as ganache does. The follower calls by number with the block's hash
/// checked around each call, and converges on the contract's root (replay, with its erasure
/// look-ups, and state sync) within a bounded time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_without_eip1898_are_followed_by_number() {
    let mut cases = 0u64;
    for kind in [NodeKind::Ganache, NodeKind::Hardhat] {
        let (chain, contract) = chain_with_blocks(kind, 20, 45).await;
        let proxy = FaultProxy::start(chain.url(), 10).await;
        proxy.mode.lock().refuse = Some(Refusal::BlockObjects);
        let url = match kind {
            NodeKind::Ganache => chain.url().clone(),
            NodeKind::Hardhat => proxy.url.clone(),
        };
        let direct = ChainClient::new(chain.url().clone(), contract, quick_retry()).unwrap();
        let head = chain.block_number().await.unwrap();
        let expected = contract_root(&direct, head).await.unwrap();
        for sync in [SyncMode::Replay, SyncMode::State] {
            let case = format!("{kind:?}, {sync:?}");
            let mut follower = temp_follower(&url, contract, config(sync));
            let outcome = tokio::time::timeout(Duration::from_secs(120), follower.sync_to_head())
                .await
                .unwrap_or_else(|_| panic!("{case}: no result within 120 s"))
                .unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(outcome.block, head, "{case}");
            assert_eq!(root_of(&follower), expected, "{case}");
            assert!(!follower.client().providers()[0].eip1898, "{case}");
            cases += 1;
        }
    }
    report::record(
        "chain",
        "no_eip1898",
        &[("no_eip1898_cases", cases), ("mismatches", 0)],
        &[],
    );
}
