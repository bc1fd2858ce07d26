//! Sums the records of the reliability suites into the one line `.ci/run` prints last, and
//! fails when a suite is missing or counted a failure.
//!
//! `cargo run -p integration-tests --bin reliability-report [DIR]` (default: the records of the
//! last `cargo test --workspace`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use integration_tests::report;

#[derive(Default)]
struct Suite {
    numbers: BTreeMap<String, u64>,
    notes: Vec<String>,
}

/// One part of the line: the suite's record key, its label, the counters shown, the counters
/// that must be zero and those that must be positive (a suite that did nothing proved nothing).
struct Line {
    key: &'static str,
    label: &'static str,
    shown: &'static [&'static str],
    zero: &'static [&'static str],
    positive: &'static [&'static str],
}

impl Line {
    const fn new(
        key: &'static str,
        label: &'static str,
        shown: &'static [&'static str],
        zero: &'static [&'static str],
        positive: &'static [&'static str],
    ) -> Self {
        Self {
            key,
            label,
            shown,
            zero,
            positive,
        }
    }
}

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(report::dir, Into::into);
    let mut suites: BTreeMap<String, Suite> = BTreeMap::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!("reliability-report: cannot read {}: {e}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((suite, _)) = name.strip_suffix(".txt").and_then(|n| n.split_once('.')) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let suite = suites.entry(suite.to_owned()).or_default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(' ') else {
                continue;
            };
            match value.parse::<u64>() {
                Ok(n) => *suite.numbers.entry(key.to_owned()).or_default() += n,
                Err(_) => suite.notes.push(value.to_owned()),
            }
        }
    }

    let mut failed = Vec::new();
    let mut parts = Vec::new();
    let layout = [
        Line::new(
            "model",
            "model",
            &["cases", "ops"],
            &["mismatches"],
            &["cases"],
        ),
        Line::new(
            "kill9",
            "kill -9",
            &["trials"],
            &["torn", "lost"],
            &["trials"],
        ),
        Line::new(
            "power_loss",
            "power-loss",
            &["cases"],
            &["violations"],
            &["cases"],
        ),
        Line::new(
            "failpoints",
            "failpoints",
            &["schedules", "fired"],
            &["panics", "violations"],
            &["fired"],
        ),
        Line::new(
            "fuzz",
            "fuzz",
            &["targets", "execs"],
            &["crashes"],
            &["execs"],
        ),
        Line::new("bad_input", "bad input", &[], &[], &["total"]),
        Line::new(
            "redb_model",
            "redb model",
            &["cases", "ops"],
            &["mismatches"],
            &["cases"],
        ),
        Line::new(
            "redb_kill9",
            "redb kill -9",
            &["trials"],
            &["torn", "lost"],
            &["trials"],
        ),
        Line::new(
            "redb_power_loss",
            "redb power-loss",
            &["cases"],
            &["violations"],
            &["cases"],
        ),
        Line::new("redb_bad_input", "redb bad input", &[], &[], &["total"]),
        Line::new(
            "postgres_model",
            "postgres model",
            &["cases", "ops"],
            &["mismatches"],
            &["cases"],
        ),
        Line::new(
            "postgres_kill9",
            "postgres kill -9",
            &["trials"],
            &["torn", "lost"],
            &["trials"],
        ),
        Line::new(
            "postgres_failover",
            "postgres failover",
            &["takeovers", "fenced_writers", "restarts", "restart_batches"],
            &[],
            &["takeovers", "fenced_writers", "restarts"],
        ),
        Line::new("env", "env", &["checks"], &[], &["checks"]),
        Line::new("lanes", "IFMA lanes", &[], &[], &[]),
        Line::new("redb_env", "redb env", &["checks"], &[], &["checks"]),
        Line::new(
            "chain",
            "chain",
            &[
                "blocks",
                "root_checks",
                "proofs",
                "member_checks",
                "reorgs",
                "kill9_trials",
                "faults_injected",
                "bad_log_cases",
                "reorg_race_cases",
                "failover_cases",
                "lying_provider_cases",
                "no_eip1898_cases",
                "proxy_upgrades",
                "multicall_transactions",
                "differential_requests",
                "flood_bodies",
                "leanimt_ops",
            ],
            &["mismatches", "orphaned_commits", "permanent_error_retries"],
            &[
                "blocks",
                "root_checks",
                "member_checks",
                "reorgs",
                "kill9_trials",
                "bad_log_cases",
                "reorg_race_cases",
                "orphaned_databases_repaired",
                "failover_cases",
                "lying_provider_cases",
                "no_eip1898_cases",
                "proxy_upgrades",
                "multicall_transactions",
                "differential_requests",
                "flood_bodies",
                "leanimt_ops",
            ],
        ),
    ];
    for Line {
        key,
        label,
        shown,
        zero,
        positive,
    } in layout
    {
        let Some(suite) = suites.get(key) else {
            parts.push(format!("{label}: missing"));
            failed.push(format!("{key}: no record"));
            continue;
        };
        let n = |k: &str| suite.numbers.get(k).copied().unwrap_or(0);
        let mut text = match key {
            "model" | "redb_model" => format!("{} cases/{} ops", n("cases"), n("ops")),
            "bad_input" | "redb_bad_input" => format!("{}/{}", n("passed"), n("total")),
            // Whether this run exercised the lane path: a CPU with IFMA must have used it.
            "lanes" if n("ifma_cpu") == 0 => "not on this CPU (portable path only)".to_owned(),
            "lanes" => {
                if n("lane_permutations") == 0 {
                    failed.push("lanes: IFMA CPU, but no permutation ran on the lanes".to_owned());
                }
                format!("exercised ({} permutations)", n("lane_permutations"))
            }
            _ => shown
                .iter()
                .map(|k| format!("{} {k}", n(k)))
                .collect::<Vec<_>>()
                .join(", "),
        };
        for k in zero {
            text.push_str(&format!(", {} {k}", n(k)));
            if n(k) != 0 {
                failed.push(format!("{key}: {} {k}", n(k)));
            }
        }
        for k in positive {
            if n(k) == 0 {
                failed.push(format!("{key}: no {k}: it proved nothing"));
            }
        }
        if key.ends_with("bad_input") && n("passed") != n("total") {
            failed.push(format!(
                "bad input: {} of {} failed",
                n("total") - n("passed"),
                n("total")
            ));
        }
        if key.ends_with("env") {
            text.push_str(&format!(" ({} skipped)", n("skipped")));
        }
        if !suite.notes.is_empty() {
            text.push_str(&format!(" [{}]", suite.notes.join("; ")));
        }
        parts.push(format!("{label}: {text}"));
    }
    println!("{}", parts.join(" | "));
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("reliability-report: {}", failed.join("; "));
        ExitCode::FAILURE
    }
}
