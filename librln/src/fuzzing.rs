//! The fuzz target of the entry points that take bytes from the network or a caller:
//! `ffi_bytes_le_to_cfr`, `ffi_bytes_le_to_rln_proof`, `ffi_rln_proof_new` (with its five field
//! elements from the same bytes), `ffi_bytes_le_to_rln_partial_proof` and
//! `ffi_rln_new_with_params` (the key and graph parsers; nothing is built unless both parse).
//!
//! Invariants: every result has exactly one of `ok` and `err`; no entry point reaches its panic
//! guard (an `err` saying "caught panic" is a finding: the guard keeps it from crossing into C,
//! but it is still a bug); the proof decoder accepts exactly what arkworks' does; what decodes
//! re-encodes to a fixpoint (canonical input to itself); everything returned is freed. Run by `tests/fuzz.rs` on stable and by `fuzz/` under libFuzzer.

// A fuzz target reports a finding by panicking.
#![allow(clippy::panic)]

use ark_bn254::Bn254;
use ark_groth16::Proof;
use ark_serialize::CanonicalDeserialize;
use safer_ffi::prelude::repr_c;

use crate::ffi::{self, CResult};

/// `ok` xor `err`, and no caught panic; returns the value.
fn checked<T: safer_ffi::layout::ReprC>(what: &str, r: CResult<T, repr_c::String>) -> Option<T> {
    match (r.ok, r.err) {
        (Some(v), None) => Some(v),
        (None, Some(e)) => {
            assert!(!e.contains("caught panic"), "{what}: {}", &*e);
            ffi::ffi_c_string_free(e);
            None
        }
        (Some(_), Some(_)) => panic!("{what}: both ok and err"),
        (None, None) => panic!("{what}: neither ok nor err"),
    }
}

/// Runs one input through every byte-taking entry point.
pub fn byte_entry_points(data: &[u8]) {
    let bytes: repr_c::Vec<u8> = data.to_vec().into();

    if let Some(cfr) = checked("bytes_le_to_cfr", ffi::ffi_bytes_le_to_cfr(&bytes)) {
        assert!(data.len() >= 32);
        let back = ffi::ffi_cfr_to_bytes_le(&cfr);
        assert_eq!(&back[..], &data[..32], "a field element did not re-encode");
        ffi::ffi_vec_u8_free(back);
        ffi::ffi_cfr_free(cfr);
    }

    // The Groth16 part alone: our decoder accepts exactly what arkworks' validating one does
    // (zerokit's), with the same points.
    if let Some(groth16) = data.get(1..=crate::codec::PROOF_LEN) {
        let ours = crate::codec::groth16_from_bytes(groth16).ok();
        let arkworks = Proof::<Bn254>::deserialize_compressed(groth16).ok();
        assert_eq!(
            ours, arkworks,
            "the fast proof decoder disagrees with arkworks'"
        );
    }

    if let Some(proof) = checked(
        "bytes_le_to_rln_proof",
        ffi::ffi_bytes_le_to_rln_proof(&bytes),
    ) {
        assert_eq!(data.len(), crate::codec::RLN_PROOF_LEN);
        // arkworks reads a point with its infinity flag set as infinity whatever the other bits
        // say, so the encoding is canonical only from the first re-encoding on: a fixpoint.
        let once = reencode_proof(&proof);
        let again = checked(
            "bytes_le_to_rln_proof",
            ffi::ffi_bytes_le_to_rln_proof(&once.clone().into()),
        )
        .unwrap_or_else(|| panic!("a re-encoded proof did not decode"));
        assert_eq!(
            reencode_proof(&again),
            once,
            "a proof's encoding is not a fixpoint"
        );
        if data[1..=crate::codec::PROOF_LEN]
            .iter()
            .zip(&once[1..])
            .all(|(a, b)| a == b)
        {
            assert_eq!(
                &once[..],
                data,
                "a canonical proof did not re-encode to itself"
            );
        }
        ffi::ffi_rln_proof_free(again);
        ffi::ffi_rln_proof_free(proof);
    }

    // nwaku's receive path: the Groth16 part is a prefix of any length (the first byte says
    // how long), the five values follow.
    if let Some((&n, rest)) = data.split_first() {
        let cut = usize::from(n).min(rest.len());
        let (groth16, values) = rest.split_at(cut);
        let mut fields = Vec::new();
        for chunk in values.chunks(32).take(5) {
            let v: repr_c::Vec<u8> = chunk.to_vec().into();
            match checked("bytes_le_to_cfr", ffi::ffi_bytes_le_to_cfr(&v)) {
                Some(c) => fields.push(c),
                None => break,
            }
        }
        if let [root, en, x, y, nullifier] = &fields[..] {
            let g: repr_c::Vec<u8> = groth16.to_vec().into();
            let made = ffi::ffi_rln_proof_new(&g, root, en, x, y, nullifier);
            if let Some(proof) = checked("rln_proof_new", made) {
                assert_eq!(groth16.len(), crate::codec::PROOF_LEN);
                ffi::ffi_rln_proof_free(proof);
            }
        }
        for c in fields {
            ffi::ffi_cfr_free(c);
        }
    }

    let partial = ffi::ffi_bytes_le_to_rln_partial_proof(&bytes);
    if let Some(partial) = checked("bytes_le_to_rln_partial_proof", partial) {
        let once = reencode_partial(&partial);
        let again = ffi::ffi_bytes_le_to_rln_partial_proof(&once.clone().into());
        let again = checked("bytes_le_to_rln_partial_proof", again)
            .unwrap_or_else(|| panic!("a re-encoded partial proof did not decode"));
        assert_eq!(
            reencode_partial(&again),
            once,
            "a partial proof's encoding is not a fixpoint"
        );
        assert_eq!(once.len(), data.len(), "a partial proof changed length");
        ffi::ffi_rln_partial_proof_free(again);
        ffi::ffi_rln_partial_proof_free(partial);
    }

    // The key and the graph, split where the first two bytes say.
    if data.len() >= 2 {
        let at = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        let (zkey, graph) = data[2..].split_at(at);
        let (zkey, graph): (repr_c::Vec<u8>, repr_c::Vec<u8>) =
            (zkey.to_vec().into(), graph.to_vec().into());
        if let Some(rln) = checked(
            "rln_new_with_params",
            ffi::ffi_rln_new_with_params(&zkey, &graph),
        ) {
            ffi::ffi_rln_free(rln);
        }
    }
}

fn reencode_proof(proof: &repr_c::Box<ffi::FFI_RLNProof>) -> Vec<u8> {
    owned_bytes(
        "rln_proof_to_bytes_le",
        ffi::ffi_rln_proof_to_bytes_le(proof),
    )
}

fn reencode_partial(partial: &repr_c::Box<ffi::FFI_RLNPartialProof>) -> Vec<u8> {
    owned_bytes(
        "rln_partial_proof_to_bytes_le",
        ffi::ffi_rln_partial_proof_to_bytes_le(partial),
    )
}

/// The bytes of an encoding that must succeed, copied out and the library's vector freed.
fn owned_bytes(what: &str, r: CResult<repr_c::Vec<u8>, repr_c::String>) -> Vec<u8> {
    let bytes =
        checked(what, r).unwrap_or_else(|| panic!("{what}: a decoded value did not encode"));
    let out = bytes.to_vec();
    ffi::ffi_vec_u8_free(bytes);
    out
}

/// Valid inputs to mutate: a proof's 290 bytes and its parts' layout, a partial proof, a field
/// element, the embedded key's first bytes.
#[must_use]
pub fn seeds(proof: &[u8], partial: &[u8]) -> Vec<Vec<u8>> {
    let mut parts = vec![128u8];
    parts.extend_from_slice(&proof[1..129]);
    parts.extend_from_slice(&proof[130..]);
    let mut key = vec![0xff, 0x03];
    key.extend_from_slice(&prover::rln::ARKZKEY[..1024]);
    vec![
        proof.to_vec(),
        parts,
        partial.to_vec(),
        proof[130..162].to_vec(),
        key,
    ]
}
