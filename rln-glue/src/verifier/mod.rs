//! An RLN proof verifier that needs only the verifying key: most relay nodes only verify, and
//! should not need the proving key, the witness graph or the `rln` crate's dependency tree.
//!
//! The key is loaded from its arkworks compressed bytes (extract it once from the zkey `rln`
//! ships with `zerokit::verifying_key_bytes`, feature `zerokit`). Public inputs are taken in the
//! circuit's order `[y, root, nullifier, x, external_nullifier]`.
//!
//! Messages are checked in zerokit's order — the proof's bytes decode (points on the curve and in
//! the prime-order subgroup), the root is in the window, the proof's `x` is the message's signal,
//! then the pairing check — so a message gets the [`Verdict`] zerokit's `verify_with_roots`
//! would give it, whether it is checked alone ([`RlnVerifier::verify_item`]) or in a batch
//! ([`RlnVerifier::verify_batch`], the relay's path: one pairing product for the whole batch).

mod batch;
mod g2_subgroup;
mod rerandomize;

pub use batch::BatchConfig;
pub use rerandomize::rerandomize;

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

/// What verification says about one message: exactly one of these, the same whether it was
/// checked alone or in a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The proof proves these public values, its root is acceptable and its `x` is the signal's.
    Valid,
    /// The proof's bytes do not decode: wrong length, a point off the curve or outside the
    /// prime-order subgroup, a non-canonical coordinate.
    Malformed,
    /// The proof's root is not in the window of acceptable roots.
    UnknownRoot,
    /// The proof's `x` is not the message's signal.
    SignalMismatch,
    /// The pairing check failed: the proof does not prove these public values.
    BadProof,
}

impl Verdict {
    /// The verdict's name in lower case (`valid`, `malformed`, `unknown_root`, ...), for logs
    /// and JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Malformed => "malformed",
            Self::UnknownRoot => "unknown_root",
            Self::SignalMismatch => "signal_mismatch",
            Self::BadProof => "bad_proof",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message to verify, as a relay receives it: the proof's bytes, the public values it claims,
/// and the signal hash `x` of the message it came with.
#[derive(Clone, Copy, Debug)]
pub struct ProofItem<'a> {
    /// The compressed proof, [`PROOF_LEN`] bytes when well formed.
    pub proof: &'a [u8],
    /// The public values the proof claims.
    pub values: PublicValues,
    /// `hash_to_field` of the message's signal.
    pub x: Fr,
}

/// A prepared verifying key.
#[derive(Clone, Debug)]
pub struct RlnVerifier {
    pvk: PreparedVerifyingKey<Bn254>,
    batch: BatchConfig,
}

/// The value checks, in zerokit's order: the root is acceptable, then `x` is the message's.
fn check_values(values: &PublicValues, x: &Fr, acceptable_roots: &[Fr]) -> Result<(), Verdict> {
    if !acceptable_roots.contains(&values.root) {
        return Err(Verdict::UnknownRoot);
    }
    if values.x != *x {
        return Err(Verdict::SignalMismatch);
    }
    Ok(())
}

/// Everything but the pairing check: the proof decodes, then [`check_values`]. Single and batch
/// verification both start here.
fn precheck(item: &ProofItem<'_>, acceptable_roots: &[Fr]) -> Result<RlnProof, Verdict> {
    let proof = proof_from_bytes(item.proof).map_err(|_| Verdict::Malformed)?;
    check_values(&item.values, &item.x, acceptable_roots)?;
    Ok(proof)
}

/// Decodes a compressed proof and validates its points: A and C on the curve (G1's cofactor is
/// 1), B on the twist and in G2 (by the endomorphism test of `g2_subgroup`, twice as fast as
/// arkworks' own). Accepts exactly what arkworks' validating decoder accepts.
///
/// # Errors
/// [`VerifyError::MalformedProof`].
pub fn proof_from_bytes(bytes: &[u8]) -> Result<RlnProof, VerifyError> {
    let malformed = || VerifyError::MalformedProof { found: bytes.len() };
    if bytes.len() != PROOF_LEN {
        return Err(malformed());
    }
    // Unchecked decoding still refuses non-canonical coordinates and x with no point above it.
    let proof = RlnProof::deserialize_compressed_unchecked(bytes).map_err(|_| malformed())?;
    if proof.a.is_on_curve() && proof.c.is_on_curve() && g2_subgroup::valid_g2(&proof.b) {
        Ok(proof)
    } else {
        Err(malformed())
    }
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
        Self::new(&vk)
    }

    /// Prepares `vk` (a proving key's own, say), once: every verification then starts from the
    /// prepared key.
    ///
    /// # Errors
    /// [`VerifyError::MalformedKey`] for a key without RLN's five public inputs.
    pub fn new(vk: &VerifyingKey<Bn254>) -> Result<Self, VerifyError> {
        // RLN has five public inputs: IC_0 and one point each.
        if vk.gamma_abc_g1.len() != 6 {
            return Err(VerifyError::MalformedKey);
        }
        Ok(Self {
            pvk: prepare_verifying_key(vk),
            batch: BatchConfig::default(),
        })
    }

    /// The same key with another batch configuration.
    #[must_use]
    pub fn with_batch_config(mut self, batch: BatchConfig) -> Self {
        self.batch = batch;
        self
    }

    /// The verifying key.
    #[must_use]
    pub fn verifying_key(&self) -> &VerifyingKey<Bn254> {
        &self.pvk.vk
    }

    /// One message alone, with ark-groth16's verifier: the reference that
    /// [`verify_batch`](Self::verify_batch) agrees with.
    #[must_use]
    pub fn verify_item(&self, item: &ProofItem<'_>, acceptable_roots: &[Fr]) -> Verdict {
        match precheck(item, acceptable_roots) {
            Err(verdict) => verdict,
            Ok(proof) if self.verify_inputs(&proof, &item.values.as_inputs()) => Verdict::Valid,
            Ok(_) => Verdict::BadProof,
        }
    }

    /// The pairing check on public inputs in the circuit's order.
    #[must_use]
    pub fn verify_inputs(&self, proof: &RlnProof, inputs: &[Fr; 5]) -> bool {
        Groth16::<Bn254>::verify_proof(&self.pvk, proof, inputs).unwrap_or(false)
    }

    /// Checks a decoded message: its root against `acceptable_roots`, its signal `x`, then the
    /// proof (zerokit's order).
    ///
    /// # Errors
    /// [`VerifyError::UnknownRoot`], [`VerifyError::SignalMismatch`], [`VerifyError::BadProof`].
    pub fn verify_message<E: std::error::Error + 'static>(
        &self,
        proof: &RlnProof,
        values: &PublicValues,
        x: &Fr,
        acceptable_roots: &[Fr],
    ) -> Result<(), VerifyError<E>> {
        check_values(values, x, acceptable_roots).map_err(|verdict| match verdict {
            Verdict::UnknownRoot => VerifyError::UnknownRoot,
            _ => VerifyError::SignalMismatch,
        })?;
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
