//! zerokit v2.0.2's byte encodings (single message id): field elements, proof values, proofs
//! and partial proofs, with its length checks and, where a caller sees them, its messages.

use ark_bn254::{Bn254, Fr, G1Projective, G2Projective};
use ark_groth16::Proof;
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize, SerializationError};
use prover::PartialParts;
use rln_glue::witness::PublicValues;

/// Bytes of a field element.
pub const FR_LEN: usize = 32;
/// Bytes of a compressed Groth16 proof.
pub const PROOF_LEN: usize = 128;
/// The version byte of v2.0.2's single-message-id formats (`SerializationVersion::SingleV1`).
pub const VERSION: u8 = 0x00;
/// Bytes of an encoded RLN proof: version, proof, version, five field elements.
pub const RLN_PROOF_LEN: usize = 1 + PROOF_LEN + 1 + 5 * FR_LEN;

/// Why bytes are not a field element (zerokit's `UtilsError`; `ffi_bytes_le_to_cfr` reports
/// its `Debug` form, so the variant names are zerokit's too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// Fewer than 32 bytes.
    #[error("Input data too short: expected at least {expected} bytes, got {actual} bytes")]
    InsufficientData {
        /// 32.
        expected: usize,
        /// What was given.
        actual: usize,
    },
    /// A value not below the field's modulus.
    #[error("Non-canonical field element: value is not in [0, r-1]")]
    NonCanonicalFieldElement,
}

/// Why bytes are not an encoded proof, proof values or partial proof (zerokit's
/// `ProtocolError` variants that its decoders return, with its messages).
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The input is shorter or longer than what it encodes.
    #[error("Expected to read {0} bytes but read {1} bytes")]
    ReadLen(usize, usize),
    /// A version byte zerokit does not know.
    #[error("Unknown serialization version: {0:#04x}")]
    UnknownVersion(u8),
    /// The multi-message-id version byte, which this (single message id) build refuses.
    #[error(
        "Serialization version {0:#04x} is only valid with the 'multi-message-id' feature enabled"
    )]
    MultiMessageId(u8),
    /// A field element that does not decode.
    #[error("RLN utility error: {0}")]
    Field(#[from] FieldError),
    /// Points that do not decode (off the curve, outside the subgroup, not canonical).
    #[error("Proof serialization error: {0}")]
    Points(#[from] SerializationError),
}

/// The canonical little-endian bytes of `fr`.
#[must_use]
pub fn fr_to_bytes_le(fr: &Fr) -> Vec<u8> {
    hasher::fr_to_le_bytes(fr).to_vec()
}

/// The field element in the first 32 bytes of `bytes` (more are ignored, as zerokit does),
/// decoded by the hasher's one rule (canonical, never reduced).
///
/// # Errors
/// [`FieldError`] for fewer than 32 bytes or a value not below the modulus.
pub fn fr_from_bytes_le(bytes: &[u8]) -> Result<Fr, FieldError> {
    let head = bytes.get(..FR_LEN).ok_or(FieldError::InsufficientData {
        expected: FR_LEN,
        actual: bytes.len(),
    })?;
    hasher::fr_from_le_bytes(head).map_err(|_| FieldError::NonCanonicalFieldElement)
}

/// Checks the version byte at the start of `bytes`.
fn version(bytes: &[u8]) -> Result<(), CodecError> {
    match bytes.first() {
        None => Err(CodecError::ReadLen(1, 0)),
        Some(&VERSION) => Ok(()),
        Some(&0x01) => Err(CodecError::MultiMessageId(0x01)),
        Some(&other) => Err(CodecError::UnknownVersion(other)),
    }
}

/// `[0x00 | root | external nullifier | x | y | nullifier]`.
#[must_use]
pub fn proof_values_to_bytes(values: &PublicValues) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 5 * FR_LEN);
    out.push(VERSION);
    for fr in [
        &values.root,
        &values.external_nullifier,
        &values.x,
        &values.y,
        &values.nullifier,
    ] {
        out.extend_from_slice(&fr_to_bytes_le(fr));
    }
    out
}

/// Proof values filling `bytes` exactly, and the bytes they took.
///
/// # Errors
/// [`CodecError`].
pub fn proof_values_from_bytes(bytes: &[u8]) -> Result<(PublicValues, usize), CodecError> {
    version(bytes)?;
    let mut fields = [Fr::from(0u8); 5];
    for (i, field) in fields.iter_mut().enumerate() {
        *field = fr_from_bytes_le(&bytes[1 + i * FR_LEN..])?;
    }
    let [root, external_nullifier, x, y, nullifier] = fields;
    let read = 1 + 5 * FR_LEN;
    if read != bytes.len() {
        return Err(CodecError::ReadLen(read, bytes.len()));
    }
    Ok((
        PublicValues {
            y,
            root,
            nullifier,
            x,
            external_nullifier,
        },
        read,
    ))
}

/// `[0x00 | proof (128, compressed) | proof values]`: 290 bytes.
#[must_use]
pub fn rln_proof_to_bytes(proof: &Proof<Bn254>, values: &PublicValues) -> Vec<u8> {
    let mut out = Vec::with_capacity(RLN_PROOF_LEN);
    out.push(VERSION);
    out.extend_from_slice(&rln_glue::verifier::proof_to_bytes(proof));
    out.extend_from_slice(&proof_values_to_bytes(values));
    out
}

/// A compressed Groth16 proof, validated as arkworks' `deserialize_compressed` validates it
/// (zerokit's decoder). The fast check of `rln_glue` accepts exactly the same bytes; arkworks'
/// runs only on a refusal, for its message.
///
/// # Errors
/// [`SerializationError`].
pub fn groth16_from_bytes(bytes: &[u8]) -> Result<Proof<Bn254>, SerializationError> {
    match rln_glue::verifier::proof_from_bytes(bytes) {
        Ok(proof) => Ok(proof),
        Err(_) => Proof::<Bn254>::deserialize_compressed(bytes),
    }
}

/// Decodes what [`rln_proof_to_bytes`] writes; nothing may follow.
///
/// # Errors
/// [`CodecError`].
pub fn rln_proof_from_bytes(bytes: &[u8]) -> Result<(Proof<Bn254>, PublicValues), CodecError> {
    version(bytes)?;
    let end = 1 + PROOF_LEN;
    let groth16 = bytes
        .get(1..end)
        .ok_or(CodecError::ReadLen(end, bytes.len()))?;
    let proof = groth16_from_bytes(groth16)?;
    // The values must fill the rest exactly (their decoder's own length check, as zerokit's).
    let (values, _) = proof_values_from_bytes(&bytes[end..])?;
    Ok((proof, values))
}

/// `[0x00 | mask (u64 length, a byte each) | π_A | ρ | π_B | π_C]`, the points compressed:
/// zerokit's `PartialProof` as arkworks serializes it.
#[must_use]
pub fn partial_to_bytes(parts: &PartialParts) -> Vec<u8> {
    let mut out = vec![VERSION];
    // Writing into a Vec cannot fail.
    let _ = parts.mask.serialize_compressed(&mut out);
    let _ = parts.pi_a.serialize_compressed(&mut out);
    let _ = parts.rho.serialize_compressed(&mut out);
    let _ = parts.pi_b.serialize_compressed(&mut out);
    let _ = parts.pi_c.serialize_compressed(&mut out);
    out
}

/// Decodes what [`partial_to_bytes`] writes; nothing may follow. A mask length beyond the
/// input is refused before anything is allocated (zerokit would try to allocate it).
///
/// # Errors
/// [`CodecError`].
pub fn partial_from_bytes(bytes: &[u8]) -> Result<PartialParts, CodecError> {
    version(bytes)?;
    let mut rest = &bytes[1..];
    let len = u64::deserialize_compressed(&mut rest)?;
    if usize::try_from(len).map_or(true, |len| len > rest.len()) {
        return Err(CodecError::Points(SerializationError::InvalidData));
    }
    let mut mask_bytes = &bytes[1..];
    let mask = Vec::<bool>::deserialize_compressed(&mut mask_bytes)?;
    rest = mask_bytes;
    let pi_a = G1Projective::deserialize_compressed(&mut rest)?;
    let rho = G1Projective::deserialize_compressed(&mut rest)?;
    let pi_b = G2Projective::deserialize_compressed(&mut rest)?;
    let pi_c = G1Projective::deserialize_compressed(&mut rest)?;
    if !rest.is_empty() {
        return Err(CodecError::ReadLen(bytes.len() - rest.len(), bytes.len()));
    }
    Ok(PartialParts {
        mask,
        pi_a,
        rho,
        pi_b,
        pi_c,
    })
}
