//! A tree shared by a service: many threads read consistent (root, proof) pairs while one
//! writer applies batches.
//!
//! A write is split in two: [`Tree::prepare`](crate::engine::Tree::prepare) does all the hashing and builds the store
//! batch under the *shared* lock, so readers keep reading the old state meanwhile; only
//! [`Tree::publish`](crate::engine::Tree::publish) (one store commit and a few assignments) takes the exclusive
//! lock. Writers are serialised by their own mutex, so nothing changes the tree between the two
//! steps. Every read closure sees exactly one state.

use crate::UpdateBatch;
use hasher::{Digest, DigestCodec};
use parking_lot::{Mutex, RwLock};

use super::{KvStore, PersistentTree, StoreTreeError};

/// A [`PersistentTree`] behind a reader-writer lock, for concurrent readers and one writer.
pub struct SharedTree<H: DigestCodec, S: KvStore> {
    tree: RwLock<PersistentTree<H, S>>,
    writer: Mutex<()>,
}

impl<H: DigestCodec, S: KvStore> SharedTree<H, S> {
    /// Shares `tree`.
    pub fn new(tree: PersistentTree<H, S>) -> Self {
        Self {
            tree: RwLock::new(tree),
            writer: Mutex::new(()),
        }
    }

    /// Runs `f` on one consistent state of the tree (shared lock; concurrent with other readers
    /// and with a writer's hashing).
    pub fn read<R>(&self, f: impl FnOnce(&PersistentTree<H, S>) -> R) -> R {
        f(&self.tree.read())
    }

    /// Applies `batch`: hashing under the shared lock, the commit under a short exclusive one.
    ///
    /// # Errors
    /// As [`MerkleTree::apply`](crate::MerkleTree::apply).
    pub fn apply(&self, batch: UpdateBatch<H>) -> Result<(), StoreTreeError<S>> {
        let _writer = self.writer.lock();
        let prepared = self.tree.read().prepare(batch)?;
        self.tree.write().publish(prepared)
    }

    /// Applies `batch` and records checkpoint `id` after it, in one atomic store batch; hashing
    /// under the shared lock as in [`apply`](Self::apply).
    ///
    /// # Errors
    /// As [`Tree::apply_checkpointed`](crate::engine::Tree::apply_checkpointed).
    pub fn apply_checkpointed(
        &self,
        batch: UpdateBatch<H>,
        id: u64,
    ) -> Result<(), StoreTreeError<S>> {
        self.apply_checkpointed_if(batch, id, |_| Ok::<(), std::convert::Infallible>(()))
            .map(|accepted| match accepted {
                Ok(()) => (),
                Err(never) => match never {},
            })
    }

    /// [`apply_checkpointed`](Self::apply_checkpointed), but `accept` sees the new root before
    /// anything is written: when it refuses, nothing is written and its error is returned (a
    /// chain follower compares the root with the contract's before the block lands).
    ///
    /// # Errors
    /// As [`Tree::apply_checkpointed`](crate::engine::Tree::apply_checkpointed); `accept`'s refusal is the inner error.
    pub fn apply_checkpointed_if<E>(
        &self,
        batch: UpdateBatch<H>,
        id: u64,
        accept: impl FnOnce(&Digest<H>) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreTreeError<S>> {
        // One step: its one root is the new root.
        self.apply_checkpointed_steps_if(vec![batch], id, |roots| {
            roots.first().map_or(Ok(()), accept)
        })
    }

    /// [`apply_checkpointed_if`](Self::apply_checkpointed_if) of `steps` applied in order as
    /// one commit: `accept` sees the root after each step before anything is written.
    ///
    /// # Errors
    /// As [`Tree::prepare_checkpointed_steps`](crate::engine::Tree::prepare_checkpointed_steps); `accept`'s refusal is the inner error.
    pub fn apply_checkpointed_steps_if<E>(
        &self,
        steps: Vec<UpdateBatch<H>>,
        id: u64,
        accept: impl FnOnce(&[Digest<H>]) -> Result<(), E>,
    ) -> Result<Result<(), E>, StoreTreeError<S>> {
        let _writer = self.writer.lock();
        let prepared = self.tree.read().prepare_checkpointed_steps(steps, id)?;
        if let Err(refused) = accept(prepared.step_roots()) {
            return Ok(Err(refused));
        }
        self.tree.write().publish(prepared)?;
        Ok(Ok(()))
    }

    /// Runs `f` with exclusive access (checkpoints, rewinds, configuration).
    pub fn write<R>(&self, f: impl FnOnce(&mut PersistentTree<H, S>) -> R) -> R {
        let _writer = self.writer.lock();
        f(&mut self.tree.write())
    }

    /// The tree back.
    pub fn into_inner(self) -> PersistentTree<H, S> {
        self.tree.into_inner()
    }
}
