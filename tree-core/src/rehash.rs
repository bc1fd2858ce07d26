//! The one rehash engine: level-by-level `update_hashes`, parallel above `min_parallel_nodes`.
//!
//! Every tree (dense, sparse, persistent) implements [`NodeLevels`] (read a level's children,
//! write a level's parents) and calls [`apply_writes`]; no tree has its own sequential/parallel
//! branches. At each level the parents to recompute are the de-duplicated `index >> 1` of the
//! level below, so every dirty parent is hashed exactly once, whatever the parity of the range
//! ends. Parallel hashing writes into disjoint chunks of one output buffer: no locks.

use hasher::{Digest, Hasher};

use crate::Depth;

/// The default `min_parallel_nodes`, from the tree-bench `tune` sweep on this project's 2-core
/// machine with Poseidon on IFMA lanes (docs/benchmarks.md, "Tuning"): 32 is the best overall threshold for
/// both in-memory trees at depth 20; 1 now costs 45% on `set`/`delete` (a lone parent sent to
/// rayon costs more than its hash), and from 128 up the lower levels of a 2^10 `set_range` run
/// sequentially (1.5 → 2.7 ms). A level splits into chunks of whole lane batches
/// ([`Hasher::BATCH`]), so a threshold below 16 buys no parallelism with
/// eight-wide lanes anyway. Cheap hashes differ: Keccak on the dense tree is fastest sequential.
pub const DEFAULT_MIN_PARALLEL_NODES: usize = 32;

/// How a tree rehashes: the parallel threshold and, optionally, the thread pool to run on.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct RehashConfig {
    /// A level is hashed in parallel when at least this many parents need recomputing.
    /// `1` parallelises everything, `usize::MAX` nothing.
    pub min_parallel_nodes: usize,
    /// Pool to hash on instead of rayon's global pool.
    #[cfg(feature = "parallel")]
    #[cfg_attr(feature = "serde", serde(skip))]
    pub thread_pool: Option<std::sync::Arc<rayon::ThreadPool>>,
}

impl Default for RehashConfig {
    fn default() -> Self {
        Self {
            min_parallel_nodes: DEFAULT_MIN_PARALLEL_NODES,
            #[cfg(feature = "parallel")]
            thread_pool: None,
        }
    }
}

impl RehashConfig {
    /// The default configuration with another threshold.
    #[must_use]
    // Without `parallel` the threshold is the only field; the update keeps one body for both.
    #[allow(clippy::needless_update)]
    pub fn with_min_parallel_nodes(min_parallel_nodes: usize) -> Self {
        Self {
            min_parallel_nodes,
            ..Self::default()
        }
    }
}

/// A tree's node storage as the rehash engine sees it.
pub trait NodeLevels<H: Hasher> {
    /// Storage failure (`Infallible` for in-memory trees).
    type Error;

    /// Clears `out`, then appends the two children (at `child_level`) of every parent in
    /// `parents` (strictly increasing indices at `child_level + 1`): `2 * parents.len()` nodes.
    ///
    /// # Errors
    /// A storage read failure.
    fn read_children(
        &self,
        child_level: u8,
        parents: &[u64],
        out: &mut Vec<Digest<H>>,
    ) -> Result<(), Self::Error>;

    /// Stores `values[i]` at `(level, indices[i])`; `indices` strictly increasing. A level may be
    /// written in several calls (chunks), each with indices above the previous call's.
    ///
    /// # Errors
    /// A storage write failure.
    fn write_level(
        &mut self,
        level: u8,
        indices: &[u64],
        values: &[Digest<H>],
    ) -> Result<(), Self::Error>;
}

/// `parents[i] = hash_pair(children[2i], children[2i+1])`, on rayon when
/// `parents.len() >= min_parallel_nodes` (and the `parallel` feature is on), sequentially
/// otherwise. Both paths call [`Hasher::hash_level`] on chunks, so a batched hasher is used in
/// each.
pub fn hash_level<H: Hasher>(
    children: &[Digest<H>],
    parents: &mut [Digest<H>],
    config: &RehashConfig,
) {
    #[cfg(feature = "parallel")]
    if parents.len() >= config.min_parallel_nodes {
        use rayon::prelude::*;
        let mut run = move || {
            // A few chunks per thread balances uneven hash costs without per-node task overhead.
            let chunks = rayon::current_num_threads().saturating_mul(4).max(1);
            // Whole batches per chunk, so a batched hasher's lanes are full but for the last.
            let batch = H::BATCH.max(1);
            let chunk = parents.len().div_ceil(chunks).div_ceil(batch).max(1) * batch;
            parents
                .par_chunks_mut(chunk)
                .zip(children.par_chunks(2 * chunk))
                .for_each(|(p, c)| H::hash_level(c, p));
        };
        match &config.thread_pool {
            Some(pool) => pool.install(run),
            None => run(),
        }
        return;
    }
    #[cfg(not(feature = "parallel"))]
    let _ = config;
    H::hash_level(children, parents);
}

/// Writes validated leaf `writes` (sorted, unique; `None` = empty leaf) into level 0 of `store`
/// and recomputes every ancestor up to the root, level by level.
///
/// # Errors
/// The first storage error; the caller decides what a partial write means (in-memory stores are
/// infallible; the persistent tree writes into an overlay it discards on error).
pub fn apply_writes<H: Hasher, S: NodeLevels<H> + ?Sized>(
    store: &mut S,
    depth: Depth,
    writes: &[(u64, Option<Digest<H>>)],
    config: &RehashConfig,
) -> Result<(), S::Error> {
    if writes.is_empty() {
        return Ok(());
    }
    let empty = H::empty_leaf();
    let mut indices = Vec::with_capacity(writes.len().min(REHASH_CHUNK));
    let mut values = Vec::with_capacity(writes.len().min(REHASH_CHUNK));
    for chunk in writes.chunks(REHASH_CHUNK) {
        indices.clear();
        values.clear();
        indices.extend(chunk.iter().map(|w| w.0));
        values.extend(chunk.iter().map(|w| w.1.unwrap_or(empty)));
        store.write_level(0, &indices, &values)?;
    }
    drop((indices, values));
    update_hashes(store, depth, writes.iter().map(|w| w.0).collect(), config)
}

/// Parents hashed per step of a level: bounds the children/hash buffers (2^14 parents ≈ 1.5 MiB
/// for BN254) however large the batch, while leaving each step ample parallel work.
pub const REHASH_CHUNK: usize = 1 << 14;

/// Recomputes all ancestors of the (sorted, unique) dirty leaf indices.
///
/// # Errors
/// The first storage error.
pub fn update_hashes<H: Hasher, S: NodeLevels<H> + ?Sized>(
    store: &mut S,
    depth: Depth,
    dirty_leaves: Vec<u64>,
    config: &RehashConfig,
) -> Result<(), S::Error> {
    let mut dirty = dirty_leaves;
    let mut parents: Vec<u64> = Vec::with_capacity(dirty.len() / 2 + 1);
    let mut children: Vec<Digest<H>> = Vec::new();
    let mut hashes: Vec<Digest<H>> = Vec::new();
    for child_level in 0..depth.get() {
        parents.clear();
        for &index in &dirty {
            let parent = index >> 1;
            if parents.last() != Some(&parent) {
                parents.push(parent);
            }
        }
        for chunk in parents.chunks(REHASH_CHUNK) {
            store.read_children(child_level, chunk, &mut children)?;
            hashes.clear();
            hashes.resize(chunk.len(), Digest::<H>::default());
            hash_level::<H>(&children, &mut hashes, config);
            store.write_level(child_level + 1, chunk, &hashes)?;
        }
        std::mem::swap(&mut dirty, &mut parents);
    }
    Ok(())
}
