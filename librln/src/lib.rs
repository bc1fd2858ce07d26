//! A drop-in `librln` for nwaku: zerokit v2.0.2's C interface (the `stateless` build nwaku
//! links) on Canopy's prover and verifier.
//!
//! nwaku (logos-messaging/logos-delivery) declares 41 of v2.0.2's C functions; this library
//! exports those 41 with v2.0.2's exact ABI (safer_ffi 0.1.13, the version v2.0.2 builds with)
//! and semantics: the same byte encodings, checks, error cases and ownership rules, the same
//! embedded zkey and witness graph. Underneath, proofs come from fixed-base tables built once
//! per `ffi_rln_new` (IFMA lanes where the CPU has them) and verification starts from a key
//! prepared once per instance. Build with `cargo build --release --manifest-path
//! librln/Cargo.toml`: `target/release/librln.a` and `librln.so`.
//!
//! From Rust, the entry points are ordinary functions:
//!
//! ```
//! use rln::ffi::{ffi_bytes_le_to_cfr, ffi_cfr_free, ffi_cfr_to_bytes_le, ffi_poseidon_hash_pair};
//!
//! let one = ffi_bytes_le_to_cfr(&vec![1u8; 32].into());
//! let one = one.ok.ok_or("refused")?;
//! let hash = ffi_poseidon_hash_pair(&one, &one);
//! assert_eq!(ffi_cfr_to_bytes_le(&hash).len(), 32);
//! // Too short: an error, not a panic.
//! assert!(ffi_bytes_le_to_cfr(&vec![1u8; 31].into()).err.is_some());
//! ffi_cfr_free(hash);
//! ffi_cfr_free(one);
//! # Ok::<(), &str>(())
//! ```

pub mod codec;
pub mod engine;
pub mod ffi;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;

/// The 41 C functions nwaku's `rln_interface.nim` declares, one per line (`#` lines are
/// comments): what this library exports, checked in the archive and the header by the harness.
pub const NWAKU_SYMBOLS: &str = include_str!("../nwaku-symbols.txt");

/// Writes this library's C header to `path` with safer_ffi's generator (as zerokit's
/// `generate-headers` writes `rln.h`).
///
/// # Errors
/// The file cannot be written.
#[cfg(feature = "headers")]
pub fn generate_headers(path: &str) -> std::io::Result<()> {
    safer_ffi::headers::builder().to_file(path)?.generate()
}
