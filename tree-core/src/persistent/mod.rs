//! The persistent store: the [engine](crate::engine)'s [`TreeStore`](crate::engine::TreeStore) over any key-value store
//! with atomic batches. sled (`tree-sled`) and redb (`tree-redb`) are byte stores beneath this
//! one tree store; the rules (validation, rehash, checkpoints, rewind, root window, `proof_at`,
//! prepare/publish) are the engine's, the same as the in-memory trees'.
//!
//! ```text
//!  Tree (crate::engine) ── Change ──► KvTreeStore::stage ──► one StoreBatch ──► one commit
//!                                     (chunks + deleted + counters + metadata
//!                                      + undo records + checkpoint record + commit counter)
//!  KvStore: SledStore | RedbStore | MemStore | test fakes        (bytes per `layout`)
//! ```
//!
//! One module per concern: [`layout`] (every key and value encoding), [`kv`] (the byte store
//! trait), `open` (header checks and loading), `chunks` (node reads and the top-level cache),
//! `reader` (one apply's chunk reads), `commit` (staging a change and the commit counter),
//! `history` (undo records and rewind), `integrity`, [`SharedTree`], and `lock` (the directory
//! lock every on-disk engine takes).
//!
//! ```
//! use hasher::{Fr, PoseidonHasher};
//! use tree_core::persistent::{MemStore, NodeCache, PersistentTree};
//! use tree_core::{Depth, History, MerkleTree, MerkleTreeExt, RehashConfig, UpdateBatch};
//!
//! let store = MemStore::new();
//! let depth = Depth::new(20)?;
//! let mut tree = PersistentTree::<PoseidonHasher, _>::open_store(
//!     store.clone(), depth, RehashConfig::default(), NodeCache::default(),
//! )?;
//! let mut block = UpdateBatch::new();
//! block.set_range(0, (1..=4u64).map(Fr::from)).delete(2);
//! tree.apply_checkpointed(block, 17)?; // the members and the checkpoint: one commit
//! let reopened = PersistentTree::<PoseidonHasher, _>::open_store(
//!     store, depth, RehashConfig::default(), NodeCache::default(),
//! )?;
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
mod reader;
mod shared;

use hasher::{Digest, DigestCodec};
use parking_lot::Mutex;

use crate::engine::Tree;
use crate::{Depth, EmptyRoots};

pub use commit::KvStaged;
pub use config::{Durability, NodeCache};
pub use error::{Corrupt, PersistentTreeError, StoreTreeError};
pub use integrity::IntegrityIssue;
pub use kv::{KvStore, MemStore, OpenStore, StoreBatch};
pub use lock::{DirLock, LOCK_FILE};
pub use reader::KvReader;
pub use shared::SharedTree;

use chunks::BandCache;
use layout::ChunkShape;

/// A persistent Merkle tree over byte store `S`: the engine over a [`KvTreeStore`]. Same
/// semantics, roots and proofs as the in-memory trees.
///
/// `apply` is atomic: the nodes it changes, `next_index`, deleted slots and metadata are one
/// store batch, all or nothing, crash or not. It is durable at once with
/// [`Durability::EveryCommit`], otherwise after [`flush`](Tree::flush) or the engine's next
/// periodic flush. Opening reads the header, counters and root only, whatever the number of
/// leaves.
pub type PersistentTree<H, S> = Tree<H, KvTreeStore<H, S>>;

/// The tree's store over a key-value store `S`: nodes in chunks (the top levels cached), the
/// deleted slots, counters, undo records and checkpoint records as [`layout`] encodes them, and
/// the commit counter.
pub struct KvTreeStore<H: DigestCodec, S: KvStore> {
    store: S,
    depth: Depth,
    empty: EmptyRoots<H>,
    /// How nodes are grouped into store entries (the format version's).
    shape: ChunkShape,
    /// Which chunks the cache holds.
    node_cache: NodeCache,
    /// Chunks of bands at levels `>= cache_from` (the top of the tree), filled on read and on
    /// commit; `cache_from` follows the tree's size ([`NodeCache`]).
    cache: Mutex<BandCache<Digest<H>>>,
    cache_from: u8,
    /// Set when a failed commit may have reached the store: the store's view and the tree's
    /// disagree and only a reopen tells which is durable, so every store access is refused.
    indeterminate: bool,
    /// The stored commit counter (`M commits`).
    commits: u64,
}

impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// The lowest cached band level for a tree of `next_index` leaves: the top levels
    /// [`NodeCache::top_levels`] names, and the bands that fit [`NodeCache::band_chunks`].
    fn cache_from_for(&self, next_index: u64) -> u8 {
        let top = match self.node_cache.top_levels {
            0 => u8::MAX,
            levels => self.depth.get().saturating_sub(levels - 1),
        };
        top.min(
            self.shape
                .lowest_band_within(next_index, self.node_cache.band_chunks),
        )
    }

    /// Moves the cached bands to those for a tree of `next_index` leaves, dropping chunks below.
    fn follow_size(&mut self, next_index: u64) {
        let from = self.cache_from_for(next_index);
        if from > self.cache_from {
            self.cache.get_mut().keep_from(from);
        }
        self.cache_from = from;
    }

    /// The store, unless a failed commit left its state indeterminate.
    fn live(&self) -> Result<&S, StoreTreeError<S>> {
        if self.indeterminate {
            return Err(PersistentTreeError::Indeterminate);
        }
        Ok(&self.store)
    }

    /// The bytes at `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreTreeError<S>> {
        self.live()?.get(key).map_err(PersistentTreeError::Store)
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreTreeError<S>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.live()?
            .get_many(keys)
            .map_err(PersistentTreeError::Store)
    }

    /// Every entry under `prefix`, in key order, as stored.
    fn scan_raw(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), StoreTreeError<S>> {
        self.live()?
            .scan_prefix(prefix, visit)
            .map_err(PersistentTreeError::Store)
    }

    /// Every entry under `prefix`, in key order, decoded by `decode` into `visit`; the first
    /// entry that does not decode is the error (reported after the scan, which cannot stop).
    fn scan<T>(
        &self,
        prefix: &[u8],
        mut decode: impl FnMut(&[u8], &[u8]) -> Result<T, Corrupt>,
        mut visit: impl FnMut(T),
    ) -> Result<(), StoreTreeError<S>> {
        let mut bad = None;
        self.scan_raw(prefix, &mut |key, value| match decode(key, value) {
            Ok(item) => visit(item),
            Err(corrupt) => {
                bad.get_or_insert(corrupt);
            }
        })?;
        bad.map_or(Ok(()), |corrupt| Err(corrupt.into()))
    }
}

impl<H: DigestCodec, S: KvStore> Drop for KvTreeStore<H, S> {
    fn drop(&mut self) {
        // Best effort by design: a drop cannot report failure. Callers who need to know use
        // `flush`/`close`.
        let _ = self.store.flush();
    }
}

impl<H: DigestCodec, S: KvStore> Tree<H, KvTreeStore<H, S>> {
    /// Makes every applied batch durable.
    ///
    /// # Errors
    /// The store's flush error.
    pub fn flush(&self) -> Result<(), StoreTreeError<S>> {
        self.store
            .live()?
            .flush()
            .map_err(PersistentTreeError::Store)
    }

    /// Flushes; the tree stays usable (dropping it also flushes, best-effort).
    ///
    /// # Errors
    /// The store's flush error.
    pub fn close(&mut self) -> Result<(), StoreTreeError<S>> {
        self.flush()
    }

    /// The underlying byte store.
    pub fn store(&self) -> &S {
        &self.store.store
    }

    /// How many commits the store holds (the `M commits` counter, written in the same batch as
    /// each commit): one per apply, checkpoint or rewind, so a caller that commits one batch per
    /// unit of work (a chain block) can prove no unit was committed twice, crash or not.
    pub fn commits(&self) -> u64 {
        self.store.commits
    }
}
