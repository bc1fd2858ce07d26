//! The one way a block lands in a tree: its changes, its metadata and its checkpoint in one
//! atomic commit. `canopy demo`, `apply`, `serve` and `follow` all go through [`commit_block`].

use alloy::primitives::{Address, B256};
use hasher::{Fr, PoseidonHasher};
use tree_core::UpdateBatch;
use tree_engines::{DbTree, SharedDbTree as SharedTree};

use crate::members::{member_key, MemberInfo};
use crate::roots::{RootHistory, HISTORY_SIZE};
use crate::FollowError;

/// The chain and contract a followed database mirrors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainBinding {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The membership contract.
    pub contract: Address,
}

/// What the tree's metadata says about the last block applied; every checkpoint carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockMeta {
    /// Block number (the checkpoint id).
    pub number: u64,
    /// Block hash, when the block came from a chain.
    pub hash: Option<B256>,
    /// The chain and contract, when the block came from a follower.
    pub binding: Option<ChainBinding>,
    /// The contract's root history after the block, when the contract keeps one.
    pub roots: Option<RootHistory>,
    /// When the member index ([`crate::members`]) holds every member at this block: the
    /// contract's deployment block, from which it was built. `None`: not indexed (yet).
    pub members_from: Option<u64>,
}

const MAGIC: &[u8; 4] = b"CNB1";
const FLAG_HASH: u8 = 1;
const FLAG_BINDING: u8 = 2;
const FLAG_ROOTS: u8 = 4;
const FLAG_MEMBERS: u8 = 8;
/// The fixed part; with [`FLAG_MEMBERS`] the deployment block (8 bytes) follows, then with
/// [`FLAG_ROOTS`] a count byte and that many 32-byte roots.
const ENCODED_LEN: usize = 4 + 1 + 8 + 32 + 8 + 20;

impl BlockMeta {
    /// A block with a number only (events files, the demo).
    #[must_use]
    pub fn number(number: u64) -> Self {
        Self {
            number,
            hash: None,
            binding: None,
            roots: None,
            members_from: None,
        }
    }

    /// The stored bytes: `CNB1`, flags, number (BE), hash, chain id (BE), contract; then, with a
    /// complete member index, the block it was built from (BE); then, with a root history, its
    /// length and roots (BE, newest first).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODED_LEN);
        out.extend_from_slice(MAGIC);
        let flags = if self.hash.is_some() { FLAG_HASH } else { 0 }
            | if self.binding.is_some() {
                FLAG_BINDING
            } else {
                0
            }
            | if self.roots.is_some() { FLAG_ROOTS } else { 0 }
            | if self.members_from.is_some() {
                FLAG_MEMBERS
            } else {
                0
            };
        out.push(flags);
        out.extend_from_slice(&self.number.to_be_bytes());
        out.extend_from_slice(self.hash.unwrap_or_default().as_slice());
        let binding = self.binding.unwrap_or(ChainBinding {
            chain_id: 0,
            contract: Address::ZERO,
        });
        out.extend_from_slice(&binding.chain_id.to_be_bytes());
        out.extend_from_slice(binding.contract.as_slice());
        if let Some(from) = self.members_from {
            out.extend_from_slice(&from.to_be_bytes());
        }
        if let Some(history) = &self.roots {
            out.push(history.len());
            for root in history.roots() {
                out.extend_from_slice(&hasher::fr_to_be_bytes(root));
            }
        }
        out
    }

    /// Decodes stored metadata: empty is "no block yet"; 8 bytes is an older database's bare
    /// block number.
    ///
    /// # Errors
    /// [`FollowError::BadMetadata`] for anything else.
    pub fn decode(bytes: &[u8]) -> Result<Option<Self>, FollowError> {
        if bytes.is_empty() {
            return Ok(None);
        }
        if let Ok(number) = <[u8; 8]>::try_from(bytes) {
            return Ok(Some(Self::number(u64::from_be_bytes(number))));
        }
        let not_a_record = || {
            FollowError::BadMetadata(format!("{} bytes that are not a block record", bytes.len()))
        };
        if bytes.len() < ENCODED_LEN || &bytes[..4] != MAGIC {
            return Err(not_a_record());
        }
        let flags = bytes[4];
        if flags & !(FLAG_HASH | FLAG_BINDING | FLAG_ROOTS | FLAG_MEMBERS) != 0 {
            return Err(FollowError::BadMetadata(format!(
                "unknown flags {flags:#x}"
            )));
        }
        let mut rest = &bytes[ENCODED_LEN..];
        let members_from = if flags & FLAG_MEMBERS == 0 {
            None
        } else {
            let (from, after) = rest.split_first_chunk::<8>().ok_or_else(not_a_record)?;
            rest = after;
            Some(u64::from_be_bytes(*from))
        };
        let roots = if flags & FLAG_ROOTS == 0 {
            None
        } else {
            let (&count, words) = rest.split_first().ok_or_else(not_a_record)?;
            let count = usize::from(count);
            if count > HISTORY_SIZE || words.len() != 32 * count {
                return Err(not_a_record());
            }
            let mut roots = Vec::with_capacity(count);
            for word in words.chunks_exact(32) {
                roots.push(hasher::fr_from_be_bytes(word).map_err(|_| {
                    FollowError::BadMetadata("a stored root is not a field element".into())
                })?);
            }
            rest = &[];
            Some(RootHistory::from_newest_first(&roots))
        };
        if !rest.is_empty() {
            return Err(not_a_record());
        }
        let word = |range: std::ops::Range<usize>| -> u64 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[range]);
            u64::from_be_bytes(b)
        };
        let number = word(5..13);
        let hash = (flags & FLAG_HASH != 0).then(|| B256::from_slice(&bytes[13..45]));
        let binding = (flags & FLAG_BINDING != 0).then(|| ChainBinding {
            chain_id: word(45..53),
            contract: Address::from_slice(&bytes[53..73]),
        });
        Ok(Some(Self {
            number,
            hash,
            binding,
            roots,
            members_from,
        }))
    }
}

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
    /// [`commit_block`] tries the shorter suffixes against `root` when it does not match.
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
    fn undecided(&self, step: usize) -> Option<usize> {
        self.erasures
            .iter()
            .find(|(s, _)| *s == step)
            .map(|&(_, k)| k)
    }

    /// These changes with the first `lazy` of the `k` deletions before stored root `step`
    /// taken as lazy erasures (no tree change): the full erasure was the last `k - lazy`.
    fn with_lazy_erasures(&self, step: usize, lazy: usize) -> Self {
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
    fn suffix_probe(&self, step: usize) -> Option<Vec<UpdateBatch<PoseidonHasher>>> {
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

/// Why [`commit_block`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The root after the block would not be the expected one.
    #[error("root after block {block} would be {ours}, expected {expected}")]
    RootMismatch {
        /// The block.
        block: u64,
        /// Ours, 0x hex.
        ours: String,
        /// Expected, 0x hex.
        expected: String,
    },
    /// The tree refused the block (a rule) or the store failed.
    #[error(transparent)]
    Tree(#[from] tree_engines::DbTreeError),
}

impl From<CommitError> for FollowError {
    fn from(e: CommitError) -> Self {
        match e {
            CommitError::RootMismatch {
                block,
                ours,
                expected,
            } => Self::RootMismatch {
                block,
                ours,
                contract: expected,
            },
            CommitError::Tree(e) => Self::Tree(e),
        }
    }
}

/// Lands a block: `changes`, `meta` as the tree's metadata and a checkpoint named by the block
/// number, in one atomic store commit. Every root the contract stored within the block is
/// compared with the tree's root after the same changes, and with `expected_root` the root
/// after the block; nothing is written when one differs. A full erasure that does not give its
/// stored root with all the deletions before it is tried with each shorter suffix of them
/// (the transaction's earlier calls erased lazily): the one whose root matches is taken, found
/// with one more hashing of the block (every suffix's root in one pass). Returns the new root.
///
/// # Errors
/// [`CommitError`]: a tree rule, a store failure, a root mismatch; nothing is written.
pub fn commit_block(
    tree: &SharedTree<PoseidonHasher>,
    meta: &BlockMeta,
    changes: &BlockChanges,
    expected_root: Option<Fr>,
) -> Result<Fr, CommitError> {
    let mut changes = std::borrow::Cow::Borrowed(changes);
    loop {
        match try_commit(tree, meta, &changes, expected_root)? {
            Ok(root) => return Ok(root),
            Err(mismatch) => {
                let resolved = match mismatch.step {
                    Some(step) => resolve_erasure(tree, meta, &changes, step)?,
                    None => None,
                };
                match resolved {
                    Some(lazy) => {
                        let step = mismatch.step.unwrap_or_default();
                        changes = std::borrow::Cow::Owned(changes.with_lazy_erasures(step, lazy));
                    }
                    None => {
                        return Err(CommitError::RootMismatch {
                            block: meta.number,
                            ours: fr_hex(&mismatch.ours),
                            expected: fr_hex(&mismatch.expected),
                        })
                    }
                }
            }
        }
    }
}

/// Where a block's roots first differed from the contract's: at stored root `step` (`None`:
/// the root after the block).
struct Mismatch {
    step: Option<usize>,
    ours: Fr,
    expected: Fr,
}

/// One attempt of [`commit_block`]: committed (the new root), or the first mismatch.
fn try_commit(
    tree: &SharedTree<PoseidonHasher>,
    meta: &BlockMeta,
    changes: &BlockChanges,
    expected_root: Option<Fr>,
) -> Result<Result<Fr, Mismatch>, CommitError> {
    let mut new_root = Fr::from(0u64);
    // Without stored roots the block is one step, and its root the one compared.
    let outcome =
        tree.apply_checkpointed_steps_if(changes.to_steps(meta), meta.number, |roots| {
            for (step, (ours, stored)) in roots.iter().zip(changes.stored_roots()).enumerate() {
                if *ours != stored {
                    return Err(Mismatch {
                        step: Some(step),
                        ours: *ours,
                        expected: stored,
                    });
                }
            }
            new_root = roots.last().copied().unwrap_or_default();
            match expected_root {
                Some(expected) if expected != new_root => Err(Mismatch {
                    step: None,
                    ours: new_root,
                    expected,
                }),
                _ => Ok(()),
            }
        })?;
    Ok(outcome.map(|()| new_root))
}

/// For a full erasure at stored root `step` whose deletions did not give the stored root: how
/// many of its first deletions were lazy erasures of earlier calls, the one split whose root
/// is the stored root (`None`: no split gives it, or the step is no such erasure). Hashes the
/// block up to the step once, writes nothing.
fn resolve_erasure(
    tree: &SharedTree<PoseidonHasher>,
    meta: &BlockMeta,
    changes: &BlockChanges,
    step: usize,
) -> Result<Option<usize>, CommitError> {
    let (Some(probe), Some(k), Some(stored)) = (
        changes.suffix_probe(step),
        changes.undecided(step),
        changes.stored_roots().nth(step),
    ) else {
        return Ok(None);
    };
    let mut lazy = None;
    // Never accepted: the roots are read and nothing is published.
    let _ = tree.apply_checkpointed_steps_if(probe, meta.number, |roots| {
        // The last k roots are those after the last 1, 2, … k deletions.
        let suffixes = &roots[roots.len().saturating_sub(k)..];
        lazy = suffixes
            .iter()
            .position(|root| *root == stored)
            .map(|full| k - (full + 1));
        Err(())
    })?;
    Ok(lazy.filter(|&lazy| lazy > 0))
}

/// `0x` + 64 hex digits, big-endian: how field elements are printed.
#[must_use]
pub fn fr_hex(value: &Fr) -> String {
    format!("{:#066x}", crate::profile::to_u256(value))
}

/// The last block a tree holds, from its metadata: the one reading of it that the follower, the
/// server, the JSON-RPC endpoint and every command share (`None` before the first block).
///
/// # Errors
/// Damaged metadata, store errors.
pub fn read_block(tree: &DbTree<PoseidonHasher>) -> Result<Option<BlockMeta>, FollowError> {
    let bytes = tree_core::MerkleTree::metadata(tree)?;
    BlockMeta::decode(&bytes)
}

/// [`read_block`] of a shared tree, under its read lock.
///
/// # Errors
/// As [`read_block`].
pub fn last_block(tree: &SharedTree<PoseidonHasher>) -> Result<Option<BlockMeta>, FollowError> {
    tree.read(read_block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_refuses_damage() {
        let full = BlockMeta {
            number: 77,
            hash: Some(B256::repeat_byte(7)),
            binding: Some(ChainBinding {
                chain_id: 31337,
                contract: Address::repeat_byte(9),
            }),
            roots: None,
            members_from: None,
        };
        let mut history = RootHistory::default();
        let mut with_roots = Vec::new();
        for r in 0..7u64 {
            with_roots.push(BlockMeta {
                roots: Some(history),
                ..full
            });
            history.push(Fr::from(r * 1000 + 1));
        }
        let indexed = BlockMeta {
            members_from: Some(12),
            ..full
        };
        let indexed_with_roots = BlockMeta {
            roots: Some(history),
            ..indexed
        };
        for meta in
            with_roots
                .into_iter()
                .chain([full, BlockMeta::number(5), indexed, indexed_with_roots])
        {
            assert_eq!(BlockMeta::decode(&meta.encode()).ok().flatten(), Some(meta));
        }
        assert_eq!(
            BlockMeta::decode(&9u64.to_be_bytes()).ok().flatten(),
            Some(BlockMeta::number(9))
        );
        assert!(matches!(BlockMeta::decode(&[]), Ok(None)));
        let mut bad = full.encode();
        bad[4] = 0x80;
        assert!(BlockMeta::decode(&bad).is_err());
        assert!(BlockMeta::decode(&bad[..20]).is_err());
        assert!(BlockMeta::decode(b"XXXX").is_err());
        let mut rooted = BlockMeta {
            roots: Some(RootHistory::from_newest_first(&[Fr::from(1u64)])),
            ..full
        }
        .encode();
        assert!(BlockMeta::decode(&rooted[..rooted.len() - 1]).is_err());
        rooted[ENCODED_LEN] = 6;
        assert!(BlockMeta::decode(&rooted).is_err());
        rooted[ENCODED_LEN] = 1;
        rooted[ENCODED_LEN + 1..].fill(0xff);
        assert!(
            BlockMeta::decode(&rooted).is_err(),
            "a root past the modulus"
        );
    }

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

    /// One transaction, two calls: `eraseMemberships([a])` (lazy, no root) then
    /// `eraseMemberships([b, c], true)` (full, one `RootStored`): only b and c leave the tree,
    /// found from the stored root; a root no split gives is refused and nothing is written.
    #[test]
    fn a_full_erasure_after_lazy_ones_in_one_transaction_is_found_by_its_root() {
        use crate::calls::changes_by_call;
        use crate::profile::MembershipEvent;
        use tree_core::{Depth, MerkleTree};
        use tree_engines::DbConfig;

        let open = |dir: &std::path::Path| {
            let tree = DbTree::<PoseidonHasher>::open(&DbConfig::new(dir), Depth::new(20).unwrap())
                .unwrap();
            SharedTree::new(tree)
        };
        let (dir, scratch_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (tree, scratch) = (open(dir.path()), open(scratch_dir.path()));
        let mut first = BlockChanges::new();
        for index in 0..5u64 {
            first.set(index, Fr::from(index + 11));
        }
        for t in [&tree, &scratch] {
            commit_block(t, &BlockMeta::number(1), &first, None).unwrap();
        }
        // The root after deleting only b = 2 and c = 3.
        let mut only_full = BlockChanges::new();
        only_full.delete(2).delete(3);
        let root = commit_block(&scratch, &BlockMeta::number(2), &only_full, None).unwrap();

        let tx = Some((0, alloy::primitives::B256::ZERO));
        let erased = |index: u64| {
            (
                tx,
                MembershipEvent::Erased {
                    index,
                    id: Fr::from(index + 100),
                },
            )
        };
        let stored = |root: Fr| (tx, MembershipEvent::RootStored { root });
        let events = [erased(1), erased(2), erased(3), stored(root)];
        let changes = changes_by_call(events, 5).unwrap();

        // A root that no split gives: refused, nothing written.
        let mut wrong =
            changes_by_call([erased(1), erased(2), erased(3), stored(Fr::from(7u64))], 5).unwrap();
        let before = tree.read(MerkleTree::root);
        assert!(matches!(
            commit_block(&tree, &BlockMeta::number(2), &wrong, None),
            Err(CommitError::RootMismatch { .. })
        ));
        assert_eq!(tree.read(MerkleTree::root), before);
        wrong = changes;
        let committed = commit_block(&tree, &BlockMeta::number(2), &wrong, None).unwrap();
        assert_eq!(committed, root);
        let leaves: Vec<Fr> = (0..5).map(|i| tree.read(|t| t.get(i)).unwrap()).collect();
        let zero = Fr::from(0u64);
        assert_eq!(
            leaves,
            [
                Fr::from(11u64),
                Fr::from(12u64),
                zero,
                zero,
                Fr::from(15u64)
            ],
            "the lazily erased leaf stays"
        );
        // All of a transaction's erasures full (the usual case) still lands as one attempt.
        let mut all = BlockChanges::new();
        all.delete(0).delete(4);
        let root = commit_block(&scratch, &BlockMeta::number(3), &all, None).unwrap();
        let changes = changes_by_call([erased(0), erased(4), stored(root)], 5).unwrap();
        assert_eq!(
            commit_block(&tree, &BlockMeta::number(3), &changes, None).unwrap(),
            root
        );
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
