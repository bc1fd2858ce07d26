//! The RLN circuit's witness for a member of any Canopy tree.

use ark_ff::PrimeField;
use hasher::{Fr, PoseidonHasher};
use tree_core::{MerkleProof, MerkleTree};

use crate::primitives::{id_commitment, rate_commitment, share, IdentitySecret};

/// Why a witness could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WitnessError<E: std::error::Error + 'static> {
    /// The index is past the tree's `next_index` (no member was ever registered there).
    #[error("no member at index {index} (next_index {next_index})")]
    NoMember {
        /// The index.
        index: u64,
        /// The tree's `next_index`.
        next_index: u64,
    },
    /// The leaf is not this identity's rate commitment (empty, removed, or another member).
    #[error("leaf {index} is not the rate commitment of this identity and limit")]
    LeafMismatch {
        /// The index.
        index: u64,
    },
    /// `message_id` must be below `user_message_limit`.
    #[error("message_id is not below user_message_limit")]
    MessageIdOutOfRange,
    /// The tree failed to read.
    #[error("tree: {0}")]
    Tree(#[source] E),
}

/// The public values an RLN proof of a witness carries, in the circuit's order
/// `[y, root, nullifier, x, external_nullifier]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicValues {
    /// The share's `y`.
    pub y: Fr,
    /// The membership root.
    pub root: Fr,
    /// The message nullifier.
    pub nullifier: Fr,
    /// The signal hash.
    pub x: Fr,
    /// The external nullifier.
    pub external_nullifier: Fr,
}

impl PublicValues {
    /// The values in the circuit's public-input order.
    #[must_use]
    pub fn as_inputs(&self) -> [Fr; 5] {
        [
            self.y,
            self.root,
            self.nullifier,
            self.x,
            self.external_nullifier,
        ]
    }
}

/// The circuit inputs that a member's secret, limit and Merkle path fix: what a partial proof
/// computes once per member and root, leaving each message its signal, epoch and message id.
pub const MEMBER_INPUTS: [&str; 4] = [
    "identitySecret",
    "userMessageLimit",
    "pathElements",
    "identityPathIndex",
];

/// A witness's circuit inputs, `(signal name, values)` ([`RlnWitness::circuit_inputs`]); the
/// values, the secret among them, are zeroized on drop.
#[derive(Debug)]
pub struct CircuitInputs([(&'static str, Vec<Fr>); 7]);

impl core::ops::Deref for CircuitInputs {
    type Target = [(&'static str, Vec<Fr>)];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for CircuitInputs {
    fn drop(&mut self) {
        for (_, values) in &mut self.0 {
            zeroize::Zeroize::zeroize(values);
        }
    }
}

/// The RLN witness (single message-id circuit).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RlnWitness {
    /// The member's secret.
    pub identity_secret: IdentitySecret,
    /// The member's message limit per epoch.
    pub user_message_limit: Fr,
    /// This message's id, below the limit.
    pub message_id: Fr,
    /// Sibling path, leaf level first.
    pub path_elements: Vec<Fr>,
    /// 0 where our node is the left child (zerokit's `identity_path_index`).
    pub identity_path_index: Vec<u8>,
    /// The signal hash.
    pub x: Fr,
    /// The external nullifier.
    pub external_nullifier: Fr,
}

impl RlnWitness {
    /// The witness for the member at `index` of `tree`, checked: the leaf must be this
    /// identity's rate commitment and `message_id < user_message_limit`.
    ///
    /// # Errors
    /// [`WitnessError`].
    #[allow(clippy::too_many_arguments)]
    pub fn from_tree<T: MerkleTree<Hasher = PoseidonHasher>>(
        tree: &T,
        index: u64,
        identity_secret: &IdentitySecret,
        user_message_limit: Fr,
        message_id: Fr,
        x: Fr,
        external_nullifier: Fr,
    ) -> Result<Self, WitnessError<T::Error>>
    where
        T::Error: std::error::Error + 'static,
    {
        if index >= tree.next_index() {
            return Err(WitnessError::NoMember {
                index,
                next_index: tree.next_index(),
            });
        }
        if message_id.into_bigint() >= user_message_limit.into_bigint() {
            return Err(WitnessError::MessageIdOutOfRange);
        }
        let leaf = tree.get(index).map_err(WitnessError::Tree)?;
        if leaf != rate_commitment(id_commitment(identity_secret), user_message_limit) {
            return Err(WitnessError::LeafMismatch { index });
        }
        let proof = tree.proof(index).map_err(WitnessError::Tree)?;
        Ok(Self {
            identity_secret: identity_secret.clone(),
            user_message_limit,
            message_id,
            path_elements: proof.path_elements().to_vec(),
            identity_path_index: proof.path_index(),
            x,
            external_nullifier,
        })
    }

    /// The public values a proof of this witness must carry, computed with our primitives.
    #[must_use]
    pub fn public_values(&self) -> PublicValues {
        let leaf = rate_commitment(
            id_commitment(&self.identity_secret),
            self.user_message_limit,
        );
        // The tree's one proof-folding rule, fed the witness's path.
        let index = self
            .identity_path_index
            .iter()
            .enumerate()
            .fold(0u64, |acc, (level, &bit)| {
                // zerokit's rule: any byte but 0 means our node is the right child.
                acc | (u64::from(bit != 0) << (level % 64))
            });
        let root = MerkleProof::<PoseidonHasher>::new(index, self.path_elements.clone())
            .compute_root(&leaf);
        let s = share(
            &self.identity_secret,
            self.external_nullifier,
            self.message_id,
            self.x,
        );
        PublicValues {
            y: s.y,
            root,
            nullifier: s.nullifier,
            x: self.x,
            external_nullifier: self.external_nullifier,
        }
    }

    /// The circuit's inputs by signal name, in field elements: what a witness calculator takes.
    /// They hold the secret, so they are zeroized when dropped.
    #[must_use]
    pub fn circuit_inputs(&self) -> CircuitInputs {
        CircuitInputs([
            ("identitySecret", vec![self.identity_secret.expose()]),
            ("userMessageLimit", vec![self.user_message_limit]),
            ("messageId", vec![self.message_id]),
            ("pathElements", self.path_elements.clone()),
            (
                "identityPathIndex",
                self.identity_path_index
                    .iter()
                    .map(|&b| Fr::from(b))
                    .collect(),
            ),
            ("x", vec![self.x]),
            ("externalNullifier", vec![self.external_nullifier]),
        ])
    }

    /// The circom input JSON (`identitySecret`, `userMessageLimit`, `messageId`, `pathElements`,
    /// `identityPathIndex`, `x`, `externalNullifier`), field elements as decimal strings.
    #[must_use]
    pub fn to_circom_json(&self) -> serde_json::Value {
        let dec = |v: &Fr| serde_json::Value::String(v.into_bigint().to_string());
        serde_json::json!({
            "identitySecret": dec(&self.identity_secret.expose()),
            "userMessageLimit": dec(&self.user_message_limit),
            "messageId": dec(&self.message_id),
            "pathElements": self.path_elements.iter().map(dec).collect::<Vec<_>>(),
            "identityPathIndex": self.identity_path_index,
            "x": dec(&self.x),
            "externalNullifier": dec(&self.external_nullifier),
        })
    }
}
