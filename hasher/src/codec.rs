//! Canonical fixed-length byte encoding of digests.

use crate::Hasher;

/// Why a byte string is not a valid digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input is not exactly the codec's length.
    #[error("digest must be {expected} bytes, got {found}")]
    WrongLength {
        /// The codec's fixed length.
        expected: usize,
        /// The length that was given.
        found: usize,
    },
    /// The bytes encode an integer at or above the field modulus (not a canonical field element).
    #[error("digest bytes are not a canonical field element (value >= modulus)")]
    NonCanonical,
}

/// A fixed-length canonical byte encoding of a hasher's digests.
///
/// Only persistent stores and wire formats need it. `decode(encode(d)) == d` for every digest and
/// `decode` accepts exactly the byte strings `encode` can produce: anything else is an error,
/// never a panic and never a silently reduced value.
pub trait DigestCodec: Hasher {
    /// Encoded length in bytes.
    const LEN: usize;

    /// Writes the canonical encoding of `digest` into `out[..Self::LEN]`.
    ///
    /// # Panics
    /// If `out` is shorter than [`Self::LEN`] (a programming error, not a data error).
    fn encode(digest: &Self::Digest, out: &mut [u8]);

    /// Parses a canonical encoding.
    ///
    /// # Errors
    /// [`DecodeError::WrongLength`] unless `bytes.len() == Self::LEN`; [`DecodeError::NonCanonical`]
    /// for bytes that `encode` never produces.
    fn decode(bytes: &[u8]) -> Result<Self::Digest, DecodeError>;

    /// Convenience: the encoding as a fresh `Vec`.
    fn encode_to_vec(digest: &Self::Digest) -> Vec<u8> {
        let mut out = vec![0u8; Self::LEN];
        Self::encode(digest, &mut out);
        out
    }
}
