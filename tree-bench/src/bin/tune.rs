//! `tune`: the `min_parallel_nodes` sweep, thread scaling and DashMap comparison (see
//! `tree_bench::tune`). `cargo run --release -p tree-bench --bin tune -- --quick`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tree_bench::tune::run_cli(std::env::args())
}
