//! One apply's reads of a key-value tree store: each chunk is decoded once per apply.

use std::cell::RefCell;

use hasher::{Digest, DigestCodec};
use rustc_hash::FxHashMap;

use super::layout::{chunk_key, decode_chunk, ChunkAddr};
use super::{KvStore, KvTreeStore, StoreTreeError};
use crate::engine::NodeRead;
use crate::NodeAddr;

/// The chunks one apply has read, each decoded once; staging the change merges its nodes into
/// the same chunks.
pub struct KvReader<'a, H: DigestCodec, S: KvStore> {
    store: &'a KvTreeStore<H, S>,
    loaded: RefCell<FxHashMap<ChunkAddr, Vec<Digest<H>>>>,
}

impl<'a, H: DigestCodec, S: KvStore> KvReader<'a, H, S> {
    /// A reader with nothing loaded yet.
    pub(super) fn new(store: &'a KvTreeStore<H, S>) -> Self {
        Self {
            store,
            loaded: RefCell::new(FxHashMap::default()),
        }
    }

    /// Loads the stored chunks among `chunks` that are neither loaded nor in a cached band,
    /// with one read of the store ([`KvStore::get_many`]).
    pub(super) fn prefetch(&self, chunks: &[ChunkAddr]) -> Result<(), StoreTreeError<S>> {
        let mut wanted: Vec<ChunkAddr> = {
            let loaded = self.loaded.borrow();
            chunks
                .iter()
                .copied()
                .filter(|c| c.level < self.store.cache_from && !loaded.contains_key(c))
                .collect()
        };
        wanted.sort_unstable();
        wanted.dedup();
        let keys: Vec<Vec<u8>> = wanted.iter().map(|&c| chunk_key(c).to_vec()).collect();
        let values = self.store.get_many(&keys)?;
        let mut loaded = self.loaded.borrow_mut();
        for ((chunk, key), bytes) in wanted.into_iter().zip(&keys).zip(values) {
            let decoded = match bytes {
                None => self.store.empty_chunk(chunk),
                Some(bytes) => decode_chunk::<H>(self.store.shape, key, &bytes)?,
            };
            loaded.insert(chunk, decoded);
        }
        Ok(())
    }

    /// The chunk as it was before this apply.
    pub(super) fn stored_chunk(
        &self,
        chunk: ChunkAddr,
    ) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        if let Some(values) = self.loaded.borrow().get(&chunk) {
            return Ok(values.clone());
        }
        let values = self.store.chunk_values(chunk)?;
        self.loaded.borrow_mut().insert(chunk, values.clone());
        Ok(values)
    }
}

impl<H: DigestCodec, S: KvStore> NodeRead<H> for KvReader<'_, H, S> {
    type Error = StoreTreeError<S>;

    fn node(&self, addr: NodeAddr) -> Result<Digest<H>, StoreTreeError<S>> {
        let (chunk, slot) = self.store.shape.of(addr);
        if let Some(value) = self.loaded.borrow().get(&chunk).map(|values| values[slot]) {
            return Ok(value);
        }
        Ok(self.stored_chunk(chunk)?[slot])
    }
}
