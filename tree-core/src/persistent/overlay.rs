//! The rehash engine's view of a persistent tree during one apply.

use std::cell::RefCell;

use hasher::{Digest, DigestCodec};
use rustc_hash::FxHashMap;

use super::layout::ChunkAddr;
use super::{KvStore, PersistentTree, StoreTreeError};
use crate::rehash::NodeLevels;
use crate::NodeAddr;

/// The rehash engine's view during one apply: writes go to per-level sorted buffers, reads see
/// those buffers first and the stored chunks below (each loaded once per apply). Nothing reaches
/// the store until the commit.
pub(super) struct Overlay<'a, H: DigestCodec, S: KvStore> {
    pub(super) tree: &'a PersistentTree<H, S>,
    pub(super) levels: Vec<(Vec<u64>, Vec<Digest<H>>)>,
    pub(super) loaded: RefCell<FxHashMap<ChunkAddr, Vec<Digest<H>>>>,
}

impl<H: DigestCodec, S: KvStore> Overlay<'_, H, S> {
    /// The chunk as it was before this apply.
    pub(super) fn stored_chunk(
        &self,
        chunk: ChunkAddr,
    ) -> Result<Vec<Digest<H>>, StoreTreeError<S>> {
        if let Some(values) = self.loaded.borrow().get(&chunk) {
            return Ok(values.clone());
        }
        let values = self.tree.chunk_values(chunk)?;
        self.loaded.borrow_mut().insert(chunk, values.clone());
        Ok(values)
    }

    pub(super) fn lookup(&self, addr: NodeAddr) -> Result<Digest<H>, StoreTreeError<S>> {
        if let Some((indices, values)) = self.levels.get(usize::from(addr.level)) {
            if let Ok(i) = indices.binary_search(&addr.index) {
                return Ok(values[i]);
            }
        }
        let (chunk, slot) = ChunkAddr::of(addr);
        if let Some(value) = self.loaded.borrow().get(&chunk).map(|values| values[slot]) {
            return Ok(value);
        }
        Ok(self.stored_chunk(chunk)?[slot])
    }
}

impl<H: DigestCodec, S: KvStore> NodeLevels<H> for Overlay<'_, H, S> {
    type Error = StoreTreeError<S>;

    fn read_children(
        &self,
        child_level: u8,
        parents: &[u64],
        out: &mut Vec<Digest<H>>,
    ) -> Result<(), Self::Error> {
        out.clear();
        for &parent in parents {
            for index in [parent * 2, parent * 2 + 1] {
                out.push(self.lookup(NodeAddr {
                    level: child_level,
                    index,
                })?);
            }
        }
        Ok(())
    }

    fn write_level(
        &mut self,
        level: u8,
        indices: &[u64],
        values: &[Digest<H>],
    ) -> Result<(), Self::Error> {
        if let Some((stored_indices, stored_values)) = self.levels.get_mut(usize::from(level)) {
            stored_indices.extend_from_slice(indices);
            stored_values.extend_from_slice(values);
        }
        Ok(())
    }
}

impl<'a, H: DigestCodec, S: KvStore> Overlay<'a, H, S> {
    /// An empty overlay over `tree`.
    pub(super) fn new(tree: &'a PersistentTree<H, S>) -> Self {
        Self {
            tree,
            levels: vec![(Vec::new(), Vec::new()); usize::from(tree.depth.get()) + 1],
            loaded: RefCell::new(FxHashMap::default()),
        }
    }
}
