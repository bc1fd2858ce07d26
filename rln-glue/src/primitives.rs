//! RLN primitives over Canopy's Poseidon (`hasher::poseidon`), byte-compatible with zerokit
//! `rln` 3.x: the same inputs give the same field elements.

use std::fmt;

use ark_ff::{Field, PrimeField, UniformRand};
use ark_std::rand::{CryptoRng, RngCore};
use hasher::{poseidon, Fr};
use tiny_keccak::{Hasher as _, Keccak};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Why an RLN computation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RlnError {
    /// Two shares with the same `x` determine nothing (the same message, or a replay).
    #[error("the two shares have the same x: the secret cannot be recovered")]
    SameSignal,
    /// The two shares belong to different epochs (external nullifiers).
    #[error("the shares are for different external nullifiers")]
    ExternalNullifierMismatch,
    /// The two shares have different nullifiers (different message ids or members).
    #[error("the shares have different nullifiers")]
    NullifierMismatch,
}

/// Poseidon of 1–3 elements: always a supported width.
fn hash(inputs: &[Fr]) -> Fr {
    match poseidon(inputs) {
        Ok(value) => value,
        Err(_) => unreachable!("Poseidon of 1..=3 inputs is always supported"),
    }
}

/// An identity secret: zeroized on drop, never printed.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct IdentitySecret(Fr);

impl IdentitySecret {
    /// Wraps a secret field element.
    #[must_use]
    pub fn new(secret: Fr) -> Self {
        Self(secret)
    }

    /// A uniformly random secret from a cryptographic RNG.
    pub fn random<R: RngCore + CryptoRng>(rng: &mut R) -> Self {
        Self(Fr::rand(rng))
    }

    /// The secret value (handle with care: copies are not zeroized).
    #[must_use]
    pub fn expose(&self) -> Fr {
        self.0
    }
}

impl fmt::Debug for IdentitySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdentitySecret(<redacted>)")
    }
}

/// `id_commitment = Poseidon([identity_secret])`.
#[must_use]
pub fn id_commitment(secret: &IdentitySecret) -> Fr {
    hash(&[secret.0])
}

/// An identity: the secret and its commitment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentityKeys {
    secret: IdentitySecret,
    commitment: Fr,
}

impl IdentityKeys {
    /// The identity of `secret`.
    #[must_use]
    pub fn from_secret(secret: IdentitySecret) -> Self {
        let commitment = id_commitment(&secret);
        Self { secret, commitment }
    }

    /// The secret.
    #[must_use]
    pub fn secret(&self) -> &IdentitySecret {
        &self.secret
    }

    /// `Poseidon([secret])`.
    #[must_use]
    pub fn id_commitment(&self) -> Fr {
        self.commitment
    }
}

/// The Semaphore-compatible identity: `secret = Poseidon([trapdoor, nullifier])`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendedIdentityKeys {
    trapdoor: IdentitySecret,
    nullifier: IdentitySecret,
    keys: IdentityKeys,
}

impl ExtendedIdentityKeys {
    /// The identity of `(trapdoor, nullifier)`.
    #[must_use]
    pub fn from_parts(trapdoor: IdentitySecret, nullifier: IdentitySecret) -> Self {
        let secret = IdentitySecret(hash(&[trapdoor.0, nullifier.0]));
        Self {
            trapdoor,
            nullifier,
            keys: IdentityKeys::from_secret(secret),
        }
    }

    /// The identity trapdoor.
    #[must_use]
    pub fn trapdoor(&self) -> &IdentitySecret {
        &self.trapdoor
    }

    /// The identity nullifier.
    #[must_use]
    pub fn identity_nullifier(&self) -> &IdentitySecret {
        &self.nullifier
    }

    /// The derived identity (secret and commitment).
    #[must_use]
    pub fn keys(&self) -> &IdentityKeys {
        &self.keys
    }
}

/// The tree leaf of a member: `Poseidon([id_commitment, user_message_limit])`.
#[must_use]
pub fn rate_commitment(id_commitment: Fr, user_message_limit: Fr) -> Fr {
    hash(&[id_commitment, user_message_limit])
}

/// `Poseidon([epoch, rln_identifier])`: the per-epoch, per-application nullifier domain.
#[must_use]
pub fn external_nullifier(epoch: Fr, rln_identifier: Fr) -> Fr {
    hash(&[epoch, rln_identifier])
}

/// Keccak-256 of `bytes` (zerokit's digest for signals and for the seed of its seeded keygen).
#[must_use]
pub fn keccak256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut k = Keccak::v256();
    k.update(bytes);
    k.finalize(&mut out);
    out
}

/// Keccak-256 of `signal`, read little-endian and reduced into the field (zerokit's
/// `hash_to_field_le`).
#[must_use]
pub fn hash_to_field_le(signal: &[u8]) -> Fr {
    Fr::from_le_bytes_mod_order(&keccak256(signal))
}

/// Keccak-256 of `signal`, read big-endian and reduced into the field (`hash_to_field_be`).
#[must_use]
pub fn hash_to_field_be(signal: &[u8]) -> Fr {
    Fr::from_be_bytes_mod_order(&keccak256(signal))
}

/// The slope of a member's line for one message: `a1 = Poseidon([secret, external_nullifier,
/// message_id])`.
#[must_use]
pub fn share_slope(secret: &IdentitySecret, external_nullifier: Fr, message_id: Fr) -> Fr {
    hash(&[secret.0, external_nullifier, message_id])
}

/// What a message reveals: the point `(x, y)` on the member's line and its nullifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// The signal hash.
    pub x: Fr,
    /// `secret + x · a1`.
    pub y: Fr,
    /// `Poseidon([a1])`: equal for two messages with the same epoch and message id.
    pub nullifier: Fr,
    /// The external nullifier the share was made for.
    pub external_nullifier: Fr,
}

/// The share of a message with signal hash `x`.
#[must_use]
pub fn share(secret: &IdentitySecret, external_nullifier: Fr, message_id: Fr, x: Fr) -> Share {
    let a1 = share_slope(secret, external_nullifier, message_id);
    Share {
        x,
        y: secret.0 + x * a1,
        nullifier: hash(&[a1]),
        external_nullifier,
    }
}

/// Slashing: the secret of a member who sent two messages with the same nullifier.
///
/// # Errors
/// [`RlnError::ExternalNullifierMismatch`], [`RlnError::NullifierMismatch`], or
/// [`RlnError::SameSignal`] when the two shares are the same point.
pub fn recover_secret(first: &Share, second: &Share) -> Result<IdentitySecret, RlnError> {
    if first.external_nullifier != second.external_nullifier {
        return Err(RlnError::ExternalNullifierMismatch);
    }
    if first.nullifier != second.nullifier {
        return Err(RlnError::NullifierMismatch);
    }
    secret_on_line((first.x, first.y), (second.x, second.y))
}

/// The intercept of the line through two points `(x, y)`: the secret, when both are shares of one
/// member's line (zerokit's `compute_id_secret`, which checks nothing else).
///
/// # Errors
/// [`RlnError::SameSignal`] for two points with the same `x`.
pub fn secret_on_line(first: (Fr, Fr), second: (Fr, Fr)) -> Result<IdentitySecret, RlnError> {
    let ((x1, y1), (x2, y2)) = (first, second);
    let inverse = (x1 - x2).inverse().ok_or(RlnError::SameSignal)?;
    let a1 = (y1 - y2) * inverse;
    Ok(IdentitySecret(y1 - x1 * a1))
}
