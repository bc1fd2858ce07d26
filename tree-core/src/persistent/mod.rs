//! The persistent tree engine: tree-core's semantics over any key-value store with atomic
//! batches. sled (`tree-sled`) and redb (`tree-redb`) are stores beneath this one engine; the
//! rules (validation, rehash, undo frames, checkpoints, rewind, root window, `proof_at`, the
//! commit protocol) are written here once.
//!
//! ```text
//!  MerkleTree::apply(UpdateBatch)             (validate once, rehash once: crate::rehash)
//!        │
//!  PersistentTree ── Overlay of changed nodes ──► one StoreBatch ──► one engine commit
//!        │                                        (nodes + counters + deleted + metadata
//!        │                                         + undo records + checkpoint record)
//!  KvStore: SledStore | RedbStore | MemStore | test fakes        (bytes per `layout`)
//! ```
//!
//! One module per concern: [`layout`] (every key and value encoding), [`kv`] (the store trait),
//! `open` (header checks and loading), `chunks` (node reads and the top-level cache), `overlay`
//! (the rehash's view during an apply), `commit` (prepare/publish and the commit counter),
//! `history` (checkpoints and rewind), `integrity`, [`SharedTree`], and `lock` (the directory
//! lock every on-disk engine takes).
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::persistent::{MemStore, PersistentTree};
//! use tree_core::{Depth, History, MerkleTree, MerkleTreeExt, RehashConfig, UpdateBatch};
//!
//! let store = MemStore::new();
//! let depth = Depth::new(20)?;
//! let mut tree = PersistentTree::<PoseidonHasher, _>::open_store(
//!     store.clone(), depth, RehashConfig::default(), 8,
//! )?;
//! let mut block = UpdateBatch::new();
//! block.set_range(0, (1..=4u64).map(Fr::from)).delete(2);
//! tree.apply_checkpointed(block, 17)?; // the members and the checkpoint: one commit
//! let reopened = PersistentTree::<PoseidonHasher, _>::open_store(store, depth, RehashConfig::default(), 8)?;
//! assert_eq!((reopened.root(), reopened.checkpoints()?.len()), (tree.root(), 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod chunks;
mod commit;
mod config;
mod error;
mod history;
mod integrity;
pub mod kv;
pub mod layout;
mod lock;
mod open;
mod overlay;
mod shared;

use hasher::{Digest, DigestCodec};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::history::CheckpointList;
use crate::{Depth, EmptyRoots, HistoryConfig, RehashConfig, UpdateBatch};

pub use commit::PreparedApply;
pub use config::Durability;
pub use error::{Corrupt, PersistentTreeError, StoreTreeError};
pub use integrity::IntegrityIssue;
pub use kv::{KvStore, MemStore, OpenStore, StoreBatch};
pub use lock::{DirLock, LOCK_FILE};
pub use shared::SharedTree;

use layout::ChunkAddr;

/// A persistent Merkle tree over store `S`. Same semantics, roots and proofs as the in-memory
/// trees.
///
/// `apply` is atomic: the nodes it changes, `next_index`, deleted slots and metadata are one
/// store batch, all or nothing, crash or not. It is durable at once with
/// [`Durability::EveryCommit`], otherwise after [`flush`](Self::flush) or the engine's next
/// periodic flush. Opening reads the header, counters and root only, whatever the number of
/// leaves.
pub struct PersistentTree<H: DigestCodec, S: KvStore> {
    store: S,
    depth: Depth,
    empty: EmptyRoots<H>,
    root: Digest<H>,
    next_index: u64,
    metadata: Vec<u8>,
    config: RehashConfig,
    /// Chunks at levels `>= cache_from` (the top of the tree), filled on read and on commit.
    cache: Mutex<FxHashMap<ChunkAddr, Vec<Digest<H>>>>,
    cache_from: u8,
    /// Retention settings (persisted under `Mhistory`).
    history: HistoryConfig,
    /// The retained checkpoints (their records are in the store; this mirrors them).
    checkpoints: CheckpointList<Digest<H>>,
    /// Bumped by every commit and reload: what `publish` checks a prepared batch against.
    generation: u64,
    /// Set when a failed commit may have reached the store: the store's view and the tree's
    /// disagree and only a reopen tells which is durable, so every store access is refused.
    indeterminate: bool,
    /// The stored commit counter (`M commits`).
    commits: u64,
}

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
    /// The store, unless a failed commit left its state indeterminate.
    fn live(&self) -> Result<&S, StoreTreeError<S>> {
        if self.indeterminate {
            return Err(PersistentTreeError::Indeterminate);
        }
        Ok(&self.store)
    }

    /// Makes every applied batch durable.
    ///
    /// # Errors
    /// The store's flush error.
    pub fn flush(&self) -> Result<(), StoreTreeError<S>> {
        self.live()?.flush().map_err(PersistentTreeError::Store)
    }

    /// Flushes; the tree stays usable (dropping it also flushes, best-effort).
    ///
    /// # Errors
    /// The store's flush error.
    pub fn close(&mut self) -> Result<(), StoreTreeError<S>> {
        self.flush()
    }

    /// The underlying store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// How many commits the store holds (the `M commits` counter, written in the same batch as
    /// each commit): one per apply, checkpoint or rewind, so a caller that commits one batch per
    /// unit of work (a chain block) can prove no unit was committed twice, crash or not.
    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Applies `batch` and sets the metadata in the same atomic write (e.g. the block number
    /// whose members the batch registers).
    ///
    /// # Errors
    /// As [`MerkleTree::apply`](crate::MerkleTree::apply).
    pub fn apply_with_metadata(
        &mut self,
        mut batch: UpdateBatch<H>,
        metadata: Vec<u8>,
    ) -> Result<(), StoreTreeError<S>> {
        batch.metadata(metadata);
        crate::MerkleTree::apply(self, batch)
    }
}

impl<H: DigestCodec, S: KvStore> Drop for PersistentTree<H, S> {
    fn drop(&mut self) {
        // Best effort by design: a drop cannot report failure. Callers who need to know use
        // `flush`/`close`.
        let _ = self.store.flush();
    }
}

impl<H: DigestCodec, S: KvStore> core::fmt::Debug for PersistentTree<H, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PersistentTree")
            .field("depth", &self.depth)
            .field("next_index", &self.next_index)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}
