//! The history model check: random batches, checkpoints, rewinds and historical proofs against a
//! reference that keeps a full copy of the tree at every checkpoint.

use hasher::Digest;
use proptest::prelude::*;

use crate::history::{History, HistoryConfig};
use crate::testing::ops::{apply_op, assert_same_state, rule_error};
use crate::testing::{arb_ops, MixHasher, Op, ReferenceTree};
use crate::TreeError;

/// One step of a history model run.
#[derive(Debug, Clone)]
pub enum HistoryOp<D> {
    /// A tree operation (or a restart).
    Tree(Op<D>),
    /// `checkpoint(last id + gap)`; a gap of 0 repeats the last id and must be refused.
    Checkpoint(u64),
    /// Rewind to the retained checkpoint `pick % len`, or, when `pick % (len + 1) == len`, to an
    /// id that is not retained (must be refused).
    Rewind(usize),
    /// Proofs of a few indices against every root in the window, and refusal of retired roots.
    ProofsAt,
}

/// Random history steps over [`arb_ops`] tree operations.
pub fn arb_history_ops<D: Clone + core::fmt::Debug + 'static>(
    depth: u8,
    max_len: usize,
    leaf: fn(u64) -> D,
) -> impl Strategy<Value = Vec<HistoryOp<D>>> {
    let step = prop_oneof![
        6 => arb_ops(depth, 3, leaf).prop_map(|ops| HistoryOp::Tree(ops[0].clone())),
        3 => prop_oneof![8 => 1u64..4, 1 => Just(0u64)].prop_map(HistoryOp::Checkpoint),
        2 => any::<usize>().prop_map(HistoryOp::Rewind),
        1 => Just(HistoryOp::ProofsAt),
    ];
    prop::collection::vec(step, 1..max_len)
}

/// The model: the reference tree now and a full copy at every retained checkpoint.
struct Model<T: crate::MerkleTree> {
    now: ReferenceTree<T::Hasher>,
    checkpoints: Vec<(u64, ReferenceTree<T::Hasher>)>,
    retired: Vec<Digest<T::Hasher>>,
    last_id: Option<u64>,
    config: HistoryConfig,
}

impl<T: crate::MerkleTree> Model<T> {
    fn window(&self) -> Vec<Digest<T::Hasher>> {
        let mut roots = vec![self.now.root()];
        for (_, tree) in self.checkpoints.iter().rev() {
            let root = tree.root();
            if roots.len() < self.config.root_window && !roots.contains(&root) {
                roots.push(root);
            }
        }
        roots.truncate(self.config.root_window);
        roots
    }
}

/// Drives `tree` (configured with `config`) and the model through `ops`, asserting after every
/// step equal results, equal state, equal retained checkpoint ids and equal root windows;
/// [`HistoryOp::ProofsAt`] checks `proof_at` for every acceptable root against the model's copy
/// and that retired roots are refused. Returns the tree.
///
/// # Panics
/// On the first divergence.
pub fn check_history_ops<T: History>(
    mut tree: T,
    config: HistoryConfig,
    ops: &[HistoryOp<Digest<T::Hasher>>],
    mut restart: impl FnMut(T) -> T,
) -> T {
    rule_error(tree.set_history_config(config)).expect("config");
    let mut model = Model::<T> {
        now: ReferenceTree::new(tree.depth()),
        checkpoints: Vec::new(),
        retired: Vec::new(),
        last_id: None,
        config,
    };
    for (step, op) in ops.iter().enumerate() {
        let (got, want) = match op {
            HistoryOp::Tree(op) => {
                let (next, got, want) = apply_op(tree, &mut model.now, op, &mut restart);
                tree = next;
                (got, want)
            }
            HistoryOp::Checkpoint(gap) => {
                let id = model.last_id.map_or(*gap, |last| last + gap);
                // Ids must increase over the newest *retained* checkpoint.
                let want = match model.checkpoints.last().map(|c| c.0) {
                    Some(last) if id <= last => {
                        Err(TreeError::CheckpointNotIncreasing { id, last })
                    }
                    _ => {
                        model.last_id = Some(id);
                        if config.max_checkpoints > 0 {
                            model.checkpoints.push((id, model.now.clone()));
                        }
                        let excess = model
                            .checkpoints
                            .len()
                            .saturating_sub(config.max_checkpoints);
                        for (_, old) in model.checkpoints.drain(..excess) {
                            model.retired.push(old.root());
                        }
                        Ok(())
                    }
                };
                (rule_error(tree.checkpoint(id)), want)
            }
            HistoryOp::Rewind(pick) => {
                let len = model.checkpoints.len();
                let choice = pick % (len + 1);
                if choice == len {
                    let id = model.last_id.map_or(0, |l| l + 1);
                    let want = Err(TreeError::UnknownCheckpoint {
                        id,
                        oldest: model.checkpoints.first().map(|c| c.0),
                    });
                    (rule_error(tree.rewind_to(id)), want)
                } else {
                    let id = model.checkpoints[choice].0;
                    for (_, later) in model.checkpoints.drain(choice + 1..) {
                        model.retired.push(later.root());
                    }
                    model.retired.push(model.now.root());
                    model.now = model.checkpoints[choice].1.clone();
                    model.last_id = Some(id);
                    (rule_error(tree.rewind_to(id)), Ok(()))
                }
            }
            HistoryOp::ProofsAt => {
                let window = model.window();
                let cap = tree.capacity();
                for root in &window {
                    let state = if *root == model.now.root() {
                        &model.now
                    } else {
                        let found = model.checkpoints.iter().rev().find(|c| c.1.root() == *root);
                        &found.expect("window roots come from checkpoints").1
                    };
                    for index in [0, state.next_index().saturating_sub(1), cap - 1] {
                        let proof = rule_error(tree.proof_at(root, index));
                        assert_eq!(
                            proof,
                            Ok(state.proof(index)),
                            "step {step}: proof_at {index}"
                        );
                        let proof = proof.expect("just compared");
                        assert_eq!(proof.compute_root(&state.leaf(index)), *root);
                    }
                }
                for root in &model.retired {
                    if !window.contains(root) {
                        assert_eq!(
                            rule_error(tree.proof_at(root, 0)),
                            Err(TreeError::RootNotInWindow),
                            "step {step}: retired root"
                        );
                        assert_eq!(rule_error(tree.is_acceptable_root(root)), Ok(false));
                    }
                }
                (Ok(()), Ok(()))
            }
        };
        assert_eq!(got, want, "step {step}: result of {op:?}");
        assert_same_state(&tree, &model.now, step, op);
        let ids: Vec<u64> = rule_error(tree.checkpoints())
            .expect("checkpoints")
            .iter()
            .map(|c| c.id)
            .collect();
        let want_ids: Vec<u64> = model.checkpoints.iter().map(|c| c.0).collect();
        assert_eq!(
            ids, want_ids,
            "step {step}: retained checkpoints after {op:?}"
        );
        assert_eq!(
            rule_error(tree.roots()),
            Ok(model.window()),
            "step {step}: root window after {op:?}"
        );
    }
    tree
}

/// Blocks 1..=8 (five members, a deletion and the block number as metadata each) through
/// `one.apply_checkpointed`, through `two.apply` then `two.checkpoint`, and through
/// `three.prepare_checkpointed` (odd blocks: `prepare_checkpointed_steps`, two steps whose
/// roots equal `two`'s after each step) then `three.publish`, under `max_checkpoints`: after
/// each block the roots, checkpoints and `frames` (what the undo frames cost) are equal; a repeated id is
/// refused; rewinding all three to the oldest retained checkpoint leaves them equal.
pub fn check_apply_checkpointed<S, F>(
    one: &mut crate::engine::Tree<MixHasher, S>,
    two: &mut crate::engine::Tree<MixHasher, S>,
    three: &mut crate::engine::Tree<MixHasher, S>,
    max_checkpoints: usize,
    frames: impl Fn(&crate::engine::Tree<MixHasher, S>) -> F,
) where
    S: crate::engine::TreeStore<MixHasher>,
    F: PartialEq + core::fmt::Debug,
{
    use crate::{AsTreeError, MerkleTree, UpdateBatch};
    let config = HistoryConfig {
        max_checkpoints,
        root_window: 3,
    };
    one.set_history_config(config).expect("settings");
    two.set_history_config(config).expect("settings");
    three.set_history_config(config).expect("settings");
    for block in 1..=8u64 {
        // A block in two steps (a contract's two calls): the members, then the deletion
        // and the metadata.
        let steps = |next: u64| {
            let mut members = UpdateBatch::<MixHasher>::new();
            members.set_range(next, (0..5).map(|i| block * 100 + i));
            let mut rest = UpdateBatch::<MixHasher>::new();
            if next > 0 {
                rest.delete(block % next);
            }
            rest.metadata(block.to_be_bytes().to_vec());
            vec![members, rest]
        };
        let make = |next: u64| {
            let mut batch = UpdateBatch::new();
            for step in steps(next) {
                batch.append(step);
            }
            batch
        };
        one.apply_checkpointed(make(one.next_index()), block)
            .expect("block and checkpoint");
        let mut step_roots = Vec::new();
        for step in steps(two.next_index()) {
            two.apply(step).expect("step");
            step_roots.push(two.root());
        }
        two.checkpoint(block).expect("checkpoint");
        let prepared = if block % 2 == 0 {
            three
                .prepare_checkpointed(make(three.next_index()), block)
                .expect("prepare")
        } else {
            let prepared = three
                .prepare_checkpointed_steps(steps(three.next_index()), block)
                .expect("prepare steps");
            assert_eq!(
                prepared.step_roots(),
                step_roots,
                "block {block}: the root after each step"
            );
            prepared
        };
        three.publish(prepared).expect("publish");
        for other in [&*two, &*three] {
            assert_eq!(one.root(), other.root());
            assert_eq!(one.checkpoints().ok(), other.checkpoints().ok());
            assert_eq!(frames(one), frames(other), "max {max_checkpoints}");
        }
    }
    let repeated = one.apply_checkpointed(UpdateBatch::new(), 8);
    assert!(matches!(
        repeated.as_ref().map_err(AsTreeError::as_tree_error),
        Err(Some(TreeError::CheckpointNotIncreasing { .. }))
    ));
    let oldest = one.checkpoints().expect("checkpoints")[0].id;
    one.rewind_to(oldest).expect("rewind");
    for other in [&mut *two, &mut *three] {
        other.rewind_to(oldest).expect("rewind");
        assert_eq!(one.root(), other.root());
        assert_eq!(one.metadata().ok(), other.metadata().ok());
        assert_eq!(
            one.empty_leaves_indices().ok(),
            other.empty_leaves_indices().ok()
        );
    }
}
