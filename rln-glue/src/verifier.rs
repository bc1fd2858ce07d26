//! An RLN proof verifier that needs only the verifying key: most relay nodes only verify, and
//! should not need the proving key, the witness graph or the `rln` crate's dependency tree.
//!
//! The key is loaded from its arkworks compressed bytes (extract it once from the zkey `rln`
//! ships with `zerokit::verifying_key_bytes`, feature `zerokit`). Public inputs are taken in the
//! circuit's order `[y, root, nullifier, x, external_nullifier]`.

use ark_bn254::Bn254;
use ark_groth16::{prepare_verifying_key, Groth16, PreparedVerifyingKey, Proof, VerifyingKey};
use ark_serialize::{CanonicalDeserialize, CanonicalSerialize};
use hasher::Fr;
use tree_core::History;

use crate::witness::PublicValues;

/// A Groth16 proof over BN254, as zerokit's `rln` produces it.
pub type RlnProof = Proof<Bn254>;

/// Bytes of a compressed proof (two G1 points and one G2 point).
pub const PROOF_LEN: usize = 128;

/// Why a proof was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError<E: std::error::Error + 'static = std::convert::Infallible> {
    /// The verifying key bytes do not decode.
    #[error("malformed verifying key")]
    MalformedKey,
    /// The proof bytes do not decode (wrong length or not points on the curve).
    #[error("malformed proof ({found} bytes, expected {PROOF_LEN})")]
    MalformedProof {
        /// Bytes given.
        found: usize,
    },
    /// The proof's root is not an acceptable root.
    #[error("the proof's root is not in the window of acceptable roots")]
    UnknownRoot,
    /// The proof is for another signal than the message carries.
    #[error("the proof's x does not match the message's signal")]
    SignalMismatch,
    /// The pairing check failed: the proof does not prove these values.
    #[error("invalid proof")]
    BadProof,
    /// The tree could not list its roots.
    #[error("tree: {0}")]
    Tree(#[source] E),
}

/// A prepared verifying key.
#[derive(Clone, Debug)]
pub struct RlnVerifier {
    pvk: PreparedVerifyingKey<Bn254>,
}

/// Decodes a compressed proof.
///
/// # Errors
/// [`VerifyError::MalformedProof`].
pub fn proof_from_bytes(bytes: &[u8]) -> Result<RlnProof, VerifyError> {
    if bytes.len() != PROOF_LEN {
        return Err(VerifyError::MalformedProof { found: bytes.len() });
    }
    RlnProof::deserialize_compressed(bytes)
        .map_err(|_| VerifyError::MalformedProof { found: bytes.len() })
}

/// Encodes a proof in the compressed form [`proof_from_bytes`] reads.
#[must_use]
pub fn proof_to_bytes(proof: &RlnProof) -> Vec<u8> {
    let mut out = Vec::with_capacity(PROOF_LEN);
    // Writing into a Vec cannot fail.
    let _ = proof.serialize_compressed(&mut out);
    out
}

impl RlnVerifier {
    /// Loads a verifying key from its compressed arkworks bytes (points are checked).
    ///
    /// # Errors
    /// [`VerifyError::MalformedKey`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, VerifyError> {
        let vk = VerifyingKey::<Bn254>::deserialize_compressed(bytes)
            .map_err(|_| VerifyError::MalformedKey)?;
        Ok(Self {
            pvk: prepare_verifying_key(&vk),
        })
    }

    /// The pairing check on public inputs in the circuit's order.
    #[must_use]
    pub fn verify_inputs(&self, proof: &RlnProof, inputs: &[Fr; 5]) -> bool {
        Groth16::<Bn254>::verify_proof(&self.pvk, proof, inputs).unwrap_or(false)
    }

    /// Checks a message: its signal `x`, its root against `acceptable_roots`, then the proof.
    ///
    /// # Errors
    /// [`VerifyError::SignalMismatch`], [`VerifyError::UnknownRoot`], [`VerifyError::BadProof`].
    pub fn verify_message<E: std::error::Error + 'static>(
        &self,
        proof: &RlnProof,
        values: &PublicValues,
        x: &Fr,
        acceptable_roots: &[Fr],
    ) -> Result<(), VerifyError<E>> {
        if values.x != *x {
            return Err(VerifyError::SignalMismatch);
        }
        if !acceptable_roots.contains(&values.root) {
            return Err(VerifyError::UnknownRoot);
        }
        if !self.verify_inputs(proof, &values.as_inputs()) {
            return Err(VerifyError::BadProof);
        }
        Ok(())
    }

    /// [`verify_message`](Self::verify_message) against the tree's window of acceptable roots.
    ///
    /// # Errors
    /// As `verify_message`, or the tree's error listing its roots.
    pub fn verify_against<T>(
        &self,
        proof: &RlnProof,
        values: &PublicValues,
        x: &Fr,
        tree: &T,
    ) -> Result<(), VerifyError<T::Error>>
    where
        T: History<Hasher = hasher::PoseidonHasher>,
        T::Error: std::error::Error + 'static,
    {
        let roots = tree.roots().map_err(VerifyError::Tree)?;
        self.verify_message(proof, values, x, &roots)
    }
}
