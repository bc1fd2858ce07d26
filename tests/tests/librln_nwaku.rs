//! The drop-in librln for nwaku (`librln/`), checked from C against zerokit v2.0.2's own librln
//! (built from crates.io as nwaku builds it): a member of a Canopy tree, its Merkle path and the
//! tree's roots go into a fixture; `librln/harness/run.sh` builds both libraries, both headers
//! and the C harness, runs nwaku's sequences under AddressSanitizer/LeakSanitizer with each
//! library and compares them (deterministic outputs byte for byte, every proof under both
//! verifiers, tampered proofs the same ok/err). This test then checks the two generated
//! headers declare nwaku's 41 functions identically, and that the proofs carry the tree's root.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use hasher::{Fr, PoseidonHasher};
use rln_glue::primitives::{id_commitment, rate_commitment, IdentitySecret};
use tree_core::{Depth, MerkleTree, MerkleTreeExt, OptimalMerkleTree};

/// nwaku's `rln_interface.nim` (zerokit v2.0.2, stateless): the functions it declares, as
/// librln lists them (read as text: linking librln here would clash with zerokit's rln 3.0.0).
fn nwaku_symbols() -> Vec<String> {
    let list = std::fs::read_to_string(root_dir().join("librln/nwaku-symbols.txt")).unwrap();
    let symbols: Vec<String> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    assert_eq!(symbols.len(), 41);
    symbols
}

fn hex(fr: &Fr) -> String {
    hex_bytes(&hasher::fr_to_le_bytes(fr))
}

fn hex_bytes(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A depth-20 tree with 300 members; the harness's member sits at an odd index (so its path
/// has both directions), and the window holds the roots before the last two blocks.
fn write_fixture(path: &Path) -> Fr {
    let secret = IdentitySecret::new(Fr::from(0x5eed_0fc0_ffee_u64));
    let limit = Fr::from(100u8);
    let member = 237u64;
    let leaf = |i: u64| {
        if i == member {
            rate_commitment(id_commitment(&secret), limit)
        } else {
            rate_commitment(Fr::from(i * 7919 + 1), limit)
        }
    };
    let mut tree = OptimalMerkleTree::<PoseidonHasher>::new(Depth::new(20).unwrap());
    let mut older = Vec::new();
    for block in [0..250u64, 250..280, 280..300] {
        if block.start > 0 {
            older.push(tree.root());
        }
        tree.set_range(block.start, block.clone().map(leaf))
            .unwrap();
    }
    let proof = tree.proof(member).unwrap();
    let mut lines = vec![hex(&secret.expose()), hex(&limit), hex(&Fr::from(7u8))];
    lines.extend(proof.path_elements().iter().map(hex));
    lines.push(hex_bytes(&proof.path_index()));
    lines.push(hex(&tree.root()));
    lines.push(hex_bytes(b"a message relayed on /waku/2/rs/1/0"));
    lines.push(hex_bytes(&1_733_400_000u64.to_le_bytes()));
    lines.push(hex_bytes(b"rln/waku-rln-relay/v2.0.0"));
    lines.extend(older.iter().map(hex));
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
    tree.root()
}

/// A header's declarations (comments and layout removed), by the name they declare.
fn declarations(header: &str) -> BTreeMap<String, String> {
    let mut text = String::new();
    let mut rest = header;
    while let Some(start) = rest.find("/*") {
        text.push_str(&rest[..start]);
        rest = rest[start..]
            .find("*/")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    text.push_str(rest);
    let text: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.contains("extern \"C\""))
        .collect::<Vec<_>>()
        .join(" ");
    // Split at the semicolons outside braces (a struct's body is part of its typedef); a
    // closing brace with none open is the end of the `extern "C"` block.
    let (mut decls, mut current, mut depth) = (Vec::new(), String::new(), 0usize);
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => continue,
            '}' => depth -= 1,
            ';' if depth == 0 => {
                decls.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    let mut out = BTreeMap::new();
    for decl in decls.iter().filter(|d| !d.is_empty()) {
        // The declared name: a function's comes before its '(', a typedef's is the last word.
        let name = match decl.find('(') {
            Some(paren) if !decl.starts_with("typedef") => decl[..paren].split_whitespace().last(),
            _ => decl.split_whitespace().last(),
        };
        if let Some(name) = name {
            out.insert(name.trim_start_matches('*').to_owned(), decl.clone());
        }
    }
    out
}

fn root_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn canopy_librln_answers_nwaku_as_zerokit_v2_0_2_does() {
    let work = tempfile::tempdir().unwrap();
    let fixture = work.path().join("fixture.hex");
    let root = write_fixture(&fixture);
    // The benchmark (librln/harness/bench.sh) runs on the committed copy: it must be this one
    // (CANOPY_BLESS=1 rewrites it).
    if std::env::var_os("CANOPY_BLESS").is_some() {
        std::fs::copy(&fixture, root_dir().join("librln/harness/fixture.hex")).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&fixture).unwrap(),
        std::fs::read_to_string(root_dir().join("librln/harness/fixture.hex")).unwrap_or_default(),
        "librln/harness/fixture.hex is not what this test writes (copy it from the test's output)"
    );
    let out = work.path().join("out");
    let run = Command::new("bash")
        .arg(root_dir().join("librln/harness/run.sh"))
        .arg(&fixture)
        .arg(&out)
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "harness failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all comparisons hold"), "{stdout}");
    println!("{stdout}");

    // Every proof carries the Canopy tree's root and verifies; the tampered ones do not.
    for proof in [
        "proof-zerokit.bin",
        "proof-canopy.bin",
        "proof-canopy.bin.partial",
    ] {
        let check = std::fs::read_to_string(out.join(format!("check-canopy-{proof}.txt"))).unwrap();
        assert!(
            check.contains(&format!("root {}", hex(&root))),
            "{proof}: {check}"
        );
        assert!(check.contains("re-encoded: same"), "{check}");
        assert!(check.contains("verify decoded: ok"), "{check}");
        assert!(check.contains("receive: ok"), "{check}");
        for line in check.lines().filter(|l| l.starts_with("tampered")) {
            assert!(
                line.contains(": err ") || line.contains(": false"),
                "accepted: {line}"
            );
        }
    }

    // The headers: ours declares nwaku's 41 functions (and the types they use) exactly as
    // zerokit's generator declares them.
    let ours = declarations(&std::fs::read_to_string(out.join("rln-canopy.h")).unwrap());
    let theirs = declarations(&std::fs::read_to_string(out.join("rln-zerokit.h")).unwrap());
    for symbol in nwaku_symbols() {
        let decl = ours
            .get(&symbol)
            .unwrap_or_else(|| panic!("{symbol} missing from our header"));
        assert_eq!(
            Some(decl),
            theirs.get(&symbol),
            "{symbol} declared differently"
        );
    }
    for (name, decl) in &ours {
        assert_eq!(
            Some(decl),
            theirs.get(name),
            "{name} declared differently from zerokit's"
        );
    }
}
