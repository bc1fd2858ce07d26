//! The JSON-RPC endpoint under a flood, asserted (the figures are the `jsonrpc_flood` bench's):
//! `canopy follow --serve` of a contract on a local hardhat node mining a block every 2 s, 8
//! nwaku-like clients calling `getMerkleProof` at `latest` alone and then beside 64 clients
//! sending batches of full pages without pause ([`tree_bench::flood`]). Nothing crashes, every
//! nwaku-like call is answered with a 20-element proof, the follower is never more than one
//! block behind the node, the server stays under 512 MiB, and the flood's calls are answered
//! here (a flood sent on to the node would be the node's flood). No latency is asserted here:
//! latency is the bench's (`cargo run --release -p tree-bench --bin jsonrpc_flood`).
#![allow(clippy::unwrap_used, clippy::cast_precision_loss)]

use tree_bench::flood::{self, FloodConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_full_pages_stalls_neither_the_nwaku_clients_nor_the_follower() {
    let config = FloodConfig {
        members: 100,
        idle_secs: 4,
        flood_secs: 12,
        ..FloodConfig::default()
    };
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_canopy"));
    let report = flood::run(config, exe).await;
    println!("{}", flood::table(&config, &report));
    assert_eq!(
        report.nwaku_errors, 0,
        "nwaku-like calls failed or answered wrong"
    );
    assert!(report.idle.calls > 0 && report.flooded.calls > 0);
    assert!(report.flood_bodies > 0, "the flood was not answered");
    assert!(
        report.max_lag_blocks <= 1,
        "the follower fell {} blocks behind",
        report.max_lag_blocks
    );
    assert!(
        report.peak_rss_kib < 512 * 1024,
        "peak RSS {} KiB",
        report.peak_rss_kib
    );
    // The moments after each block are waited out, not sent to the node: at most one call in
    // a thousand goes there (a machine stalled past the wait).
    assert!(
        report.calls_forwarded * 1000 <= report.calls_local,
        "{} forwarded, {} here",
        report.calls_forwarded,
        report.calls_local
    );
    integration_tests::report::record(
        "chain",
        "flood",
        &[
            ("flood_bodies", report.flood_bodies),
            ("mismatches", report.nwaku_errors),
        ],
        &[],
    );
}
