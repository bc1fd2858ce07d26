//! Test support shared by every crate (feature `test-utils`): test hashers, a naive reference
//! tree, random operation sequences and the model check that drives any [`MerkleTree`](crate::MerkleTree) with them.

// Test support: failing loudly on the first divergence is its job.
#![allow(clippy::panic, clippy::expect_used)]

mod hashers;
mod history;
mod ops;
mod records;
mod reference;

pub use hashers::MixHasher;
pub use history::{arb_history_ops, check_apply_checkpointed, check_history_ops, HistoryOp};
pub use ops::{apply_op, arb_ops, assert_same_state, check_ops, mix_leaf, Op};
pub use records::{arb_record_ops, check_records, RecordOp};
pub use reference::ReferenceTree;
