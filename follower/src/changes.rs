//! A block's leaf changes in the order they happened, the roots the contract stored between
//! them, and the member changes: what a block brings, before it is committed.

use hasher::{Fr, PoseidonHasher};
use tree_core::UpdateBatch;

use crate::block::BlockMeta;
use crate::members::{member_key, MemberInfo};

/// A block's leaf changes, in the order they happened, and the roots the contract stored
/// between them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockChanges {
    ops: Vec<LeafChange>,
    /// `(n, root)`: after the first `n` changes the contract stored `root` (`RootStored`).
    stored: Vec<(usize, Fr)>,
    /// `(step, k)`: the stored root `step` closed a full erasure whose last `k` changes are the
    /// deletions erased in its transaction so far; the call's own are a suffix of them (see
    /// [`erasures_stored`](Self::erasures_stored)). All `k` until a root says otherwise.
    erasures: Vec<(usize, usize)>,
    /// Members registered (`Some`) or erased, in order.
    members: Vec<(Fr, Option<MemberInfo>)>,
}

/// One leaf change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafChange {
    /// `leaf` written at `index`.
    Set(u64, Fr),
    /// `index` reset to the empty leaf (0).
    Delete(u64),
}

impl BlockChanges {
    /// No changes.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `leaf` at `index`.
    pub fn set(&mut self, index: u64, leaf: Fr) -> &mut Self {
        self.ops.push(LeafChange::Set(index, leaf));
        self
    }

    /// Resets `index` to the empty leaf.
    pub fn delete(&mut self, index: u64) -> &mut Self {
        self.ops.push(LeafChange::Delete(index));
        self
    }

    /// Member `id` registered (`Some`) or erased (`None`): its entry in the member index.
    pub fn member(&mut self, id: Fr, info: Option<MemberInfo>) -> &mut Self {
        self.members.push((id, info));
        self
    }

    /// The member changes, in order.
    #[must_use]
    pub fn members(&self) -> &[(Fr, Option<MemberInfo>)] {
        &self.members
    }

    /// The contract stored `root` after the changes so far (one tree-changing call ended).
    pub fn root_stored(&mut self, root: Fr) -> &mut Self {
        self.stored.push((self.ops.len(), root));
        self
    }

    /// A full erasure (`eraseMemberships(ids, true)`) stored `root`, after the erasures
    /// `erased` of its transaction that no root has covered yet. Earlier calls of the same
    /// transaction (a multicall, a smart account) may have erased lazily, storing no root, so
    /// the call's own erasures are a suffix of `erased`: all of it is assumed, and
    /// [`commit_block`](crate::commit_block) tries the shorter suffixes against `root` when it does not match.
    pub fn erasures_stored(&mut self, erased: &[u64], root: Fr) -> &mut Self {
        for &index in erased {
            self.delete(index);
        }
        self.root_stored(root);
        if erased.len() > 1 {
            self.erasures.push((self.stored.len() - 1, erased.len()));
        }
        self
    }

    /// The deletions that close stored root `step` when they are a full erasure's whose call
    /// might have erased only a suffix of them.
    pub(crate) fn undecided(&self, step: usize) -> Option<usize> {
        self.erasures
            .iter()
            .find(|(s, _)| *s == step)
            .map(|&(_, k)| k)
    }

    /// These changes with the first `lazy` of the `k` deletions before stored root `step`
    /// taken as lazy erasures (no tree change): the full erasure was the last `k - lazy`.
    pub(crate) fn with_lazy_erasures(&self, step: usize, lazy: usize) -> Self {
        let mut out = self.clone();
        let Some(k) = self.undecided(step) else {
            return out;
        };
        let end = self.stored[step].0;
        let first = end - k;
        out.ops.drain(first..first + lazy);
        for (n, _) in &mut out.stored[step..] {
            *n -= lazy;
        }
        for entry in &mut out.erasures {
            if entry.0 == step {
                entry.1 = k - lazy;
            }
        }
        out.erasures.retain(|&(_, k)| k > 1);
        out
    }

    /// Steps that end at each stored root before `step`, then one step per deletion of the
    /// full erasure that closes `step`, last first: their roots are the roots after the
    /// erasure's every possible suffix (one, two, … all of the deletions).
    pub(crate) fn suffix_probe(&self, step: usize) -> Option<Vec<UpdateBatch<PoseidonHasher>>> {
        let k = self.undecided(step)?;
        let mut steps = Vec::with_capacity(step + k);
        let mut from = 0;
        for &(to, _) in &self.stored[..step] {
            steps.push(Self::batch_of(&self.ops[from..to]));
            from = to;
        }
        let end = self.stored[step].0;
        // A prefix of the step that is not among the deletions (none, as calls.rs builds it).
        if from < end - k {
            steps.push(Self::batch_of(&self.ops[from..end - k]));
        }
        for op in self.ops[end - k..end].iter().rev() {
            steps.push(Self::batch_of(std::slice::from_ref(op)));
        }
        Some(steps)
    }

    /// The changes, in order.
    #[must_use]
    pub fn ops(&self) -> &[LeafChange] {
        &self.ops
    }

    /// The roots the contract stored in this block, in order.
    pub fn stored_roots(&self) -> impl Iterator<Item = Fr> + '_ {
        self.stored.iter().map(|(_, root)| *root)
    }

    /// As one tree batch (consecutive writes become one range), with `meta` as its metadata
    /// and, when `meta` says the member index is complete, the member changes as records.
    #[must_use]
    pub fn to_batch(&self, meta: &BlockMeta) -> UpdateBatch<PoseidonHasher> {
        let mut batch = Self::batch_of(&self.ops);
        self.finish(&mut batch, meta);
        batch
    }

    /// `meta` and the member records on the batch that ends the block.
    fn finish(&self, batch: &mut UpdateBatch<PoseidonHasher>, meta: &BlockMeta) {
        batch.metadata(meta.encode());
        if meta.members_from.is_some() {
            for (id, info) in &self.members {
                match info {
                    Some(info) => batch.put_record(&member_key(id), info.encode()),
                    None => batch.remove_record(&member_key(id)),
                };
            }
        }
    }

    /// As tree batches that each end where the contract stored a root (changes after the last
    /// stored root, if any, are the last batch), `meta` and the member records on the last.
    #[must_use]
    pub fn to_steps(&self, meta: &BlockMeta) -> Vec<UpdateBatch<PoseidonHasher>> {
        let mut steps = Vec::with_capacity(self.stored.len() + 1);
        let mut from = 0;
        for &(to, _) in &self.stored {
            steps.push(Self::batch_of(&self.ops[from..to]));
            from = to;
        }
        if from < self.ops.len() || steps.is_empty() {
            steps.push(Self::batch_of(&self.ops[from..]));
        }
        if let Some(last) = steps.last_mut() {
            self.finish(last, meta);
        }
        steps
    }

    fn batch_of(ops: &[LeafChange]) -> UpdateBatch<PoseidonHasher> {
        let mut batch = UpdateBatch::new();
        let mut run: Option<(u64, Vec<Fr>)> = None;
        for op in ops {
            match *op {
                LeafChange::Set(index, leaf) => match &mut run {
                    Some((start, leaves)) if *start + leaves.len() as u64 == index => {
                        leaves.push(leaf);
                    }
                    _ => {
                        if let Some((start, leaves)) = run.take() {
                            batch.set_range(start, leaves);
                        }
                        run = Some((index, vec![leaf]));
                    }
                },
                LeafChange::Delete(index) => {
                    if let Some((start, leaves)) = run.take() {
                        batch.set_range(start, leaves);
                    }
                    batch.delete(index);
                }
            }
        }
        if let Some((start, leaves)) = run {
            batch.set_range(start, leaves);
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_end_where_the_contract_stored_a_root() {
        let mut changes = BlockChanges::new();
        changes.set(0, Fr::from(1u64)).root_stored(Fr::from(10u64));
        changes
            .set(1, Fr::from(2u64))
            .delete(0)
            .root_stored(Fr::from(11u64));
        let steps = changes.to_steps(&BlockMeta::number(1));
        assert_eq!(
            steps.iter().map(UpdateBatch::len).collect::<Vec<_>>(),
            [1, 2]
        );
        changes.set(2, Fr::from(3u64));
        assert_eq!(changes.to_steps(&BlockMeta::number(1)).len(), 3);
        assert_eq!(BlockChanges::new().to_steps(&BlockMeta::number(1)).len(), 1);
    }

    #[test]
    fn consecutive_writes_become_ranges_in_order() {
        let mut changes = BlockChanges::new();
        changes
            .set(0, Fr::from(1u64))
            .set(1, Fr::from(2u64))
            .delete(0)
            .set(0, Fr::from(3u64));
        let batch = changes.to_batch(&BlockMeta::number(1));
        assert_eq!(batch.len(), 4);
    }
}
