//! The operator's integrity check: every stored parent recomputed from its children.

use hasher::{Digest, DigestCodec};
use rustc_hash::{FxHashMap, FxHashSet};

use super::layout::{decode_chunk, parse_chunk_key, ChunkAddr, NODE_PREFIX};
use super::{Corrupt, KvStore, PersistentTree, StoreTreeError};
use crate::rehash::hash_level;
use crate::NodeAddr;

/// A stored node whose value disagrees with its children, found by
/// [`PersistentTree::verify_integrity`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityIssue<D> {
    /// The node.
    pub addr: NodeAddr,
    /// What the store holds there.
    pub stored: D,
    /// What its children hash to.
    pub computed: D,
}

impl<H: DigestCodec, S: KvStore> PersistentTree<H, S> {
    /// Recomputes every stored parent from its children (hashing in parallel, per the rehash
    /// configuration) and returns every mismatch; fails on undecodable or misplaced chunks. An
    /// operator's check after an incident: one pass over the stored chunks.
    ///
    /// # Errors
    /// Store errors and [`PersistentTreeError::Corrupted`](super::PersistentTreeError::Corrupted).
    pub fn verify_integrity(&self) -> Result<Vec<IntegrityIssue<Digest<H>>>, StoreTreeError<S>> {
        let mut raw: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.store.scan_raw(&[NODE_PREFIX], &mut |key, value| {
            raw.push((key.to_vec(), value.to_vec()));
        })?;
        let mut chunks: FxHashMap<ChunkAddr, Vec<Digest<H>>> = FxHashMap::default();
        for (key, value) in raw {
            let chunk = parse_chunk_key(&key)
                .ok_or_else(|| Corrupt::new(&key, "malformed node chunk key"))?;
            let shape = self.store.shape;
            let values = decode_chunk::<H>(shape, &key, &value)?;
            for (slot, value) in values.iter().enumerate() {
                let addr = shape.node(chunk, slot);
                if self.depth.check_addr(addr).is_err()
                    && *value != self.store.empty.at(shape.level(chunk, slot))
                {
                    return Err(Corrupt::new(&key, "node stored outside the tree").into());
                }
            }
            chunks.insert(chunk, values);
        }
        let node = |addr: NodeAddr| {
            let (chunk, slot) = self.store.shape.of(addr);
            chunks
                .get(&chunk)
                .map_or_else(|| self.store.empty.at(addr.level), |values| values[slot])
        };
        // Every stored parent, and the parent of every stored non-empty node, whether or not
        // that parent is stored: an absent parent above non-empty children (a dropped chunk, a
        // changed depth) is as wrong as a stored one with a bad value.
        let mut check: FxHashSet<NodeAddr> = FxHashSet::default();
        for (chunk, values) in &chunks {
            for (slot, &stored) in values.iter().enumerate() {
                let addr = self.store.shape.node(*chunk, slot);
                if self.depth.check_addr(addr).is_err() {
                    continue;
                }
                if addr.children().is_some() {
                    check.insert(addr);
                }
                if addr.level < self.depth.get() && stored != self.store.empty.at(addr.level) {
                    check.insert(addr.parent());
                }
            }
        }
        let mut parents: Vec<(NodeAddr, Digest<H>)> = Vec::with_capacity(check.len());
        let mut children: Vec<Digest<H>> = Vec::with_capacity(2 * check.len());
        for addr in check {
            if let Some((left, right)) = addr.children() {
                parents.push((addr, node(addr)));
                children.push(node(left));
                children.push(node(right));
            }
        }
        let mut computed = vec![Digest::<H>::default(); parents.len()];
        hash_level::<H>(&children, &mut computed, &self.config);
        let mut issues: Vec<_> = parents
            .into_iter()
            .zip(computed)
            .filter(|((_, stored), computed)| stored != computed)
            .map(|((addr, stored), computed)| IntegrityIssue {
                addr,
                stored,
                computed,
            })
            .collect();
        issues.sort_by_key(|issue| issue.addr);
        let top = NodeAddr::root(self.depth);
        if node(top) != self.root {
            issues.push(IntegrityIssue {
                addr: top,
                stored: node(top),
                computed: self.root,
            });
        }
        Ok(issues)
    }
}
