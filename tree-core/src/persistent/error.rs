//! The error type of the persistent tree.

use std::path::PathBuf;

use crate::{AsTreeError, TreeError};

/// Why a persistent tree operation failed. Generic over the store's error so a fake store in
/// tests keeps its own type.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PersistentTreeError<S: std::error::Error + 'static> {
    /// A tree rule was broken (bad index, range, delete...): nothing was written.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// The store failed to read, write or flush.
    #[error("storage error: {0}")]
    Store(#[source] S),
    /// A stored value cannot be decoded: the database is damaged or was written by something else.
    #[error("corrupted value at key {key:02x?}: {reason}")]
    Corrupted {
        /// The key whose value is bad.
        key: Vec<u8>,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The store holds a tree of another depth.
    #[error("stored tree has depth {stored}, requested {requested}")]
    DepthMismatch {
        /// Depth in the store.
        stored: u8,
        /// Depth asked for.
        requested: u8,
    },
    /// The store was built with another hasher.
    #[error("stored tree uses hasher {stored:?}, requested {requested:?}")]
    HasherMismatch {
        /// Hasher ID in the store.
        stored: String,
        /// Hasher ID asked for.
        requested: &'static str,
    },
    /// The store's format version is not one this build reads.
    #[error("stored format version {found}, this build supports {supported}")]
    FormatVersion {
        /// Version in the store.
        found: u32,
        /// Version this build writes and reads.
        supported: u32,
    },
    /// The store holds data but no Canopy header: not a tree, left untouched.
    #[error("store is not empty but holds no Canopy tree header")]
    NotATree,
    /// A failed commit may or may not have reached the store; the tree kept its state from
    /// before the failed call and refuses the store until it is reopened (which reads whichever
    /// state is durable).
    #[error("a failed commit left the store indeterminate: reopen the tree")]
    Indeterminate,
    /// The directory holds files but no database: nothing was written to it.
    #[error("{path:?} is a non-empty directory that holds no database; refusing to write there")]
    ForeignDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// Another handle (this process or another) holds the database.
    #[error("database at {path:?} is locked by another handle")]
    Locked {
        /// The database directory.
        path: PathBuf,
    },
    /// Opening the database directory or its lock file failed.
    #[error("cannot open {path:?}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl<S: std::error::Error + 'static> AsTreeError for PersistentTreeError<S> {
    fn as_tree_error(&self) -> Option<&TreeError> {
        match self {
            Self::Tree(e) => Some(e),
            _ => None,
        }
    }
}

impl<S: std::error::Error + 'static> PersistentTreeError<S> {
    /// The same error with the store's error mapped by `f` (a store that wraps another, such as
    /// one over several engines, reports the inner store's errors as its own).
    pub fn map_store<T: std::error::Error + 'static>(
        self,
        f: impl FnOnce(S) -> T,
    ) -> PersistentTreeError<T> {
        use PersistentTreeError as E;
        match self {
            E::Tree(e) => E::Tree(e),
            E::Store(e) => E::Store(f(e)),
            E::Corrupted { key, reason } => E::Corrupted { key, reason },
            E::DepthMismatch { stored, requested } => E::DepthMismatch { stored, requested },
            E::HasherMismatch { stored, requested } => E::HasherMismatch { stored, requested },
            E::FormatVersion { found, supported } => E::FormatVersion { found, supported },
            E::NotATree => E::NotATree,
            E::Indeterminate => E::Indeterminate,
            E::ForeignDirectory { path } => E::ForeignDirectory { path },
            E::Locked { path } => E::Locked { path },
            E::Io { path, source } => E::Io { path, source },
        }
    }
}

/// The error type of a tree over store `S`.
pub type StoreTreeError<S> = PersistentTreeError<<S as super::KvStore>::Error>;

/// A stored value that does not decode: the key and what is wrong. The layout's decoders return
/// it; the engine turns it into [`PersistentTreeError::Corrupted`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    /// The key whose value is bad.
    pub key: Vec<u8>,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Corrupt {
    /// A bad value at `key`.
    #[must_use]
    pub fn new(key: &[u8], reason: &'static str) -> Self {
        Self {
            key: key.to_vec(),
            reason,
        }
    }
}

impl<S: std::error::Error + 'static> From<Corrupt> for PersistentTreeError<S> {
    fn from(Corrupt { key, reason }: Corrupt) -> Self {
        Self::Corrupted { key, reason }
    }
}
