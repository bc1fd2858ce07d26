//! Applying a batch in two steps: `prepare` computes the whole commit (every hash, the deleted
//! flags, counters, undo records, a checkpoint and its pruning) reading only; `publish` hands it
//! to the store as one commit and updates the tree's view.

use hasher::{Digest, Hasher};

use super::overlay::Overlay;
use super::store::{Change, LevelWrites, TreeStore};
use super::Tree;
use crate::history::CheckpointList;
use crate::rehash::apply_writes;
use crate::{CheckpointInfo, NodeAddr, PreparedBatch, TreeError, UpdateBatch};

/// A batch computed by [`Tree::prepare`], ready to [`publish`](Tree::publish).
pub struct PreparedApply<H: Hasher, S: TreeStore<H>> {
    staged: S::Staged,
    root: Digest<H>,
    next_index: u64,
    metadata: Option<Vec<u8>>,
    checkpoints: Option<CheckpointList<Digest<H>>>,
    generation: u64,
    step_roots: Vec<Digest<H>>,
}

impl<H: Hasher, S: TreeStore<H>> PreparedApply<H, S> {
    /// The root the tree will have once this batch is published.
    pub fn root(&self) -> &Digest<H> {
        &self.root
    }

    /// The root after each step of [`Tree::prepare_checkpointed_steps`] (empty otherwise).
    pub fn step_roots(&self) -> &[Digest<H>] {
        &self.step_roots
    }
}

impl<H: Hasher, S: TreeStore<H>> Tree<H, S> {
    /// Validates `batch` and computes everything its commit writes — every hash, the store's
    /// staged change with its undo records, the new root — reading the tree but changing
    /// nothing. [`publish`](Self::publish) then commits it. `apply` is the two in a row; a
    /// service calls `prepare` under a shared lock, so readers keep going while a large batch
    /// hashes.
    ///
    /// # Errors
    /// As [`MerkleTree::apply`](crate::MerkleTree::apply).
    pub fn prepare(&self, batch: UpdateBatch<H>) -> Result<PreparedApply<H, S>, S::Error> {
        self.prepare_inner(batch, None)
    }

    /// [`prepare`](Self::prepare), with checkpoint `id` recorded after the batch in the *same*
    /// commit: the block and its checkpoint land together or not at all.
    ///
    /// # Errors
    /// As `prepare`, and [`TreeError::CheckpointNotIncreasing`].
    pub fn prepare_checkpointed(
        &self,
        batch: UpdateBatch<H>,
        id: u64,
    ) -> Result<PreparedApply<H, S>, S::Error> {
        self.checkpoints.check_new(id)?;
        self.prepare_inner(batch, Some(id))
    }

    /// [`prepare_checkpointed`](Self::prepare_checkpointed) of `steps` applied one after the
    /// other, also recording the root after each step
    /// ([`step_roots`](PreparedApply::step_roots)). A chain follower compares every root a
    /// contract stored within a block (one per call) while the block still lands as one commit.
    /// The steps share one overlay, so a node rewritten by a later step is hashed again but
    /// stored once.
    ///
    /// # Errors
    /// As `prepare_checkpointed`; a step is validated where the steps before it left the tree.
    pub fn prepare_checkpointed_steps(
        &self,
        mut steps: Vec<UpdateBatch<H>>,
        id: u64,
    ) -> Result<PreparedApply<H, S>, S::Error> {
        self.checkpoints.check_new(id)?;
        if steps.len() == 1 {
            // One step is the whole batch: validated and hashed once, as `prepare_checkpointed`.
            if let Some(batch) = steps.pop() {
                let mut prepared = self.prepare_inner(batch, Some(id))?;
                prepared.step_roots = vec![prepared.root];
                return Ok(prepared);
            }
        }
        let root_addr = NodeAddr::root(self.depth);
        let mut overlay = Overlay::new(self.store.reader(), self.depth);
        let mut next_index = self.next_index;
        let mut roots = Vec::with_capacity(steps.len());
        let mut whole = UpdateBatch::new();
        for step in steps {
            let prepared = step.clone().validate(self.depth, next_index)?;
            apply_writes::<H, _>(&mut overlay, self.depth, prepared.writes(), &self.config)?;
            roots.push(overlay.lookup(root_addr)?);
            next_index = prepared.next_index();
            whole.append(step);
        }
        let prepared = whole.validate(self.depth, self.next_index)?;
        let root = overlay.lookup(root_addr)?;
        let (reader, nodes) = overlay.into_parts();
        let mut staged = self.stage_apply(&prepared, reader, nodes, root, Some(id))?;
        staged.step_roots = roots;
        Ok(staged)
    }

    /// Applies `batch` and records checkpoint `id` after it, in one commit.
    ///
    /// # Errors
    /// As [`prepare_checkpointed`](Self::prepare_checkpointed) and [`publish`](Self::publish).
    pub fn apply_checkpointed(&mut self, batch: UpdateBatch<H>, id: u64) -> Result<(), S::Error> {
        self.checkpoints.check_new(id)?;
        self.apply_inner(batch, Some(id))
    }

    /// `apply`: nodes written in place where the store offers it
    /// ([`TreeStore::write_in_place`]), otherwise `prepare` and `publish`; the rest of the
    /// commit is the same [`Change`] either way.
    pub(super) fn apply_inner(
        &mut self,
        batch: UpdateBatch<H>,
        checkpoint: Option<u64>,
    ) -> Result<(), S::Error> {
        let prepared = batch.validate(self.depth, self.next_index)?;
        let in_place = match self.store.write_in_place(self.open_frame()) {
            Some(mut nodes) => {
                apply_writes::<H, _>(&mut *nodes, self.depth, prepared.writes(), &self.config)?;
                true
            }
            None => false,
        };
        let staged = if in_place {
            let root = self.store.node(NodeAddr::root(self.depth))?;
            self.stage_apply(&prepared, self.store.reader(), Vec::new(), root, checkpoint)?
        } else {
            self.prepare_validated(&prepared, checkpoint)?
        };
        self.publish(staged)
    }

    fn prepare_inner(
        &self,
        batch: UpdateBatch<H>,
        checkpoint: Option<u64>,
    ) -> Result<PreparedApply<H, S>, S::Error> {
        let prepared = batch.validate(self.depth, self.next_index)?;
        self.prepare_validated(&prepared, checkpoint)
    }

    /// Hashes through an overlay of the written nodes, reading only, and stages the result.
    fn prepare_validated(
        &self,
        prepared: &PreparedBatch<H>,
        checkpoint: Option<u64>,
    ) -> Result<PreparedApply<H, S>, S::Error> {
        let mut overlay = Overlay::new(self.store.reader(), self.depth);
        apply_writes::<H, _>(&mut overlay, self.depth, prepared.writes(), &self.config)?;
        let root = overlay.lookup(NodeAddr::root(self.depth))?;
        let (reader, nodes) = overlay.into_parts();
        self.stage_apply(prepared, reader, nodes, root, checkpoint)
    }

    /// The apply's [`Change`] — `nodes`, the deleted flags, counters, metadata, records, the open
    /// frame, and checkpoint `checkpoint` with its pruning — staged by the store.
    fn stage_apply(
        &self,
        prepared: &PreparedBatch<H>,
        reader: S::Reader<'_>,
        nodes: LevelWrites<H>,
        root: Digest<H>,
        checkpoint: Option<u64>,
    ) -> Result<PreparedApply<H, S>, S::Error> {
        // Indices at or past the old next_index were never deleted.
        let deleted = prepared
            .writes()
            .iter()
            .filter_map(|&(index, leaf)| match leaf {
                None => Some((index, true)),
                Some(_) if index < self.next_index => Some((index, false)),
                Some(_) => None,
            })
            .collect();
        let next_index = prepared.next_index();
        let metadata = prepared.metadata().map(<[u8]>::to_vec);
        let mut change = Change {
            nodes,
            deleted,
            next_index: (next_index != self.next_index).then_some(next_index),
            metadata: metadata.clone(),
            records: prepared.records().clone(),
            record_into: self.open_frame(),
            ..Change::default()
        };
        let checkpoints = checkpoint.and_then(|id| {
            let info = CheckpointInfo {
                id,
                root,
                next_index,
                metadata: metadata.clone().unwrap_or_else(|| self.metadata.clone()),
            };
            self.add_checkpoint(&mut change, info)
        });
        Ok(PreparedApply {
            staged: self.store.stage(reader, change)?,
            root,
            next_index,
            metadata,
            checkpoints,
            generation: self.generation,
            step_roots: Vec::new(),
        })
    }

    /// Commits a [`prepare`](Self::prepare)d batch: the one store commit, then the tree's view.
    /// Nothing else may have changed the tree in between.
    ///
    /// # Errors
    /// [`TreeError::Conflict`] if the tree moved since `prepare` (the batch is not applied); the
    /// store's commit error (the tree keeps its state from before the call).
    pub fn publish(&mut self, prepared: PreparedApply<H, S>) -> Result<(), S::Error> {
        if prepared.generation != self.generation {
            return Err(TreeError::Conflict.into());
        }
        self.commit(prepared.staged)?;
        self.root = prepared.root;
        self.next_index = prepared.next_index;
        if let Some(metadata) = prepared.metadata {
            self.metadata = metadata;
        }
        if let Some(checkpoints) = prepared.checkpoints {
            self.checkpoints = checkpoints;
        }
        Ok(())
    }

    /// The store's commit; every batch prepared before it is stale, whether it lands or not.
    pub(super) fn commit(&mut self, staged: S::Staged) -> Result<(), S::Error> {
        self.generation += 1;
        self.store.commit(staged)
    }

    /// Makes `change` record checkpoint `info` (with an empty frame) and prune the oldest
    /// checkpoints past `max_checkpoints`; returns the checkpoint list after it. `None`, and
    /// `change` untouched, when history is off. The one rule for an apply's checkpoint and
    /// for [`History::checkpoint`](crate::History::checkpoint).
    pub(super) fn add_checkpoint(
        &self,
        change: &mut Change<H>,
        info: CheckpointInfo<Digest<H>>,
    ) -> Option<CheckpointList<Digest<H>>> {
        if self.history.max_checkpoints == 0 {
            return None;
        }
        let mut list = self.checkpoints.clone();
        change.removed = list.push(info.clone(), self.history.max_checkpoints);
        change.added = Some(info);
        Some(list)
    }

    /// The frame an apply records into: the newest checkpoint's, if any.
    fn open_frame(&self) -> Option<u64> {
        self.checkpoints.latest().map(|c| c.id)
    }

    /// Stages and commits `change` (history settings and checkpoints).
    pub(super) fn commit_change(&mut self, change: Change<H>) -> Result<(), S::Error> {
        let staged = self.store.stage(self.store.reader(), change)?;
        self.commit(staged)
    }

    /// Bumps the generation before a store change outside `publish` (a rewind).
    pub(super) fn invalidate_prepared(&mut self) {
        self.generation += 1;
    }
}
