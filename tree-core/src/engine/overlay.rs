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
        let Some((stored_indices, stored_values)) = self.levels.get_mut(usize::from(level)) else {
            return Ok(());
        };
        // One rehash writes a level in increasing order; a later rehash over the same overlay
        // (the steps of `prepare_steps`) may rewrite nodes, so the buffers are merged, the
        // newer value winning.
        if stored_indices
            .last()
            .is_none_or(|&last| indices.first().is_none_or(|&i| i > last))
        {
            stored_indices.extend_from_slice(indices);
            stored_values.extend_from_slice(values);
            return Ok(());
        }
        let old_indices = std::mem::take(stored_indices);
        let old_values = std::mem::take(stored_values);
        stored_indices.reserve(old_indices.len() + indices.len());
        stored_values.reserve(old_values.len() + values.len());
        let (mut a, mut b) = (0, 0);
        while a < old_indices.len() || b < indices.len() {
            let take_new = match (old_indices.get(a), indices.get(b)) {
                (Some(&old), Some(&new)) => new <= old,
                (None, Some(_)) => true,
                _ => false,
            };
            if take_new {
                if old_indices.get(a) == Some(&indices[b]) {
                    a += 1;
                }
                stored_indices.push(indices[b]);
                stored_values.push(values[b]);
                b += 1;
            } else {
                stored_indices.push(old_indices[a]);
                stored_values.push(old_values[a]);
                a += 1;
            }
        }
        Ok(())
    }
}
