//! zerokit interop (feature `zerokit`): our trees behind zerokit_utils 3.x's
//! `ZerokitMerkleTree`, so `rln::RLN<Stateful<ZerokitTree<_>>, _>` runs on them unchanged.
//!
//! `RLNBuilder::stateful()` requires the tree's hasher to be exactly
//! `rln::hashers::PoseidonHash`; the adapter names that type while every hash is computed by our
//! own (bit-identical) Poseidon inside the wrapped tree. Atomicity is kept: `override_range` goes
//! to our single atomic batch, not zerokit's delete-then-set default.

use std::str::FromStr;

use hasher::{Fr, PoseidonHasher};
use rln::hashers::PoseidonHash;
use tree_core::{
    Depth, FullMerkleTree, MerkleProof, MerkleTree, MerkleTreeExt, OptimalMerkleTree, TreeError,
};
use tree_sled::{SledConfig, SledMerkleTree};
use zerokit_utils::merkle_tree::{ZerokitMerkleProof, ZerokitMerkleTree, ZerokitMerkleTreeError};

/// A Canopy tree seen as a zerokit tree.
#[derive(Debug)]
pub struct ZerokitTree<T>(pub T);

/// Errors of the adapter: zerokit's rule errors, or the wrapped tree's own, typed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdapterError {
    /// A rule zerokit states in its own terms.
    #[error(transparent)]
    Zerokit(#[from] ZerokitMerkleTreeError),
    /// An in-memory tree refused the operation.
    #[error("canopy tree: {0}")]
    Tree(#[from] TreeError),
    /// The sled tree refused the operation or failed to store it.
    #[error("canopy sled tree: {0}")]
    Sled(#[from] tree_sled::SledTreeError),
    /// Our witness does not pass zerokit's structural checks.
    #[error("witness: {0}")]
    Witness(#[from] rln::prelude::WitnessInputSingleError),
    /// zerokit's witness serialization failed.
    #[error("witness bytes: {0}")]
    Serialization(#[from] ark_serialize::SerializationError),
    /// zerokit asked for a default leaf other than our empty leaf (zero).
    #[error("only the zero default leaf is supported")]
    DefaultLeaf,
}

/// How each of our trees is built from zerokit's `(depth, config)`.
pub trait ZerokitBacked:
    MerkleTree<Hasher = PoseidonHasher, Error: Into<AdapterError>> + Sized
{
    /// zerokit's `Config` for this tree.
    type Config: Default + FromStr;
    /// A new tree of `depth`.
    ///
    /// # Errors
    /// The tree's construction error.
    fn create(depth: Depth, config: Self::Config) -> Result<Self, AdapterError>;
    /// Makes pending writes durable (`close`).
    ///
    /// # Errors
    /// The tree's flush error.
    fn flush(&mut self) -> Result<(), AdapterError> {
        Ok(())
    }
}

/// The in-memory trees need no configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoConfig;

impl FromStr for NoConfig {
    type Err = std::convert::Infallible;
    fn from_str(_: &str) -> Result<Self, Self::Err> {
        Ok(Self)
    }
}

impl ZerokitBacked for OptimalMerkleTree<PoseidonHasher> {
    type Config = NoConfig;
    fn create(depth: Depth, _: NoConfig) -> Result<Self, AdapterError> {
        Ok(Self::new(depth))
    }
}

impl ZerokitBacked for FullMerkleTree<PoseidonHasher> {
    type Config = NoConfig;
    fn create(depth: Depth, _: NoConfig) -> Result<Self, AdapterError> {
        Ok(Self::new(depth)?)
    }
}

/// The sled tree's configuration as zerokit passes it: a database path, or empty for a
/// temporary database.
#[derive(Debug, Clone, Default)]
pub struct SledPath(pub SledConfig);

impl FromStr for SledPath {
    type Err = std::convert::Infallible;
    fn from_str(path: &str) -> Result<Self, Self::Err> {
        Ok(Self(if path.is_empty() {
            SledConfig::temporary()
        } else {
            SledConfig::new(path)
        }))
    }
}

impl ZerokitBacked for SledMerkleTree<PoseidonHasher> {
    type Config = SledPath;
    fn create(depth: Depth, config: SledPath) -> Result<Self, AdapterError> {
        let config = if config.0.path.is_none() && !config.0.temporary {
            SledConfig::temporary()
        } else {
            config.0
        };
        Ok(Self::open(&config, depth)?)
    }
    fn flush(&mut self) -> Result<(), AdapterError> {
        Ok(self.close()?)
    }
}

/// Our proof as zerokit's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZerokitProof(pub MerkleProof<PoseidonHasher>);

impl ZerokitMerkleProof for ZerokitProof {
    type Index = u8;
    type Hasher = PoseidonHash;

    fn length(&self) -> usize {
        self.0.len()
    }
    fn leaf_index(&self) -> usize {
        usize::try_from(self.0.leaf_index()).unwrap_or(usize::MAX)
    }
    fn get_path_elements(&self) -> Vec<Fr> {
        self.0.path_elements().to_vec()
    }
    fn get_path_index(&self) -> Vec<u8> {
        self.0.path_index()
    }
    fn compute_root_from(&self, leaf: &Fr) -> Fr {
        self.0.compute_root(leaf)
    }
}

fn index(i: usize) -> u64 {
    i as u64
}

/// Our rule errors in zerokit's terms where zerokit has a name for them.
fn rule<E: tree_core::AsTreeError + Into<AdapterError>>(e: E) -> AdapterError {
    match e.as_tree_error() {
        Some(TreeError::IndexOutOfBounds { .. }) => {
            ZerokitMerkleTreeError::LeafIndexOutOfBounds.into()
        }
        Some(
            TreeError::RangeOutOfBounds { .. }
            | TreeError::RangeOverflow { .. }
            | TreeError::TreeFull { .. },
        ) => ZerokitMerkleTreeError::RangeTooLarge.into(),
        Some(TreeError::DeleteUnset { .. }) => ZerokitMerkleTreeError::DeleteUnsetLeaf.into(),
        Some(TreeError::EmptyOverride) => ZerokitMerkleTreeError::EmptyOverrideArgs.into(),
        Some(TreeError::LevelOutOfBounds { .. }) => ZerokitMerkleTreeError::LevelOutOfBounds.into(),
        _ => e.into(),
    }
}

impl<T> ZerokitMerkleTree for ZerokitTree<T>
where
    T: ZerokitBacked,
    T::Error: tree_core::AsTreeError,
{
    type Proof = ZerokitProof;
    type Hasher = PoseidonHash;
    type Config = T::Config;
    type Error = AdapterError;

    fn default(depth: usize) -> Result<Self, AdapterError> {
        Self::new(depth, Fr::from(0u64), T::Config::default())
    }

    fn new(depth: usize, default_leaf: Fr, config: T::Config) -> Result<Self, AdapterError> {
        if default_leaf != Fr::from(0u64) {
            return Err(AdapterError::DefaultLeaf);
        }
        let depth = u8::try_from(depth)
            .ok()
            .and_then(|d| Depth::new(d).ok())
            .ok_or(ZerokitMerkleTreeError::DepthTooLarge)?;
        T::create(depth, config).map(Self)
    }

    fn depth(&self) -> usize {
        usize::from(self.0.depth().get())
    }
    fn capacity(&self) -> usize {
        usize::try_from(self.0.capacity()).unwrap_or(usize::MAX)
    }
    fn leaves_set(&self) -> usize {
        usize::try_from(self.0.next_index()).unwrap_or(usize::MAX)
    }
    fn root(&self) -> Fr {
        self.0.root()
    }
    /// zerokit counts levels from the root (0) down to the leaves (`depth`).
    fn get_subtree_root(&self, level: usize, leaf: usize) -> Result<Fr, AdapterError> {
        let depth = self.depth();
        if level > depth {
            return Err(ZerokitMerkleTreeError::LevelOutOfBounds.into());
        }
        let height = u8::try_from(depth - level).unwrap_or(u8::MAX);
        self.0.subtree_root(height, index(leaf)).map_err(rule)
    }
    fn set(&mut self, i: usize, leaf: Fr) -> Result<(), AdapterError> {
        self.0.set(index(i), leaf).map_err(rule)
    }
    fn set_range<I: ExactSizeIterator<Item = Fr>>(
        &mut self,
        start: usize,
        leaves: I,
    ) -> Result<(), AdapterError> {
        self.0.set_range(index(start), leaves).map_err(rule)
    }
    fn get(&self, i: usize) -> Result<Fr, AdapterError> {
        self.0.get(index(i)).map_err(rule)
    }
    /// Deleted slots (zerokit also lists never-written gaps; a membership set has none).
    fn get_empty_leaves_indices(&self) -> Vec<usize> {
        self.0
            .empty_leaves_indices()
            .map(|v| {
                v.into_iter()
                    .filter_map(|i| usize::try_from(i).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
    /// One atomic batch (zerokit's default would delete, then set).
    fn override_range<I, J>(
        &mut self,
        start: usize,
        leaves: I,
        remove: J,
    ) -> Result<(), AdapterError>
    where
        I: IntoIterator<Item = Fr>,
        J: IntoIterator<Item = usize>,
    {
        self.0
            .override_range(index(start), leaves, remove.into_iter().map(index))
            .map_err(rule)
    }
    fn update_next(&mut self, leaf: Fr) -> Result<(), AdapterError> {
        self.0.update_next(leaf).map_err(rule)
    }
    fn delete(&mut self, i: usize) -> Result<(), AdapterError> {
        self.0.delete(index(i)).map_err(rule)
    }
    fn proof(&self, i: usize) -> Result<ZerokitProof, AdapterError> {
        self.0.proof(index(i)).map(ZerokitProof).map_err(rule)
    }
    fn verify(&self, leaf: &Fr, proof: &ZerokitProof) -> Result<bool, AdapterError> {
        Ok(self.0.verify_proof(&proof.0, leaf))
    }
    fn set_metadata(&mut self, metadata: &[u8]) -> Result<(), AdapterError> {
        self.0.set_metadata(metadata).map_err(rule)
    }
    fn metadata(&self) -> Result<Vec<u8>, AdapterError> {
        self.0.metadata().map_err(rule)
    }
    fn close(&mut self) -> Result<(), AdapterError> {
        self.0.flush()
    }
}

/// The verifying key of the depth-20 single message-id circuit `rln` ships, in the compressed
/// arkworks bytes [`RlnVerifier::from_bytes`](crate::verifier::RlnVerifier::from_bytes) reads:
/// extract it once, then verify without `rln`.
#[must_use]
pub fn verifying_key_bytes() -> Vec<u8> {
    use ark_serialize::CanonicalSerialize;
    let zkey = rln::prelude::default_zkey_single();
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = zkey.0.vk.serialize_compressed(&mut out);
    out
}

impl crate::witness::PublicValues {
    /// The same values as zerokit's type, for its `verify_with_roots`.
    #[must_use]
    pub fn to_zerokit(&self) -> rln::prelude::RLNProofValues {
        rln::prelude::RLNProofValues::new_single()
            .y(self.y)
            .root(self.root)
            .nullifier(self.nullifier)
            .x(self.x)
            .external_nullifier(self.external_nullifier)
            .build()
    }
}

impl crate::witness::RlnWitness {
    /// The same witness as zerokit's type, ready for `RLN::generate_proof`.
    ///
    /// # Errors
    /// zerokit's structural checks (path lengths, `message_id < user_message_limit`).
    pub fn to_zerokit(
        &self,
    ) -> Result<rln::prelude::RLNWitnessInput, rln::prelude::WitnessInputSingleError> {
        let mut secret = self.identity_secret.expose(); // moved into (and zeroized by) SecretFr
        rln::prelude::RLNWitnessInput::new_single()
            .identity_secret(rln::prelude::SecretFr::from(&mut secret))
            .user_message_limit(self.user_message_limit)
            .merkle_proof(rln::prelude::RLNMerkleProof::new(
                self.path_elements.clone(),
                self.identity_path_index.clone(),
            ))
            .x(self.x)
            .external_nullifier(self.external_nullifier)
            .message_id(self.message_id)
            .build()
    }

    /// zerokit's serialized witness (little-endian, what its FFI `witness_input_to_bytes_le`
    /// returns).
    ///
    /// # Errors
    /// As [`to_zerokit`](Self::to_zerokit), as text.
    pub fn to_zerokit_bytes_le(&self) -> Result<Vec<u8>, AdapterError> {
        use ark_serialize::CanonicalSerialize;
        let witness = self.to_zerokit()?;
        let mut out = Vec::new();
        witness.serialize_compressed(&mut out)?;
        Ok(out)
    }
}
