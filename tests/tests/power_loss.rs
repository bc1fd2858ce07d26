//! Simulated power loss: a writer runs history steps on a [`PowerLossStore`], the plug is pulled
//! at a random step with a random prefix of the unflushed batches surviving, and the tree is
//! reopened from that disk image.
//!
//! After reopen: no error, the state equals the model after some prefix of committed steps, never
//! older than the last flush (every step, in flush-on-commit mode), the stored nodes are
//! consistent, the undo frames rewind to the model's oldest checkpoint, and the tree keeps
//! working. Cases: `CANOPY_POWER_LOSS_CASES` (default 1000).

use integration_tests::power_loss::PowerLossStore;
use integration_tests::report;
use integration_tests::steps::{history_step, observe, HISTORY};
use rand::{rngs::StdRng, Rng, SeedableRng};
use tree_core::testing::MixHasher;
use tree_core::{Depth, History, OptimalMerkleTree, RehashConfig};
use tree_sled::{MemStore, SledMerkleTree};

const DEPTH: u8 = 12;

fn cases() -> u64 {
    std::env::var("CANOPY_POWER_LOSS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Runs one case; returns a description of the violation, if any.
fn run_case(seed: u64) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let depth = Depth::new(DEPTH).unwrap();
    let flush_on_commit = rng.gen_bool(0.5);
    let store = PowerLossStore::new(flush_on_commit);
    let mut tree = SledMerkleTree::<MixHasher, PowerLossStore>::open_store(
        store.clone(),
        depth,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .map_err(|e| format!("open: {e}"))?;
    tree.set_history_config(HISTORY).unwrap();
    let mut model = OptimalMerkleTree::<MixHasher>::new(depth);
    model.set_history_config(HISTORY).unwrap();

    // models[i] = the model after i committed steps; `durable` = newest step a flush covered.
    let mut models = vec![model.clone()];
    let mut durable = 0usize;
    let crash_at = rng.gen_range(0..=40u64);
    for s in 1..=crash_at {
        let flushes = store.flushes();
        history_step(&mut tree, seed, s).unwrap();
        history_step(&mut model, seed, s).unwrap();
        models.push(model.clone());
        if !flush_on_commit && rng.gen_ratio(1, 6) {
            tree.flush().unwrap();
        }
        if store.flushes() > flushes {
            durable = usize::try_from(s).unwrap();
        }
    }
    let pending = store.pending();
    let image = store.crash_image(rng.gen_range(0..=pending));
    drop(tree);

    let mut reopened = SledMerkleTree::<MixHasher, MemStore>::open_store(
        image,
        depth,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .map_err(|e| format!("reopen after crash at step {crash_at}: {e}"))?;
    let got = observe(&reopened).map_err(|e| format!("read after reopen: {e}"))?;
    let Some(at) = (0..models.len())
        .rev()
        .find(|&i| observe(&models[i]).unwrap() == got)
    else {
        return Err(format!(
            "crash at step {crash_at}: state matches no committed prefix"
        ));
    };
    if at < durable {
        return Err(format!(
            "crash at step {crash_at}: reopened at step {at}, but step {durable} was flushed \
             (flush on commit: {flush_on_commit})"
        ));
    }
    if flush_on_commit && at != models.len() - 1 {
        return Err(format!(
            "flush-on-commit lost steps: reopened at {at} of {crash_at}"
        ));
    }
    let issues = reopened.verify_integrity().map_err(|e| e.to_string())?;
    if !issues.is_empty() {
        return Err(format!("stored nodes inconsistent: {issues:?}"));
    }
    // The reopened tree keeps working, and its undo frames are complete.
    let mut model = models[at].clone();
    let next = u64::try_from(at).unwrap() + 1;
    history_step(&mut reopened, seed, next).map_err(|e| format!("step after reopen: {e}"))?;
    history_step(&mut model, seed, next).unwrap();
    if let Some(oldest) = model.checkpoints().unwrap().first().map(|c| c.id) {
        reopened
            .rewind_to(oldest)
            .map_err(|e| format!("rewind after reopen: {e}"))?;
        model.rewind_to(oldest).unwrap();
    }
    if observe(&reopened).unwrap() != observe(&model).unwrap() {
        return Err(format!(
            "after reopen at step {at}: the next step or the rewind diverged from the model"
        ));
    }
    Ok(())
}

#[test]
fn power_loss_reopens_at_a_committed_prefix_never_before_the_last_flush() {
    let cases = cases();
    let mut rng = StdRng::seed_from_u64(0x9e7_105);
    let mut violations = Vec::new();
    for case in 0..cases {
        let seed = rng.gen();
        if let Err(why) = run_case(seed) {
            eprintln!("case {case} (seed {seed:#x}): {why}");
            violations.push(seed);
        }
    }
    println!("power-loss: {cases} cases, {} violations", violations.len());
    report::record(
        "power_loss",
        "history",
        &[("cases", cases), ("violations", violations.len() as u64)],
        &[],
    );
    assert!(violations.is_empty(), "seeds {violations:x?}");
}

/// The simulator itself: unflushed batches are lost unless they are in the surviving prefix.
#[test]
fn simulator_loses_unflushed_batches_and_keeps_prefixes() {
    use tree_sled::{KvStore, StoreBatch};
    let store = PowerLossStore::new(false);
    let put = |k: u8| {
        let mut b = StoreBatch::default();
        b.insert(&[k], vec![k]);
        b
    };
    store.commit(put(1)).unwrap();
    store.flush().unwrap();
    store.commit(put(2)).unwrap();
    store.commit(put(3)).unwrap();
    assert_eq!(store.get(&[3]).unwrap(), Some(vec![3]));
    let lost = store.crash_image(0);
    assert_eq!(lost.get(&[1]).unwrap(), Some(vec![1]));
    assert_eq!(lost.get(&[2]).unwrap(), None);
    let one = store.crash_image(1);
    assert_eq!(one.get(&[2]).unwrap(), Some(vec![2]));
    assert_eq!(one.get(&[3]).unwrap(), None);
    assert_eq!(store.crash_image(9).len(), 3);
}
