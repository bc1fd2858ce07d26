//! Result records of the reliability suites, summed by the `reliability-report` binary into the
//! one line `.ci/run` prints last.
//!
//! Each test writes one small file `<suite>.<name>.txt` of `key value` lines into [`dir`]; a test
//! that counts per case rewrites its file after every case, so a record exists even for a test
//! that fails half-way (with its mismatch counted).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where records go: `CANOPY_REPORT_DIR`, else `target/reliability` of this workspace.
#[must_use]
pub fn dir() -> PathBuf {
    std::env::var_os("CANOPY_REPORT_DIR").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../target/reliability"
            ))
        },
        PathBuf::from,
    )
}

/// Writes the record of test `name` in `suite`: numeric `fields` and free-text `notes`.
///
/// Written to a temporary file and renamed, so a reader never sees half a record. A record that
/// cannot be written is reported on stderr but does not fail the test: the report binary then
/// says the suite is missing.
pub fn record(suite: &str, name: &str, fields: &[(&str, u64)], notes: &[(&str, &str)]) {
    let mut text = String::new();
    for (key, value) in fields {
        let _ = writeln!(text, "{key} {value}");
    }
    for (key, value) in notes {
        let _ = writeln!(text, "{key} {}", value.replace('\n', " "));
    }
    let dir = dir();
    let file = dir.join(format!("{suite}.{name}.txt"));
    let tmp = dir.join(format!(".{suite}.{name}.{}.tmp", std::process::id()));
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, &file));
    if let Err(e) = written {
        eprintln!("report: cannot write {}: {e}", file.display());
    }
}

/// Per-case counters of a model-based test (`model` suite): cases, operations, mismatches.
pub struct Tally {
    suite: &'static str,
    name: &'static str,
    cases: AtomicU64,
    ops: AtomicU64,
    mismatches: AtomicU64,
}

impl Tally {
    /// Counters for the test `name`, all zero.
    #[must_use]
    pub const fn new(name: &'static str) -> Self {
        Self::in_suite("model", name)
    }

    /// A tally recorded under `suite` instead of `model` (another engine's own model line).
    #[must_use]
    pub const fn in_suite(suite: &'static str, name: &'static str) -> Self {
        Self {
            suite,
            name,
            cases: AtomicU64::new(0),
            ops: AtomicU64::new(0),
            mismatches: AtomicU64::new(0),
        }
    }

    /// Starts a case of `ops` operations; the case counts as a mismatch when the returned guard
    /// is dropped during a panic (a failed assertion), so failing runs show in the report.
    pub fn case(&'static self, ops: usize) -> CaseGuard {
        CaseGuard { tally: self, ops }
    }
}

/// Counts one case of a [`Tally`] when dropped.
pub struct CaseGuard {
    tally: &'static Tally,
    ops: usize,
}

impl Drop for CaseGuard {
    fn drop(&mut self) {
        let t = self.tally;
        t.cases.fetch_add(1, Ordering::Relaxed);
        t.ops.fetch_add(self.ops as u64, Ordering::Relaxed);
        if std::thread::panicking() {
            t.mismatches.fetch_add(1, Ordering::Relaxed);
        }
        record(
            t.suite,
            t.name,
            &[
                ("cases", t.cases.load(Ordering::Relaxed)),
                ("ops", t.ops.load(Ordering::Relaxed)),
                ("mismatches", t.mismatches.load(Ordering::Relaxed)),
            ],
            &[],
        );
    }
}

/// Counts one case of the model test it is written in (`model` suite), with a counter per call
/// site: `let _case = tally!("name", ops.len());` as a proptest body's first line.
#[macro_export]
macro_rules! tally {
    (suite = $suite:literal, $name:expr, $ops:expr) => {{
        static TALLY: $crate::report::Tally =
            $crate::report::Tally::in_suite($suite, concat!(module_path!(), "::", $name));
        TALLY.case($ops)
    }};
    ($name:expr, $ops:expr) => {{
        static TALLY: $crate::report::Tally =
            $crate::report::Tally::new(concat!(module_path!(), "::", $name));
        TALLY.case($ops)
    }};
}
