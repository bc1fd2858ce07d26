//! The history model check: random batches, checkpoints, rewinds and historical proofs against a
//! reference that keeps a full copy of the tree at every checkpoint.

use hasher::Digest;
use proptest::prelude::*;

use crate::history::{History, HistoryConfig};
use crate::testing::ops::{apply_op, assert_same_state, rule_error};
use crate::testing::{arb_ops, Op, ReferenceTree};
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
