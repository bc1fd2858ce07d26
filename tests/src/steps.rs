//! The deterministic workload of the crash, power-loss and failpoint suites: the writer and the
//! model replay exactly the same steps from a seed.

use rand::{rngs::StdRng, Rng, SeedableRng};
use tree_core::testing::MixHasher;
use tree_core::{History, HistoryConfig, UpdateBatch};

/// Retention small enough that checkpoints prune during a run.
pub const HISTORY: HistoryConfig = HistoryConfig {
    max_checkpoints: 6,
    root_window: 3,
};

/// Batch `k` for a tree whose `next_index` is `next`: appends, scattered rewrites, deletes and the
/// batch number as metadata. Deterministic in (seed, k, next).
#[must_use]
pub fn batch(seed: u64, k: u64, next: u64) -> UpdateBatch<MixHasher> {
    let mut rng = StdRng::seed_from_u64(seed ^ (k << 20));
    let mut batch = UpdateBatch::new();
    let appended = rng.gen_range(1..40u64);
    batch.set_range(next, (0..appended).map(|i| (k << 32) | (i + 1)));
    if next > 0 {
        for _ in 0..rng.gen_range(0..4) {
            batch.set(rng.gen_range(0..next), rng.gen());
        }
        for _ in 0..rng.gen_range(0..3) {
            batch.delete(rng.gen_range(0..next));
        }
    }
    batch.metadata(k.to_be_bytes().to_vec());
    batch
}

/// History step `s` (one commit each): odd steps apply a batch or, sometimes, rewind 1–3
/// checkpoints; even steps checkpoint. Deterministic in (seed, s, tree state).
/// Returns whether the step was a rewind.
///
/// # Errors
/// The tree's error.
pub fn history_step<T: History<Hasher = MixHasher>>(
    tree: &mut T,
    seed: u64,
    s: u64,
) -> Result<bool, T::Error> {
    let mut rng = StdRng::seed_from_u64(seed ^ (s << 24) ^ 0x5171);
    let checkpoints = tree.checkpoints()?;
    if s.is_multiple_of(2) {
        return tree.checkpoint(s).map(|()| false);
    }
    if checkpoints.len() > 2 && rng.gen_ratio(1, 3) {
        let back = rng.gen_range(1..=checkpoints.len().min(3));
        return tree
            .rewind_to(checkpoints[checkpoints.len() - back].id)
            .map(|()| true);
    }
    tree.apply(batch(seed, s, tree.next_index()))
        .map(|()| false)
}

/// What a reopened tree is compared on: root, next_index, metadata, checkpoint ids and the
/// deleted slots.
pub type Observed = (u64, u64, Vec<u8>, Vec<u64>, Vec<u64>);

/// The observable state of `tree`.
///
/// # Errors
/// The tree's read error.
pub fn observe<T: History<Hasher = MixHasher>>(tree: &T) -> Result<Observed, T::Error> {
    Ok((
        tree.root(),
        tree.next_index(),
        tree.metadata()?,
        tree.checkpoints()?.iter().map(|c| c.id).collect(),
        tree.empty_leaves_indices()?,
    ))
}
