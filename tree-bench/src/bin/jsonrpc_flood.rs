//! The JSON-RPC endpoint under a flood of maximum-cost bodies beside nwaku-like clients and a
//! follower following a block every 2 s ([`tree_bench::flood`]): nwaku-like p50/p99 idle and
//! flooded, the follower's lag, the server's peak RSS; one markdown table.
//!
//! `cargo build --release -p canopy && cargo run --release -p tree-bench --bin jsonrpc_flood`
//! (`-- --members N --idle S --flood S --clients C`).

use tree_bench::flood::{self, FloodConfig};
use tree_bench::loopback;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let defaults = FloodConfig::default();
    let config = FloodConfig {
        members: loopback::arg("--members", defaults.members),
        idle_secs: loopback::arg("--idle", defaults.idle_secs),
        flood_secs: loopback::arg("--flood", defaults.flood_secs),
        flood_clients: loopback::arg("--clients", defaults.flood_clients),
        ..defaults
    };
    let report = flood::run(config, &loopback::canopy_exe()).await;
    println!("{}", flood::table(&config, &report));
}
