//! The rehash's view of a tree during one apply: writes go to per-level sorted buffers, reads
//! see those buffers first and the store's reader below. Nothing reaches the store until the
//! commit, so an apply can be computed under a shared lock and dropped at no cost.

use hasher::{Digest, Hasher};

use super::store::{LevelWrites, NodeRead};
use crate::rehash::NodeLevels;
use crate::{Depth, NodeAddr};

/// Per-level buffers of the nodes one apply writes, over the store's reader `R`.
pub(super) struct Overlay<H: Hasher, R> {
    reader: R,
    levels: LevelWrites<H>,
}

impl<H: Hasher, R: NodeRead<H>> Overlay<H, R> {
    /// An empty overlay over `reader`.
    pub(super) fn new(reader: R, depth: Depth) -> Self {
        Self {
            reader,
            levels: vec![(Vec::new(), Vec::new()); usize::from(depth.get()) + 1],
        }
    }

    /// Node `addr` as this apply sees it.
    pub(super) fn lookup(&self, addr: NodeAddr) -> Result<Digest<H>, R::Error> {
        if let Some((indices, values)) = self.levels.get(usize::from(addr.level)) {
            if let Ok(i) = indices.binary_search(&addr.index) {
                return Ok(values[i]);
            }
        }
        self.reader.node(addr)
    }

    /// The reader and the written levels.
    pub(super) fn into_parts(self) -> (R, LevelWrites<H>) {
        (self.reader, self.levels)
    }
}

impl<H: Hasher, R: NodeRead<H>> NodeLevels<H> for Overlay<H, R> {
    type Error = R::Error;

    /// Children in increasing order, so the level's buffer is walked forward once per call.
    fn read_children(
        &self,
        child_level: u8,
        parents: &[u64],
        out: &mut Vec<Digest<H>>,
    ) -> Result<(), Self::Error> {
        out.clear();
        out.reserve(parents.len() * 2);
        let (indices, values) = match self.levels.get(usize::from(child_level)) {
            Some((indices, values)) => (indices.as_slice(), values.as_slice()),
            None => (&[][..], &[][..]),
        };
        let mut at = 0;
        for &parent in parents {
            for index in [parent * 2, parent * 2 + 1] {
                if indices.get(at).is_some_and(|&i| i < index) {
                    // Usually the next buffered node; otherwise skip ahead by binary search.
                    at += if indices.get(at + 1).is_some_and(|&i| i >= index) {
                        1
                    } else {
                        indices[at..].partition_point(|&i| i < index)
                    };
                }
                match indices.get(at) {
                    Some(&i) if i == index => out.push(values[at]),
                    _ => out.push(self.reader.node(NodeAddr {
                        level: child_level,
                        index,
                    })?),
                }
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
