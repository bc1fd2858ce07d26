//! The events file: one JSON object per line, one block each.
//!
//! ```json
//! {"block": 7, "register": ["0x2a", "12345"], "remove": [3]}
//! ```
//! Leaves are field elements: `0x`-prefixed big-endian hex or decimal, canonical (below the
//! BN254 scalar modulus). Blank lines are ignored.

use std::io::BufRead;

use hasher::{fr_from_be_bytes, fr_to_be_bytes, Fr};

use crate::CliError;

/// One block of membership changes, as written in the file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEvent {
    /// The block number (increasing through the file).
    pub block: u64,
    /// Leaves to register, appended at `next_index` in order.
    #[serde(default)]
    pub register: Vec<String>,
    /// Member indices to remove.
    #[serde(default)]
    pub remove: Vec<u64>,
}

/// A parsed block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// 1-based line in the file (0 for blocks made by the demo).
    pub line: usize,
    /// The block number.
    pub number: u64,
    /// Leaves to register.
    pub register: Vec<Fr>,
    /// Indices to remove.
    pub remove: Vec<u64>,
}

/// Parses a field element: `0x` hex (big-endian) or decimal, canonical.
///
/// # Errors
/// A description of what is wrong.
pub fn parse_fr(text: &str) -> Result<Fr, String> {
    let mut bytes = [0u8; 32];
    if let Some(hex) = text.strip_prefix("0x") {
        if hex.is_empty() || hex.len() > 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "{text:?} is not 0x-prefixed hex of at most 64 digits"
            ));
        }
        let padded = format!("{hex:0>64}");
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&padded[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("{text:?} is not hex"))?;
        }
    } else {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{text:?} is neither decimal nor 0x-prefixed hex"));
        }
        // Big-endian base-256 accumulator: bytes = bytes * 10 + digit.
        for digit in text.bytes().map(|b| u32::from(b - b'0')) {
            let mut carry = digit;
            for byte in bytes.iter_mut().rev() {
                let v = u32::from(*byte) * 10 + carry;
                *byte = (v & 0xff) as u8;
                carry = v >> 8;
            }
            if carry != 0 {
                return Err(format!("{text:?} does not fit in 256 bits"));
            }
        }
    }
    fr_from_be_bytes(&bytes).map_err(|_| format!("{text:?} is not below the field modulus"))
}

/// `0x` + 64 hex digits, big-endian: how every field element is printed.
#[must_use]
pub fn fr_hex(value: &Fr) -> String {
    let mut out = String::from("0x");
    for b in fr_to_be_bytes(value) {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Reads every block of an events stream; the first bad line is the error.
///
/// # Errors
/// [`CliError::BadEvent`] with the line number.
pub fn read_blocks(reader: impl BufRead) -> Result<Vec<Block>, CliError> {
    let mut blocks: Vec<Block> = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line_no = i + 1;
        let bad = |reason: String| CliError::BadEvent {
            line: line_no,
            reason,
        };
        let text = line.map_err(|e| bad(e.to_string()))?;
        if text.trim().is_empty() {
            continue;
        }
        let raw: RawEvent = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        if let Some(previous) = blocks.last() {
            if raw.block <= previous.number {
                return Err(bad(format!(
                    "block {} does not follow block {}",
                    raw.block, previous.number
                )));
            }
        }
        let register = raw
            .register
            .iter()
            .map(|s| parse_fr(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        blocks.push(Block {
            line: line_no,
            number: raw.block,
            register,
            remove: raw.remove,
        });
    }
    Ok(blocks)
}

/// A JSON-lines input: the file at `path`, or stdin when `path` is `-`.
///
/// # Errors
/// The file cannot be opened.
pub fn open_input(path: &std::path::Path) -> Result<Box<dyn BufRead>, CliError> {
    if path == std::path::Path::new("-") {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file = std::fs::File::open(path).map_err(|source| CliError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

/// Reads the blocks of an events file, or of stdin when `path` is `-`.
///
/// # Errors
/// The file cannot be opened; [`CliError::BadEvent`] with the line number.
pub fn read_blocks_from(path: &std::path::Path) -> Result<Vec<Block>, CliError> {
    read_blocks(open_input(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_elements_parse_in_both_forms_and_refuse_bad_ones() {
        assert_eq!(parse_fr("42"), Ok(Fr::from(42u64)));
        assert_eq!(parse_fr("0x2a"), Ok(Fr::from(42u64)));
        assert_eq!(parse_fr(&fr_hex(&Fr::from(7u64))), Ok(Fr::from(7u64)));
        let modulus =
            "21888242871839275222246405745257275088548364400416034343698204186575808495617";
        assert!(parse_fr(modulus).is_err());
        assert!(parse_fr(&"9".repeat(80)).is_err());
        for bad in ["", "0x", "-1", "1.5", "0xzz", "abc"] {
            assert!(parse_fr(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_lines_name_their_line_number() {
        let text = "{\"block\": 1, \"register\": [\"1\"]}\n\n{\"block\": 1}\n";
        match read_blocks(text.as_bytes()) {
            Err(CliError::BadEvent { line, .. }) => assert_eq!(line, 3),
            other => panic!("{other:?}"),
        }
        match read_blocks("{\"block\": 1, \"extra\": 2}".as_bytes()) {
            Err(CliError::BadEvent { line: 1, .. }) => {}
            other => panic!("{other:?}"),
        }
        let ok = read_blocks("{\"block\": 3, \"remove\": [0]}\n".as_bytes()).unwrap();
        assert_eq!(ok[0].remove, vec![0]);
    }
}
