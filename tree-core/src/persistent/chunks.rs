//! Reading nodes: one chunk per store entry, the top levels cached in memory.

use hasher::{Digest, DigestCodec};

use super::layout::{chunk_key, decode_chunk, decode_chunk_slot, ChunkAddr, CHUNK_NODES};
use super::{KvStore, KvTreeStore, StoreTreeError};
use crate::NodeAddr;

impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// The chunk's nodes as stored (the level's empty value where nothing is), through the
    /// top-level cache.
    pub(super) fn chunk_values(
        &self,
        chunk: ChunkAddr,
    ) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        let cached = chunk.level >= self.cache_from;
        if cached {
            if let Some(values) = self.cache.lock().get(&chunk) {
                return Ok(values.clone());
            }
        }
        let key = chunk_key(chunk);
        let values = match self.get(&key)? {
            None => vec![self.empty.at(chunk.level); CHUNK_NODES],
            Some(bytes) => decode_chunk::<H>(&key, &bytes)?,
        };
        if cached {
            self.cache.lock().insert(chunk, values.clone());
        }
        Ok(values)
    }

    /// Reads a node (empty-subtree value where none is stored). Below the cached levels only
    /// the node's own slot is decoded.
    pub(super) fn read_node(&self, addr: NodeAddr) -> Result<Digest<H>, StoreTreeError<S>> {
        let (chunk, slot) = ChunkAddr::of(addr);
        if chunk.level >= self.cache_from {
            if let Some(values) = self.cache.lock().get(&chunk) {
                return Ok(values[slot]);
            }
            return Ok(self.chunk_values(chunk)?[slot]);
        }
        let key = chunk_key(chunk);
        match self.get(&key)? {
            None => Ok(self.empty.at(addr.level)),
            Some(bytes) => Ok(decode_chunk_slot::<H>(&key, &bytes, slot)?),
        }
    }
}
