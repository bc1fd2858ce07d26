//! RLN proofs as JSON, one shape for `canopy verify FILE` (a line each) and `POST /verify`
//! (one object, or an array of them for a batch): the compressed proof and its public values in
//! hex, plus optionally the message's signal bytes, whose `hash_to_field` must be the proof's
//! `x`. Items that do not parse get the verdict `malformed` with a reason, alone, never the
//! whole batch.

use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use hasher::Fr;
use rln_glue::primitives::hash_to_field_le;
use rln_glue::verifier::{ProofItem, RlnVerifier, Verdict};
use rln_glue::witness::PublicValues;
use serde::Deserialize;
use serde_json::{json, Value};
use tree_core::History;

use crate::events::parse_fr;
use crate::{CliError, Output};

/// One proof to verify, as JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// The compressed Groth16 proof, 128 bytes, hex.
    proof: String,
    y: String,
    root: String,
    nullifier: String,
    x: String,
    external_nullifier: String,
    /// The message's signal (hex bytes); its `hash_to_field` must equal `x`. Without it, `x` is
    /// taken as the caller's.
    #[serde(default)]
    signal: Option<String>,
}

/// A proof item that parsed: bytes as given (decoded by the verifier), values, signal hash.
#[derive(Debug)]
pub struct ParsedItem {
    proof: Vec<u8>,
    values: PublicValues,
    x: Fr,
}

impl ParsedItem {
    /// The item as the verifier takes it.
    #[must_use]
    pub fn as_item(&self) -> ProofItem<'_> {
        ProofItem {
            proof: &self.proof,
            values: self.values,
            x: self.x,
        }
    }
}

fn parse_hex_bytes(name: &str, text: &str) -> Result<Vec<u8>, String> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if !digits.len().is_multiple_of(2) || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{name}: expected hex bytes"));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).map_err(|e| format!("{name}: {e}")))
        .collect()
}

impl VerifyRequest {
    /// Parses the hex fields (values must be canonical field elements).
    ///
    /// # Errors
    /// The first field that does not parse, named.
    pub fn parse(&self) -> Result<ParsedItem, String> {
        let field = |name: &str, text: &str| parse_fr(text).map_err(|e| format!("{name}: {e}"));
        let values = PublicValues {
            y: field("y", &self.y)?,
            root: field("root", &self.root)?,
            nullifier: field("nullifier", &self.nullifier)?,
            x: field("x", &self.x)?,
            external_nullifier: field("external_nullifier", &self.external_nullifier)?,
        };
        let x = match &self.signal {
            Some(signal) => hash_to_field_le(&parse_hex_bytes("signal", signal)?),
            None => values.x,
        };
        Ok(ParsedItem {
            proof: parse_hex_bytes("proof", &self.proof)?,
            values,
            x,
        })
    }
}

/// One item of a batch from any JSON value: an object of the right shape, or the reason it is
/// not.
///
/// # Errors
/// Why the item is malformed.
pub fn parse_value(value: Value) -> Result<ParsedItem, String> {
    serde_json::from_value::<VerifyRequest>(value)
        .map_err(|e| e.to_string())?
        .parse()
}

/// Verifies parsed items (and items that failed to parse, which stay `malformed` with their
/// reason) in one batch; one `{"verdict", "reason"?}` per item, in order.
#[must_use]
pub fn verdicts(
    verifier: &RlnVerifier,
    items: &[Result<ParsedItem, String>],
    roots: &[Fr],
) -> Vec<(Verdict, Option<String>)> {
    let parsed: Vec<ProofItem<'_>> = items
        .iter()
        .filter_map(|i| i.as_ref().ok().map(ParsedItem::as_item))
        .collect();
    let mut checked = verifier.verify_batch(&parsed, roots).into_iter();
    items
        .iter()
        .map(|item| match item {
            Ok(_) => (checked.next().unwrap_or(Verdict::Malformed), None),
            Err(reason) => (Verdict::Malformed, Some(reason.clone())),
        })
        .collect()
}

/// A verdict as JSON.
#[must_use]
pub fn verdict_json(verdict: Verdict, reason: Option<&str>) -> Value {
    match reason {
        Some(reason) => json!({"verdict": verdict.as_str(), "reason": reason}),
        None => json!({"verdict": verdict.as_str()}),
    }
}

/// Counts per verdict, in the enum's order, for summaries.
#[must_use]
pub fn tally(verdicts: &[(Verdict, Option<String>)]) -> Value {
    let mut counts = serde_json::Map::new();
    for v in [
        Verdict::Valid,
        Verdict::Malformed,
        Verdict::UnknownRoot,
        Verdict::SignalMismatch,
        Verdict::BadProof,
    ] {
        let n = verdicts.iter().filter(|(x, _)| *x == v).count();
        counts.insert(v.as_str().to_owned(), json!(n));
    }
    Value::Object(counts)
}

/// The verifier of `canopy verify` and `/verify`: the key file, else zerokit's depth-20 key
/// when built with `rln`.
///
/// # Errors
/// The key cannot be read or does not decode.
pub fn load_verifier(key: Option<&Path>) -> Result<RlnVerifier, String> {
    let bytes = match key {
        Some(path) => {
            std::fs::read(path).map_err(|e| format!("verifying key {}: {e}", path.display()))?
        }
        None => default_verifying_key()?,
    };
    RlnVerifier::from_bytes(&bytes).map_err(|e| e.to_string())
}

#[cfg(feature = "rln")]
fn default_verifying_key() -> Result<Vec<u8>, String> {
    Ok(rln_glue::zerokit::verifying_key_bytes())
}

#[cfg(not(feature = "rln"))]
fn default_verifying_key() -> Result<Vec<u8>, String> {
    Err("no verifying key: give one (built without `rln`)".into())
}

/// Proofs per batch in `canopy verify`: enough for the batch check to pay off fully, small
/// enough that a bad line costs little bisection.
const FILE_BATCH: usize = 256;

/// `canopy verify --db DIR FILE`: every line of `file` (JSON, `-` for stdin) checked against
/// the tree's window of acceptable roots, in batches; one verdict per line and a summary.
///
/// # Errors
/// The database or the file cannot be read, or the key does not load.
pub fn run(db: &crate::ops::Db, file: &Path, key: Option<&Path>) -> Result<Output, CliError> {
    let roots = crate::ops::open(db)?.roots().map_err(CliError::from)?;
    let verifier = load_verifier(key).map_err(CliError::Usage)?;
    let reader = crate::events::open_input(file)?;
    let started = Instant::now();
    let mut all: Vec<(Verdict, Option<String>)> = Vec::new();
    let mut pending: Vec<Result<ParsedItem, String>> = Vec::new();
    for line in reader.lines() {
        let line = line.map_err(|source| CliError::Io {
            path: file.to_path_buf(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        pending.push(
            serde_json::from_str::<Value>(&line)
                .map_err(|e| e.to_string())
                .and_then(parse_value),
        );
        if pending.len() == FILE_BATCH {
            all.extend(verdicts(&verifier, &pending, &roots));
            pending.clear();
        }
    }
    all.extend(verdicts(&verifier, &pending, &roots));
    let seconds = started.elapsed().as_secs_f64();
    let counts = tally(&all);
    let mut text: Vec<String> = all
        .iter()
        .enumerate()
        .map(|(i, (v, reason))| match reason {
            Some(reason) => format!("{} {v} ({reason})", i + 1),
            None => format!("{} {v}", i + 1),
        })
        .collect();
    let valid = all.iter().filter(|(v, _)| *v == Verdict::Valid).count();
    #[allow(clippy::cast_precision_loss)]
    let rate = all.len() as f64 / seconds.max(1e-9);
    text.push(format!(
        "{} proofs: {valid} valid, {} not ({counts}) in {:.1} ms, {rate:.0} proofs/s",
        all.len(),
        all.len() - valid,
        seconds * 1e3
    ));
    Ok(Output {
        text: text.join("\n"),
        json: json!({
            "verdicts": all.iter().map(|(v, r)| verdict_json(*v, r.as_deref())).collect::<Vec<_>>(),
            "summary": {"proofs": all.len(), "counts": counts, "seconds": seconds},
        }),
    })
}
