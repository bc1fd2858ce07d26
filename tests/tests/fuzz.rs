//! The fuzz targets on stable: every target of `fuzz-targets` on a bounded number of random and
//! mutated inputs (`CANOPY_FUZZ_EXECS` per target, default 100,000; at most
//! `CANOPY_FUZZ_SECONDS` per target, default 20), so they run on every CI build and never rot.
//! A panicking input is written next to the report for replay.

use std::time::{Duration, Instant};

use fuzz_targets::{runner, TARGETS};
use integration_tests::report;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn every_fuzz_target_survives_a_bounded_stable_run() {
    let execs = env("CANOPY_FUZZ_EXECS", 100_000);
    let budget = Duration::from_secs(env("CANOPY_FUZZ_SECONDS", 20));
    let (mut total, mut crashes) = (0u64, 0u64);
    let mut per_target = Vec::new();
    for (i, target) in TARGETS.iter().enumerate() {
        let started = Instant::now();
        let mut done = 0u64;
        let mut round = 0u64;
        // Rounds of 100 so the time budget is honoured on a slow machine.
        while done < execs && started.elapsed() < budget {
            let n = (execs - done).min(100);
            let stats = runner::run(target, n, 0xf022 ^ ((i as u64) << 32) ^ round);
            done += stats.execs;
            crashes += stats.crashes;
            if let Some(input) = stats.first_crash {
                let file = report::dir().join(format!("crash-{}-{round}.bin", target.name));
                let _ = std::fs::create_dir_all(report::dir());
                let _ = std::fs::write(&file, &input);
                eprintln!("{}: crash, input saved to {}", target.name, file.display());
            }
            round += 1;
        }
        total += done;
        per_target.push(format!(
            "{} {done} in {:.1} s",
            target.name,
            started.elapsed().as_secs_f64()
        ));
    }
    println!("fuzz: {}", per_target.join(", "));
    let targets = TARGETS.len() as u64;
    report::record(
        "lanes",
        "fuzz",
        &[
            ("ifma_cpu", u64::from(hasher::ifma_available())),
            ("lane_permutations", hasher::lane_permutations()),
        ],
        &[],
    );
    report::record(
        "fuzz",
        "stable",
        &[("targets", targets), ("execs", total), ("crashes", crashes)],
        &[],
    );
    assert_eq!(
        crashes, 0,
        "fuzz targets crashed; inputs saved next to the report"
    );
}

/// The cargo-fuzz workspace drives exactly the targets the stable loop runs.
#[test]
fn cargo_fuzz_layout_lists_every_target() {
    let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|t| format!("{}.rs", t.name)).collect();
    names.sort();
    assert_eq!(files, names);
    for target in TARGETS {
        assert!(manifest.contains(&format!("name = \"{}\"", target.name)));
        let source =
            std::fs::read_to_string(fuzz.join(format!("fuzz_targets/{}.rs", target.name))).unwrap();
        assert!(source.contains("fuzz_target!"), "{}", target.name);
    }
}
