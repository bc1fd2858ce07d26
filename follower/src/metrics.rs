//! What the follower reports through the [`metrics`] facade: gauges of where it is, counters of
//! what it did, histograms of how long blocks and reorgs took. Without an installed recorder
//! every call is a no-op, so an embedding service pays nothing unless it exports them; `canopy`
//! exports them in the Prometheus text format at `/metrics`.
//!
//! All names are here, once, with their meaning; [`describe`] registers the help texts.

use std::time::Duration;

/// The newest block the node reported (`eth_blockNumber`).
pub const HEAD_BLOCK: &str = "canopy_chain_head_block";
/// The last block committed to the tree.
pub const APPLIED_BLOCK: &str = "canopy_applied_block";
/// Blocks between the last committed block and the target (head less confirmations).
pub const BLOCKS_BEHIND: &str = "canopy_blocks_behind";
/// Members in the tree (`next_index`).
pub const MEMBERS: &str = "canopy_members";
/// Blocks committed (each one atomic commit with its checkpoint).
pub const BLOCKS_COMMITTED: &str = "canopy_blocks_committed_total";
/// Membership events applied.
pub const EVENTS: &str = "canopy_events_total";
/// Reorgs handled by rewinding.
pub const REORGS: &str = "canopy_reorgs_total";
/// Depth of each reorg, in blocks.
pub const REORG_DEPTH: &str = "canopy_reorg_depth_blocks";
/// Time to hash and commit one block (or the state-sync batch).
pub const BLOCK_APPLY_SECONDS: &str = "canopy_block_apply_seconds";
/// JSON-RPC requests sent, retries included, by method.
pub const RPC_REQUESTS: &str = "canopy_rpc_requests_total";
/// Failed JSON-RPC requests, by method and kind (`transient`, `refused`, `too_large`).
pub const RPC_ERRORS: &str = "canopy_rpc_errors_total";
/// JSON-RPC requests retried after a transient failure, by method.
pub const RPC_RETRIES: &str = "canopy_rpc_retries_total";
/// JSON-RPC requests per provider, by provider, method and outcome (`ok`, `error`).
pub const PROVIDER_REQUESTS: &str = "canopy_rpc_provider_requests_total";
/// Answer time per provider.
pub const PROVIDER_SECONDS: &str = "canopy_rpc_provider_request_seconds";
/// Answers of a provider that differed from the quorum's (a lying or broken provider).
pub const PROVIDER_DISAGREEMENTS: &str = "canopy_rpc_provider_disagreements_total";
/// Calls on which no quorum of providers agreed (the block waited).
pub const NO_QUORUM: &str = "canopy_rpc_no_quorum_total";
/// Follow steps that failed, by whether the loop retries them (`transient`) or stops (`fatal`).
pub const STEP_ERRORS: &str = "canopy_follow_step_errors_total";

/// Registers the help text of every follower metric with the installed recorder.
pub fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(HEAD_BLOCK, "Newest block the node reported");
    describe_gauge!(APPLIED_BLOCK, "Last block committed to the tree");
    describe_gauge!(
        BLOCKS_BEHIND,
        "Blocks between the last committed block and the target (head less confirmations)"
    );
    describe_gauge!(MEMBERS, "Members in the tree (next_index)");
    describe_counter!(
        BLOCKS_COMMITTED,
        "Blocks committed, each with its checkpoint"
    );
    describe_counter!(EVENTS, "Membership events applied");
    describe_counter!(REORGS, "Reorgs handled by rewinding");
    describe_histogram!(REORG_DEPTH, "Depth of each reorg, in blocks");
    describe_histogram!(
        BLOCK_APPLY_SECONDS,
        Unit::Seconds,
        "Time to hash and commit one block"
    );
    describe_counter!(RPC_REQUESTS, "JSON-RPC requests sent, retries included");
    describe_counter!(RPC_ERRORS, "Failed JSON-RPC requests by kind");
    describe_counter!(
        RPC_RETRIES,
        "JSON-RPC requests retried after a transient failure"
    );
    describe_counter!(STEP_ERRORS, "Follow steps that failed");
    describe_counter!(
        PROVIDER_REQUESTS,
        "JSON-RPC requests per provider, by method and outcome"
    );
    describe_histogram!(PROVIDER_SECONDS, Unit::Seconds, "Answer time per provider");
    describe_counter!(
        PROVIDER_DISAGREEMENTS,
        "Answers of a provider that differed from the quorum's"
    );
    describe_counter!(NO_QUORUM, "Calls on which no quorum of providers agreed");
}

/// Where the follower stands after a step.
pub(crate) fn position(head: u64, target: u64, applied: u64, members: u64) {
    // Block numbers and member counts stay far below 2^53: exact as f64.
    #[allow(clippy::cast_precision_loss)]
    {
        metrics::gauge!(HEAD_BLOCK).set(head as f64);
        metrics::gauge!(APPLIED_BLOCK).set(applied as f64);
        metrics::gauge!(BLOCKS_BEHIND).set(target.saturating_sub(applied) as f64);
        metrics::gauge!(MEMBERS).set(members as f64);
    }
}

/// One committed block with `events` membership events.
pub(crate) fn committed(events: u64, took: Duration) {
    metrics::counter!(BLOCKS_COMMITTED).increment(1);
    metrics::counter!(EVENTS).increment(events);
    metrics::histogram!(BLOCK_APPLY_SECONDS).record(took.as_secs_f64());
}

/// A reorg rewound `depth` blocks.
pub(crate) fn reorg(depth: u64) {
    metrics::counter!(REORGS).increment(1);
    #[allow(clippy::cast_precision_loss)]
    metrics::histogram!(REORG_DEPTH).record(depth as f64);
}

/// One JSON-RPC request sent.
pub(crate) fn rpc_request(method: &'static str) {
    metrics::counter!(RPC_REQUESTS, "method" => method).increment(1);
}

/// One JSON-RPC request failed (`kind`: transient, refused, too_large).
pub(crate) fn rpc_error(method: &'static str, kind: &'static str) {
    metrics::counter!(RPC_ERRORS, "method" => method, "kind" => kind).increment(1);
}

/// One JSON-RPC request retried.
pub(crate) fn rpc_retry(method: &'static str) {
    metrics::counter!(RPC_RETRIES, "method" => method).increment(1);
}

/// A follow step failed.
pub(crate) fn step_error(transient: bool) {
    let kind = if transient { "transient" } else { "fatal" };
    metrics::counter!(STEP_ERRORS, "kind" => kind).increment(1);
}

/// One request to `provider` answered (or failed) after `took`.
pub(crate) fn provider_request(provider: &str, method: &'static str, took: Duration, failed: bool) {
    let outcome = if failed { "error" } else { "ok" };
    let provider = provider.to_owned();
    metrics::counter!(PROVIDER_REQUESTS, "provider" => provider.clone(), "method" => method, "outcome" => outcome)
        .increment(1);
    metrics::histogram!(PROVIDER_SECONDS, "provider" => provider).record(took.as_secs_f64());
}

/// `provider` answered otherwise than the quorum.
pub(crate) fn provider_disagreement(provider: &str) {
    metrics::counter!(PROVIDER_DISAGREEMENTS, "provider" => provider.to_owned()).increment(1);
}

/// No quorum of providers agreed on an answer.
pub(crate) fn no_quorum() {
    metrics::counter!(NO_QUORUM).increment(1);
}

/// The `method` label of a forwarded request: the method's name when it is one of those a
/// client of a membership mirror sends, else `other` (a label set must stay bounded).
pub fn forwarded_method(method: &str) -> &'static str {
    const KNOWN: [&str; 24] = [
        "eth_chainId",
        "eth_call",
        "eth_blockNumber",
        "eth_getBlockByNumber",
        "eth_getBlockByHash",
        "eth_getLogs",
        "eth_getTransactionReceipt",
        "eth_getTransactionByHash",
        "eth_getTransactionCount",
        "eth_sendRawTransaction",
        "eth_gasPrice",
        "eth_maxPriorityFeePerGas",
        "eth_feeHistory",
        "eth_estimateGas",
        "eth_getBalance",
        "eth_getCode",
        "eth_getStorageAt",
        "eth_syncing",
        "eth_blobBaseFee",
        "eth_getBlockReceipts",
        "eth_getBlockTransactionCountByNumber",
        "net_version",
        "net_listening",
        "web3_clientVersion",
    ];
    KNOWN
        .iter()
        .find(|&&known| known == method)
        .copied()
        .unwrap_or("other")
}
