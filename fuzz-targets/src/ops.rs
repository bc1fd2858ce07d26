//! Random operation sequences on every tree kind, compared with the reference tree after every
//! step (tree-core's `check_history_ops`: results, roots, leaves, counters, deleted slots,
//! metadata, proofs, checkpoints, rewinds and historical proofs).

use arbitrary::{Arbitrary, Result, Unstructured};
use tree_core::testing::{check_history_ops, mix_leaf, HistoryOp, MixHasher, Op};
use tree_core::{Depth, FullMerkleTree, HistoryConfig, OptimalMerkleTree, RehashConfig};
use tree_sled::{MemStore, SledMerkleTree};

/// An index: mostly in or just past the tree, sometimes anything.
fn index(u: &mut Unstructured<'_>, capacity: u64) -> Result<u64> {
    if u.ratio(1, 12)? {
        u64::arbitrary(u)
    } else {
        u.int_in_range(0..=capacity + 1)
    }
}

fn leaf(u: &mut Unstructured<'_>) -> Result<u64> {
    // Seed 0 is the empty leaf, so writes of "nothing" happen too.
    Ok(mix_leaf(u64::from(u.int_in_range(0..=30u8)?)))
}

fn leaves(u: &mut Unstructured<'_>, max: u64) -> Result<Vec<u64>> {
    let n = u.int_in_range(0..=max)?;
    (0..n).map(|_| leaf(u)).collect()
}

fn op(u: &mut Unstructured<'_>, capacity: u64) -> Result<HistoryOp<u64>> {
    let max = capacity.min(12);
    Ok(match u.int_in_range(0..=11u8)? {
        0 | 1 => HistoryOp::Tree(Op::Set(index(u, capacity)?, leaf(u)?)),
        2 => HistoryOp::Tree(Op::SetRange(index(u, capacity)?, leaves(u, max)?)),
        3 => HistoryOp::Tree(Op::Delete(index(u, capacity)?)),
        4 => HistoryOp::Tree(Op::UpdateNext(leaf(u)?)),
        5 => {
            let start = index(u, capacity)?;
            let written = leaves(u, max)?;
            let removed = (0..u.int_in_range(0..=4u8)?)
                .map(|_| index(u, capacity))
                .collect::<Result<Vec<_>>>()?;
            HistoryOp::Tree(Op::Override(start, written, removed))
        }
        6 => HistoryOp::Tree(Op::SetMetadata(Vec::arbitrary(u)?)),
        7 => HistoryOp::Tree(Op::Restart),
        8 | 9 => HistoryOp::Checkpoint(u.int_in_range(0..=3)?),
        10 => HistoryOp::Rewind(usize::arbitrary(u)?),
        _ => HistoryOp::ProofsAt,
    })
}

/// Depth, retention and up to 40 steps from the input.
fn decode(data: &[u8]) -> Result<(Depth, HistoryConfig, Vec<HistoryOp<u64>>)> {
    let mut u = Unstructured::new(data);
    let depth =
        Depth::new(u.int_in_range(1..=6u8)?).map_err(|_| arbitrary::Error::IncorrectFormat)?;
    let config = HistoryConfig {
        max_checkpoints: u.int_in_range(0..=5)?,
        root_window: u.int_in_range(1..=4)?,
    };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 40 {
        ops.push(op(&mut u, depth.capacity())?);
    }
    Ok((depth, config, ops))
}

/// Runs the decoded steps on Optimal, Full and the store-backed tree (restarts reopen it).
pub fn run(data: &[u8]) {
    let Ok((depth, config, ops)) = decode(data) else {
        return;
    };
    let parallel = data.first().is_some_and(|b| b & 1 == 1);
    let rehash = RehashConfig::with_min_parallel_nodes(if parallel { 1 } else { usize::MAX });
    check_history_ops(
        OptimalMerkleTree::<MixHasher>::with_config(depth, rehash.clone()),
        config,
        &ops,
        |t| t,
    );
    if let Ok(full) = FullMerkleTree::<MixHasher>::with_config(depth, rehash.clone()) {
        check_history_ops(full, config, &ops, |t| t);
    }
    let store = MemStore::new();
    let open = |store: MemStore| {
        SledMerkleTree::<MixHasher, _>::open_store(
            store,
            depth,
            rehash.clone(),
            tree_core::persistent::NodeCache::top(2),
        )
    };
    if let Ok(tree) = open(store.clone()) {
        check_history_ops(tree, config, &ops, |tree| {
            drop(tree);
            match open(store.clone()) {
                Ok(tree) => tree,
                Err(e) => panic!("reopen failed: {e}"),
            }
        });
    }
}

/// A few hand-made sequences.
pub fn seeds() -> Vec<Vec<u8>> {
    vec![
        vec![3, 2, 2, 2, 5, 1, 0, 3, 1, 8, 1, 0, 9, 2, 10, 0, 11],
        vec![4, 5, 3, 5, 2, 7, 1, 2, 3, 4, 5, 6, 7, 3, 8, 2, 10, 1, 7, 4],
        (0u8..64).collect(),
    ]
}
