//! Reading nodes: one chunk per store entry, the top of the tree cached in memory.

use hasher::{Digest, DigestCodec};
use rustc_hash::{FxHashMap, FxHashSet};

use super::layout::{
    chunk_key, decode_chunk, decode_chunk_slot, parse_chunk_key, ChunkAddr, NODE_PREFIX,
};
use super::{Corrupt, KvStore, KvTreeStore, StoreTreeError};
use crate::{Depth, NodeAddr};

/// The cached top of the tree, whole bands at a time: a band is loaded by one range scan on its
/// first read (so a cold start costs one scan per band, not one read per chunk, and a proof then
/// reads only the bands below), and commits keep loaded bands current.
pub(super) struct BandCache<D> {
    /// Every stored chunk of the loaded bands (absent: all empty).
    chunks: FxHashMap<ChunkAddr, Vec<D>>,
    /// The loaded bands, by bottom level.
    bands: FxHashSet<u8>,
}

impl<D> Default for BandCache<D> {
    fn default() -> Self {
        Self {
            chunks: FxHashMap::default(),
            bands: FxHashSet::default(),
        }
    }
}

impl<D: Clone> BandCache<D> {
    /// The chunk's values if its band is loaded: `Some(None)` for a chunk not stored.
    fn lookup(&self, chunk: ChunkAddr) -> Option<Option<&Vec<D>>> {
        self.bands
            .contains(&chunk.level)
            .then(|| self.chunks.get(&chunk))
    }

    /// A committed chunk: kept if its band is loaded (an unloaded band reads the store later).
    pub(super) fn committed(&mut self, chunk: ChunkAddr, values: Vec<D>) {
        if self.bands.contains(&chunk.level) {
            self.chunks.insert(chunk, values);
        }
    }

    /// Band `band`, read whole: every stored chunk of it.
    fn load(&mut self, band: u8, chunks: FxHashMap<ChunkAddr, Vec<D>>) {
        self.chunks.extend(chunks);
        self.bands.insert(band);
    }

    /// Drops the bands below `level`.
    pub(super) fn keep_from(&mut self, level: u8) {
        self.chunks.retain(|chunk, _| chunk.level >= level);
        self.bands.retain(|&band| band >= level);
    }

    /// Drops everything (the store changed underneath: a rewind).
    pub(super) fn clear(&mut self) {
        self.chunks.clear();
        self.bands.clear();
    }
}

impl<H: DigestCodec, S: KvStore> KvTreeStore<H, S> {
    /// Chunk `chunk` with nothing stored: each slot its level's empty value.
    pub(super) fn empty_chunk(&self, chunk: ChunkAddr) -> Vec<Digest<H>> {
        self.shape.empty_chunk(chunk, |level| self.empty.at(level))
    }

    /// The chunk's nodes as stored (each level's empty value where nothing is), from the cache
    /// for the cached bands.
    pub(super) fn chunk_values(
        &self,
        chunk: ChunkAddr,
    ) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        if chunk.level >= self.cache_from {
            return self.with_cached(chunk, |found| {
                found.map_or_else(|| self.empty_chunk(chunk), Clone::clone)
            });
        }
        let key = chunk_key(chunk);
        match self.get(&key)? {
            None => Ok(self.empty_chunk(chunk)),
            Some(bytes) => Ok(decode_chunk::<H>(self.shape, &key, &bytes)?),
        }
    }

    /// `read(values)` of a chunk of a cached band (`None`: not stored), loading the band first
    /// if it is not: one range scan for the whole band.
    fn with_cached<T>(
        &self,
        chunk: ChunkAddr,
        read: impl Fn(Option<&Vec<Digest<H>>>) -> T,
    ) -> Result<T, StoreTreeError<S>> {
        if let Some(found) = self.cache.lock().lookup(chunk) {
            return Ok(read(found));
        }
        let mut loaded = FxHashMap::default();
        self.scan(
            &[NODE_PREFIX, chunk.level],
            |key, value| {
                let at = parse_chunk_key(key)
                    .ok_or_else(|| Corrupt::new(key, "malformed node chunk key"))?;
                Ok((at, decode_chunk::<H>(self.shape, key, value)?))
            },
            |(at, values)| {
                loaded.insert(at, values);
            },
        )?;
        let mut cache = self.cache.lock();
        cache.load(chunk.level, loaded);
        Ok(read(cache.chunks.get(&chunk)))
    }

    /// Reads a node (empty-subtree value where none is stored). Below the cached bands only
    /// the node's own slot is decoded.
    pub(super) fn read_node(&self, addr: NodeAddr) -> Result<Digest<H>, StoreTreeError<S>> {
        self.node_via(addr, &mut None)
    }

    /// The siblings on leaf `index`'s path: each uncached chunk read once and only the slots
    /// the path needs decoded, cached bands read in place.
    pub(super) fn path_siblings(
        &self,
        depth: Depth,
        index: u64,
    ) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        let mut siblings = Vec::with_capacity(usize::from(depth.get()));
        let mut fetched = None;
        for addr in NodeAddr::proof_path(depth, index) {
            siblings.push(self.node_via(addr, &mut fetched)?);
        }
        Ok(siblings)
    }

    /// Node `addr`: from the cache in a cached band; otherwise from its chunk's stored bytes,
    /// read from the store unless `fetched` already holds that chunk's (consecutive levels of
    /// a path share a chunk), with only the node's slot decoded.
    fn node_via(
        &self,
        addr: NodeAddr,
        fetched: &mut Option<(ChunkAddr, Option<Vec<u8>>)>,
    ) -> Result<Digest<H>, StoreTreeError<S>> {
        let (chunk, slot) = self.shape.of(addr);
        if chunk.level >= self.cache_from {
            return self.with_cached(chunk, |found| {
                found.map_or_else(|| self.empty.at(addr.level), |values| values[slot])
            });
        }
        if fetched.as_ref().map(|(at, _)| *at) != Some(chunk) {
            *fetched = Some((chunk, self.get(&chunk_key(chunk))?));
        }
        match fetched.as_ref().and_then(|(_, bytes)| bytes.as_deref()) {
            None => Ok(self.empty.at(addr.level)),
            Some(bytes) => Ok(decode_chunk_slot::<H>(
                self.shape,
                &chunk_key(chunk),
                bytes,
                slot,
            )?),
        }
    }
}
