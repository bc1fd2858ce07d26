//! With the `rln` feature, finds rln 3.0.0's shipped witness graph in the crate source cargo
//! unpacked for the `rln` dependency and copies it to `OUT_DIR`, where `prover::rln` embeds it
//! (rln embeds the same file, but keeps its calculator crate-private).

use std::path::PathBuf;

const GRAPH: &str = "rln-3.0.0/resources/tree_depth_20/graph.bin";

fn main() -> Result<(), String> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_HOME");
    if std::env::var_os("CARGO_FEATURE_RLN").is_none() {
        return Ok(());
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let found = home.iter().find_map(|home| {
        std::fs::read_dir(home.join("registry/src"))
            .ok()?
            .flatten()
            .map(|registry| registry.path().join(GRAPH))
            .find(|path| path.is_file())
    });
    let graph = found.ok_or_else(|| {
        format!(
            "prover's `rln` feature needs {GRAPH} from cargo's registry sources \
             (CARGO_HOME/registry/src/*); not found under {home:?}"
        )
    })?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("rln_graph.bin");
    std::fs::copy(&graph, &out)
        .map_err(|e| format!("copying {} to {}: {e}", graph.display(), out.display()))?;
    println!("cargo:rerun-if-changed={}", graph.display());
    Ok(())
}
