//! The records model check: records written with leaves, across checkpoints, rewinds, pruning
//! and restarts, against a model that keeps a full copy of the records at every checkpoint.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::engine::{Tree, TreeStore};
use crate::history::{History, HistoryConfig};
use crate::testing::{mix_leaf, MixHasher};
use crate::{MerkleTree, UpdateBatch};

/// Keys the model uses: few, so writes collide.
const KEYS: u8 = 6;

/// One step of a records model run.
#[derive(Debug, Clone)]
pub enum RecordOp {
    /// One batch: a leaf written at `leaf % capacity` (if any), records set (`Some`) or removed,
    /// and, with `checkpoint`, the next checkpoint recorded in the same commit.
    Batch {
        /// Leaf index to write, taken modulo the capacity.
        leaf: Option<u64>,
        /// `(key, value)`: `None` removes.
        records: Vec<(u8, Option<u8>)>,
        /// Whether the batch goes through `apply_checkpointed`.
        checkpoint: bool,
    },
    /// A checkpoint on its own.
    Checkpoint,
    /// Rewind to the retained checkpoint `pick % len` (nothing when none is retained).
    Rewind(usize),
    /// Drop the tree and open it again.
    Restart,
}

/// Random records steps.
pub fn arb_record_ops(max_len: usize) -> impl Strategy<Value = Vec<RecordOp>> {
    let records = prop::collection::vec((0..KEYS, prop::option::of(any::<u8>())), 0..4);
    let step = prop_oneof![
        6 => (prop::option::of(any::<u64>()), records, any::<bool>())
            .prop_map(|(leaf, records, checkpoint)| RecordOp::Batch { leaf, records, checkpoint }),
        2 => Just(RecordOp::Checkpoint),
        2 => any::<usize>().prop_map(RecordOp::Rewind),
        1 => Just(RecordOp::Restart),
    ];
    prop::collection::vec(step, 1..max_len)
}

/// The model's records at one moment.
type Snapshot = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(k: u8) -> Vec<u8> {
    vec![b'k', k]
}

/// Drives `tree` through `ops` under `config`; after every step every key's record, the root
/// and the retained checkpoint ids equal the model's (records of each checkpoint kept in full).
///
/// # Panics
/// On the first divergence.
pub fn check_records<S: TreeStore<MixHasher>>(
    mut tree: Tree<MixHasher, S>,
    config: HistoryConfig,
    ops: &[RecordOp],
    mut restart: impl FnMut(Tree<MixHasher, S>) -> Tree<MixHasher, S>,
) -> Tree<MixHasher, S> {
    tree.set_history_config(config).expect("config");
    let mut now = Snapshot::new();
    // (id, records, root) of every retained checkpoint, oldest first.
    let mut kept: Vec<(u64, Snapshot, _)> = Vec::new();
    let mut next_id = 1u64;
    let capacity = tree.capacity();
    for (step, op) in ops.iter().enumerate() {
        let mut checkpoint = |now: &Snapshot, root, id| {
            if config.max_checkpoints > 0 {
                kept.push((id, now.clone(), root));
                let excess = kept.len().saturating_sub(config.max_checkpoints);
                kept.drain(..excess);
            }
        };
        match op {
            RecordOp::Batch {
                leaf,
                records,
                checkpoint: with_checkpoint,
            } => {
                let mut batch = UpdateBatch::<MixHasher>::new();
                if let Some(index) = leaf {
                    let index = index % capacity;
                    batch.set(index, mix_leaf(index ^ step as u64));
                }
                for &(k, value) in records {
                    match value {
                        Some(v) => {
                            batch.put_record(&key(k), vec![v; usize::from(v % 5) + 1]);
                            now.insert(key(k), vec![v; usize::from(v % 5) + 1]);
                        }
                        None => {
                            batch.remove_record(&key(k));
                            now.remove(&key(k));
                        }
                    }
                }
                if *with_checkpoint {
                    let id = next_id;
                    next_id += 1;
                    tree.apply_checkpointed(batch, id)
                        .expect("apply_checkpointed");
                    checkpoint(&now, tree.root(), id);
                } else {
                    tree.apply(batch).expect("apply");
                }
            }
            RecordOp::Checkpoint => {
                let id = next_id;
                next_id += 1;
                tree.checkpoint(id).expect("checkpoint");
                checkpoint(&now, tree.root(), id);
            }
            RecordOp::Rewind(pick) => {
                if !kept.is_empty() {
                    let at = pick % kept.len();
                    kept.truncate(at + 1);
                    let (id, records, root) = kept[at].clone();
                    tree.rewind_to(id).expect("rewind");
                    assert_eq!(tree.root(), root, "step {step}: root after rewind to {id}");
                    now = records;
                }
            }
            RecordOp::Restart => tree = restart(tree),
        }
        for k in 0..KEYS {
            assert_eq!(
                tree.record(&key(k)).expect("record"),
                now.get(&key(k)).cloned(),
                "step {step}: record {k} after {op:?}"
            );
        }
        let ids: Vec<u64> = tree
            .checkpoints()
            .expect("checkpoints")
            .iter()
            .map(|c| c.id)
            .collect();
        let want: Vec<u64> = kept.iter().map(|c| c.0).collect();
        assert_eq!(ids, want, "step {step}: checkpoints after {op:?}");
    }
    tree
}
