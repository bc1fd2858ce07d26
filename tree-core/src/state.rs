//! Bookkeeping the in-memory trees share: next_index, deleted slots, metadata, rehash settings.

use std::collections::BTreeSet;

use hasher::Hasher;

use crate::{Depth, PreparedBatch, RehashConfig};

/// Everything an in-memory tree tracks besides its nodes, updated from a validated batch in one
/// place. Deleted slots are a sparse set: memory grows with deletions, never with capacity.
#[derive(Clone, Debug)]
pub(crate) struct Bookkeeping {
    pub(crate) depth: Depth,
    pub(crate) next_index: u64,
    pub(crate) deleted: BTreeSet<u64>,
    pub(crate) metadata: Vec<u8>,
    pub(crate) config: RehashConfig,
}

impl Bookkeeping {
    pub(crate) fn new(depth: Depth, config: RehashConfig) -> Self {
        Self {
            depth,
            next_index: 0,
            deleted: BTreeSet::new(),
            metadata: Vec::new(),
            config,
        }
    }

    /// Records a batch whose nodes were just applied.
    pub(crate) fn record<H: Hasher>(&mut self, batch: &PreparedBatch<H>) {
        for &(index, leaf) in batch.writes() {
            if leaf.is_some() {
                self.deleted.remove(&index);
            } else {
                self.deleted.insert(index);
            }
        }
        self.next_index = batch.next_index();
        if let Some(metadata) = batch.metadata() {
            self.metadata = metadata.to_vec();
        }
    }
}
