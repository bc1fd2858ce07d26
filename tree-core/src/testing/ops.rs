//! Random operation sequences and the model check.

use hasher::Digest;
use proptest::prelude::*;

use crate::testing::ReferenceTree;
use crate::{AsTreeError, MerkleTree, MerkleTreeExt, TreeError};

/// One step of a model run.
#[derive(Debug, Clone)]
pub enum Op<D> {
    /// `set(index, leaf)`.
    Set(u64, D),
    /// `set_range(start, leaves)`.
    SetRange(u64, Vec<D>),
    /// `delete(index)`.
    Delete(u64),
    /// `update_next(leaf)`.
    UpdateNext(D),
    /// `override_range(start, leaves, removes)`.
    Override(u64, Vec<D>, Vec<u64>),
    /// `set_metadata(bytes)`.
    SetMetadata(Vec<u8>),
    /// Drop and reopen (persistent trees); a no-op for in-memory ones.
    Restart,
}

/// Random operations for a tree of `depth`, with leaves made by `leaf(seed)`.
///
/// Indices range a little past capacity and past `u64::MAX - 2` now and then, so error paths are
/// exercised; starts are any parity; override removals fall before, inside and after the range.
pub fn arb_ops<D: Clone + core::fmt::Debug + 'static>(
    depth: u8,
    max_len: usize,
    leaf: fn(u64) -> D,
) -> impl Strategy<Value = Vec<Op<D>>> {
    let cap = 1u64 << depth;
    let index = prop_oneof![
        8 => 0..cap,
        1 => cap..cap + 3,
        1 => (u64::MAX - 2)..=u64::MAX,
    ];
    let leaf_s = any::<u64>().prop_map(move |s| leaf(s % 1000));
    let leaves = prop::collection::vec(
        leaf_s.clone(),
        0..usize::try_from(cap / 2 + 2).unwrap_or(40).min(40),
    );
    let op = prop_oneof![
        4 => (index.clone(), leaf_s.clone()).prop_map(|(i, l)| Op::Set(i, l)),
        3 => (index.clone(), leaves.clone()).prop_map(|(i, ls)| Op::SetRange(i, ls)),
        3 => index.clone().prop_map(Op::Delete),
        3 => leaf_s.prop_map(Op::UpdateNext),
        3 => (index.clone(), leaves, prop::collection::vec(index, 0..6))
            .prop_map(|(i, ls, rs)| Op::Override(i, ls, rs)),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(Op::SetMetadata),
        1 => Just(Op::Restart),
    ];
    prop::collection::vec(op, 1..max_len)
}

/// The rule violation inside a backend's result; panics on a storage error (a model run has none).
pub(crate) fn rule_error<V, E: AsTreeError + core::fmt::Debug>(
    result: Result<V, E>,
) -> Result<V, TreeError> {
    result.map_err(|e| match e.as_tree_error() {
        Some(rule) => rule.clone(),
        None => panic!("storage error during a model run: {e:?}"),
    })
}

/// Applies `ops` to `tree` and to a [`ReferenceTree`], asserting after every step that both
/// returned the same result (same error variant and values) and hold the same root, leaves,
/// `next_index`, deleted indices, metadata, and proofs for a sample of indices. `restart`
/// implements [`Op::Restart`] (drop and reopen; identity for in-memory trees). Returns the tree.
///
/// # Panics
/// On the first divergence, with the step and operation in the message.
pub fn check_ops<T: MerkleTree>(
    mut tree: T,
    ops: &[Op<Digest<T::Hasher>>],
    mut restart: impl FnMut(T) -> T,
) -> T {
    let mut model = ReferenceTree::<T::Hasher>::new(tree.depth());
    for (step, op) in ops.iter().enumerate() {
        let (next, got, want) = apply_op(tree, &mut model, op, &mut restart);
        tree = next;
        assert_eq!(got, want, "step {step}: result of {op:?}");
        assert_same_state(&tree, &model, step, op);
    }
    tree
}

/// Applies one [`Op`] to `tree` and `model`; returns the tree (reopened on [`Op::Restart`]) and
/// both results.
pub fn apply_op<T: MerkleTree>(
    mut tree: T,
    model: &mut ReferenceTree<T::Hasher>,
    op: &Op<Digest<T::Hasher>>,
    restart: &mut impl FnMut(T) -> T,
) -> (T, Result<(), TreeError>, Result<(), TreeError>) {
    let (got, want) = match op.clone() {
        Op::Set(i, l) => (rule_error(tree.set(i, l)), model.set(i, l)),
        Op::SetRange(s, ls) => (
            rule_error(tree.set_range(s, ls.iter().copied())),
            model.set_range(s, &ls),
        ),
        Op::Delete(i) => (rule_error(tree.delete(i)), model.delete(i)),
        Op::UpdateNext(l) => (rule_error(tree.update_next(l)), model.update_next(l)),
        Op::Override(s, ls, rs) => (
            rule_error(tree.override_range(s, ls.iter().copied(), rs.iter().copied())),
            model.override_range(s, &ls, &rs),
        ),
        Op::SetMetadata(m) => {
            model.set_metadata(&m);
            (rule_error(tree.set_metadata(&m)), Ok(()))
        }
        Op::Restart => {
            tree = restart(tree);
            (Ok(()), Ok(()))
        }
    };
    (tree, got, want)
}

/// Asserts `tree` and `model` hold the same observable state.
///
/// # Panics
/// On any difference.
pub fn assert_same_state<T: MerkleTree>(
    tree: &T,
    model: &ReferenceTree<T::Hasher>,
    step: usize,
    op: &impl core::fmt::Debug,
) {
    let ctx = || format!("step {step} after {op:?}");
    assert_eq!(tree.root(), model.root(), "root, {}", ctx());
    assert_eq!(
        tree.next_index(),
        model.next_index(),
        "next_index, {}",
        ctx()
    );
    assert_eq!(
        tree.empty_leaves_indices().ok(),
        Some(model.empty_leaves_indices()),
        "empty indices, {}",
        ctx()
    );
    assert_eq!(
        tree.metadata().ok().as_deref(),
        Some(model.metadata()),
        "metadata, {}",
        ctx()
    );
    let cap = tree.capacity();
    let upto = (model.next_index() + 2).min(cap);
    for i in 0..upto {
        assert_eq!(tree.get(i).ok(), Some(model.leaf(i)), "leaf {i}, {}", ctx());
    }
    let last = model.next_index().saturating_sub(1);
    for i in [0, last, last / 2, cap - 1] {
        let proof = tree.proof(i).ok();
        assert_eq!(proof, Some(model.proof(i)), "proof {i}, {}", ctx());
        if let Some(proof) = proof {
            assert!(
                tree.verify_proof(&proof, &model.leaf(i)),
                "verify {i}, {}",
                ctx()
            );
        }
    }
}

/// Leaf generator for `u64` digests (seed 0 is the empty leaf, so "set to empty" is covered).
#[must_use]
pub fn mix_leaf(seed: u64) -> u64 {
    seed
}
