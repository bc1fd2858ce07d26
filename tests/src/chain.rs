//! Helpers of the chain suites: a follower over a fresh temporary tree, root and proof checks
//! against the contract.

use std::sync::Arc;

use alloy::eips::BlockId;
use alloy::primitives::Address;
use follower::{ChainClient, Follower, FollowerConfig, RetryConfig};
use hasher::Fr;
use tree_core::{Depth, MerkleTree};
use tree_engines::{DbConfig, DbTree, SharedDbTree};

/// A follower of `contract` at `url` over a temporary database.
///
/// # Panics
/// When the tree or client cannot be made (a test's setup).
#[must_use]
pub fn temp_follower(url: &url::Url, contract: Address, config: FollowerConfig) -> Follower {
    let client = ChainClient::new(url.clone(), contract, config.retry)
        .unwrap_or_else(|e| panic!("client: {e}"));
    follower_of(client, config)
}

/// A follower through `client` (one provider or several) over a temporary database.
///
/// # Panics
/// When the tree cannot be made (a test's setup).
#[must_use]
pub fn follower_of(client: ChainClient, config: FollowerConfig) -> Follower {
    let tree = DbTree::open(
        &DbConfig::default(),
        Depth::new(20).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("temporary tree: {e}"));
    Follower::new(client, config, Arc::new(SharedDbTree::new(tree)))
        .unwrap_or_else(|e| panic!("follower: {e}"))
}

/// Retries that give up quickly: a local node answers at once.
#[must_use]
pub fn quick_retry() -> RetryConfig {
    RetryConfig {
        initial_backoff_ms: 10,
        max_backoff_ms: 200,
        max_attempts: 30,
        request_timeout_ms: 5_000,
    }
}

/// The follower's root.
#[must_use]
pub fn root_of(follower: &Follower) -> Fr {
    follower.tree().read(MerkleTree::root)
}

/// Compares the proofs of `indices` with the contract's `getMerkleProof` at `block`; returns
/// how many were compared.
///
/// # Panics
/// On a mismatch or an RPC failure.
pub async fn check_proofs(follower: &Follower, block: u64, indices: &[u64]) -> u64 {
    let at = BlockId::Number(block.into());
    for &index in indices {
        let ours = follower
            .tree()
            .read(|t| t.proof(index))
            .unwrap_or_else(|e| panic!("proof {index}: {e}"));
        let theirs = follower
            .client()
            .merkle_proof(index, at)
            .await
            .unwrap_or_else(|e| panic!("getMerkleProof({index}): {e}"));
        let theirs: Vec<Fr> = theirs
            .iter()
            .map(|w| follower::profile::canonical(*w, "proof").unwrap_or_else(|e| panic!("{e}")))
            .collect();
        assert_eq!(
            ours.path_elements(),
            theirs.as_slice(),
            "proof of {index} at block {block}"
        );
    }
    indices.len() as u64
}

/// Every retained checkpoint of `follower` holds the node's hash of its block (nothing from an
/// orphaned branch) and, with `roots`, the contract's root at that block; read through
/// `direct`, a client of the node itself.
///
/// # Panics
/// On a checkpoint off the chain, a wrong root, or an RPC failure.
pub async fn assert_history_on_chain(
    follower: &Follower,
    direct: &ChainClient,
    roots: bool,
    case: &str,
) {
    use tree_core::History;
    let checkpoints = follower
        .tree()
        .read(|t| t.checkpoints())
        .unwrap_or_else(|e| panic!("{e}"));
    for checkpoint in checkpoints {
        let meta = follower::BlockMeta::decode(&checkpoint.metadata)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{case}: checkpoint {} without a block", checkpoint.id));
        let (hash, _) = direct
            .header(meta.number)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("{case}: no block {}", meta.number));
        assert_eq!(
            meta.hash,
            Some(hash),
            "{case}: checkpoint {} is off the chain",
            meta.number
        );
        if roots {
            let root = direct
                .root(BlockId::Number(meta.number.into()))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                checkpoint.root, root,
                "{case}: root at block {}",
                meta.number
            );
        }
    }
}

/// The follower's member index answers `getMembershipInfo` exactly as the contract does at
/// `block` for every id in `ids` (members, erased ones and a few never registered); returns how
/// many ids were compared.
///
/// # Panics
/// When the index is not complete, on a mismatch, or an RPC failure.
pub async fn assert_members_match(
    follower: &Follower,
    block: u64,
    ids: &[alloy::primitives::U256],
    case: &str,
) -> u64 {
    let meta = follower
        .last_block()
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{case}: no block"));
    assert_eq!(meta.number, block, "{case}: the follower's block");
    assert!(
        meta.members_from.is_some(),
        "{case}: the member index is not complete"
    );
    let strangers = [1u64, 2, 3].map(alloy::primitives::U256::from);
    let mut compared = 0;
    for id in ids.iter().chain(&strangers) {
        let theirs = follower
            .client()
            .membership_info(*id, BlockId::Number(block.into()))
            .await
            .unwrap_or_else(|e| panic!("getMembershipInfo({id:#x}): {e}"));
        let fr = follower::profile::canonical(*id, "id").unwrap_or_else(|e| panic!("{e}"));
        let (rate_limit, index, leaf) = follower
            .tree()
            .read(|t| follower::membership_info(t, &fr))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (rate_limit, index, follower::profile::to_u256(&leaf)),
            theirs,
            "{case}: getMembershipInfo({id:#x}) at block {block}"
        );
        compared += 1;
    }
    compared
}
