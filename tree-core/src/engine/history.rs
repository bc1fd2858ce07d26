//! [`History`] for every tree: the rules are [`crate::history`]'s, the frames the store's, and
//! each history change one store commit.

use hasher::{Digest, Hasher};

use super::store::{Change, TreeStore};
use super::Tree;
use crate::history::{value_at, Checkpoints, FrameRef, History};
use crate::{CheckpointInfo, HistoryConfig, MerkleProof, MerkleTree, NodeAddr};

impl<H: Hasher, S: TreeStore<H>> History for Tree<H, S> {
    fn history_config(&self) -> HistoryConfig {
        self.history
    }

    /// One commit: the settings and the removal of the checkpoints they no longer retain,
    /// with their frames.
    fn set_history_config(&mut self, config: HistoryConfig) -> Result<(), S::Error> {
        let mut list = self.checkpoints.clone();
        let removed = list.prune(config.max_checkpoints);
        self.commit_change(Change {
            history: Some(config),
            removed,
            ..Change::default()
        })?;
        self.history = config;
        self.checkpoints = list;
        Ok(())
    }

    /// One commit: the checkpoint (with an empty frame), the pruning it causes, and the
    /// settings.
    fn checkpoint(&mut self, id: u64) -> Result<(), S::Error> {
        self.checkpoints.check_new(id)?;
        let info = CheckpointInfo {
            id,
            root: self.root,
            next_index: self.next_index,
            metadata: self.metadata.clone(),
        };
        let mut change = Change {
            history: Some(self.history),
            ..Change::default()
        };
        let Some(list) = self.add_checkpoint(&mut change, info) else {
            return Ok(());
        };
        self.commit_change(change)?;
        self.checkpoints = list;
        Ok(())
    }

    /// Gathers the records of the frames from `id`'s on (oldest first, so each entry keeps its
    /// value at `id`) and commits them back with `id`'s counters as one unit.
    fn rewind_to(&mut self, id: u64) -> Result<(), S::Error> {
        let pos = self.checkpoints.position(id)?;
        let consumed: Vec<u64> = self.checkpoints.as_slice()[pos..]
            .iter()
            .map(|c| c.id)
            .collect();
        let to = self.checkpoints.as_slice()[pos].clone();
        let mut restore = S::Restore::default();
        for (position, &id) in (pos..).zip(&consumed) {
            self.store
                .frame_records(FrameRef { position, id }, &mut restore)?;
        }
        self.invalidate_prepared();
        self.store.commit_rewind(restore, &to, &consumed)?;
        debug_assert!(
            self.store.node(NodeAddr::root(self.depth)).ok() == Some(to.root),
            "rewind restores the checkpoint's root"
        );
        self.root = to.root;
        self.next_index = to.next_index;
        self.metadata.clone_from(&to.metadata);
        self.checkpoints.truncate_after(pos);
        Ok(())
    }

    fn checkpoints(&self) -> Result<Checkpoints<H>, S::Error> {
        Ok(self.checkpoints.as_slice().to_vec())
    }

    /// Each sibling is its value in the first frame from the checkpoint on that recorded it,
    /// else its current value.
    fn proof_at(&self, root: &Digest<H>, index: u64) -> Result<MerkleProof<H>, S::Error> {
        let window = self.history.root_window;
        let Some(pos) = self.checkpoints.resolve_root(root, self.root, window)? else {
            return self.proof(index);
        };
        self.depth.check_index(index)?;
        let frames = &self.checkpoints.as_slice()[pos..];
        let mut siblings = Vec::with_capacity(usize::from(self.depth.get()));
        for addr in NodeAddr::proof_path(self.depth, index) {
            siblings.push(value_at(
                (pos..).zip(frames).map(|(position, c)| {
                    self.store
                        .recorded_node(FrameRef { position, id: c.id }, addr)
                }),
                || self.store.node(addr),
            )?);
        }
        Ok(MerkleProof::new(index, siblings))
    }
}
