//! The followed contract's views, answered from the tree: `root()`, `nextFreeIndex()`,
//! `MERKLE_TREE_DEPTH()`, `getMerkleProof(uint40)` and
//! `getRateCommitmentsInRangeBoundsInclusive(uint32,uint32)`, and for a contract with a root
//! history `HISTORY_SIZE()`, `getRecentRoots()` and `getRootAt(uint8)` (from the history in the
//! block's metadata), and once the member index is complete `isInMembershipSet(uint256)`,
//! `getMembershipInfo(uint256)` and `deployedBlockNumber()`, ABI-encoded as the contract returns them. Calldata that is not exactly one of them (another selector, extra or short
//! bytes, unclean words), and calls the contract would revert, are not answered here: the node
//! answers them, so their errors are its own.

use alloy::primitives::{Bytes, U256};
use alloy::sol_types::SolCall;
use follower::profile::{canonical, to_u256, IMembershipSet as Views};
use follower::{membership_info, BlockMeta, HISTORY_SIZE};
use hasher::{Fr, PoseidonHasher};
use tree_core::MerkleTree;
use tree_engines::DbTree;

/// Most leaves one `getRateCommitmentsInRangeBoundsInclusive` answered here returns by default;
/// a larger page goes to the node, whose gas limit decides.
pub const MAX_LOCAL_PAGE: u64 = 10_000;

/// What answering `data` here costs, in 32-byte words of the answer (a page's leaves, a
/// proof's siblings), known from the calldata alone, before any work: what the endpoint meters.
#[must_use]
pub fn words(data: &[u8]) -> u64 {
    match data.get(..4).and_then(|s| <[u8; 4]>::try_from(s).ok()) {
        Some(Views::getRateCommitmentsInRangeBoundsInclusiveCall::SELECTOR) => {
            Views::getRateCommitmentsInRangeBoundsInclusiveCall::abi_decode(data).map_or(1, |c| {
                u64::from(c.endIndex).saturating_sub(u64::from(c.startIndex)) + 3
            })
        }
        Some(Views::getMerkleProofCall::SELECTOR) => 20,
        Some(Views::getRecentRootsCall::SELECTOR) => 5,
        Some(Views::getMembershipInfoCall::SELECTOR) => 3,
        _ => 1,
    }
}

/// The encoded result of the view `data` calls, from `tree` and its last block's `meta`; `None`
/// when the node must answer (pages of more than `max_page` leaves too).
#[must_use]
pub fn answer(
    tree: &DbTree<PoseidonHasher>,
    meta: &BlockMeta,
    data: &[u8],
    max_page: u64,
) -> Option<Bytes> {
    let selector: [u8; 4] = data.get(..4)?.try_into().ok()?;
    let encoded = match selector {
        Views::rootCall::SELECTOR => {
            canonical_call::<Views::rootCall>(data)?;
            Views::rootCall::abi_encode_returns(&to_u256(&tree.root()))
        }
        Views::nextFreeIndexCall::SELECTOR => {
            canonical_call::<Views::nextFreeIndexCall>(data)?;
            let next = u32::try_from(tree.next_index()).ok()?;
            Views::nextFreeIndexCall::abi_encode_returns(&next)
        }
        Views::MERKLE_TREE_DEPTHCall::SELECTOR => {
            canonical_call::<Views::MERKLE_TREE_DEPTHCall>(data)?;
            Views::MERKLE_TREE_DEPTHCall::abi_encode_returns(&tree.depth().get())
        }
        Views::getMerkleProofCall::SELECTOR => {
            let call = canonical_call::<Views::getMerkleProofCall>(data)?;
            let index: u64 = call.index.to();
            // zk-kit's LazyIMT proves only leaves that exist: from `nextFreeIndex()` on (the
            // capacity included) the contract reverts "LazyIMT: leaf must exist", the node's
            // answer to give.
            if index >= tree.next_index() {
                return None;
            }
            let proof = tree.proof(index).ok()?;
            let path: [U256; 20] = proof
                .path_elements()
                .iter()
                .map(to_u256)
                .collect::<Vec<_>>()
                .try_into()
                .ok()?;
            Views::getMerkleProofCall::abi_encode_returns(&path)
        }
        Views::getRateCommitmentsInRangeBoundsInclusiveCall::SELECTOR => {
            let call = canonical_call::<Views::getRateCommitmentsInRangeBoundsInclusiveCall>(data)?;
            let (start, end) = (u64::from(call.startIndex), u64::from(call.endIndex));
            // InvalidPaginationQuery(start, end): the node's revert, with its own data.
            if start > end || end >= tree.next_index() || end - start + 1 > max_page {
                return None;
            }
            let leaves = (start..=end)
                .map(|i| tree.get(i).map(|leaf| to_u256(&leaf)))
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            Views::getRateCommitmentsInRangeBoundsInclusiveCall::abi_encode_returns(&leaves)
        }
        Views::HISTORY_SIZECall::SELECTOR => {
            canonical_call::<Views::HISTORY_SIZECall>(data)?;
            meta.roots?;
            Views::HISTORY_SIZECall::abi_encode_returns(&u8::try_from(HISTORY_SIZE).ok()?)
        }
        Views::getRecentRootsCall::SELECTOR => {
            canonical_call::<Views::getRecentRootsCall>(data)?;
            let recent = meta.roots?.recent_roots().map(|r| to_u256(&r));
            Views::getRecentRootsCall::abi_encode_returns(&recent)
        }
        Views::getRootAtCall::SELECTOR => {
            let call = canonical_call::<Views::getRootAtCall>(data)?;
            // "Out of range", "No roots yet": the node's reverts.
            let root = meta.roots?.root_at(call.position).ok()?;
            Views::getRootAtCall::abi_encode_returns(&to_u256(&root))
        }
        Views::isInMembershipSetCall::SELECTOR => {
            let call = canonical_call::<Views::isInMembershipSetCall>(data)?;
            let (_, _, leaf) = member(tree, meta, call.idCommitment)?;
            Views::isInMembershipSetCall::abi_encode_returns(&(leaf != Fr::from(0u64)))
        }
        Views::getMembershipInfoCall::SELECTOR => {
            let call = canonical_call::<Views::getMembershipInfoCall>(data)?;
            let (rate_limit, index, leaf) = member(tree, meta, call.idCommitment)?;
            Views::getMembershipInfoCall::abi_encode_returns(&Views::getMembershipInfoReturn {
                _0: rate_limit,
                _1: index,
                _2: to_u256(&leaf),
            })
        }
        Views::deployedBlockNumberCall::SELECTOR => {
            canonical_call::<Views::deployedBlockNumberCall>(data)?;
            let deployed = u32::try_from(meta.members_from?).ok()?;
            Views::deployedBlockNumberCall::abi_encode_returns(&deployed)
        }
        _ => return None,
    };
    Some(encoded.into())
}

/// `getMembershipInfo(id)` from the member index, when the block's index is complete. An id
/// at or past the field modulus is no member (the contract refuses to register it).
fn member(tree: &DbTree<PoseidonHasher>, meta: &BlockMeta, id: U256) -> Option<(u32, u32, Fr)> {
    meta.members_from?;
    match canonical(id, "id") {
        Ok(id) => membership_info(tree, &id).ok(),
        Err(_) => Some((0, 0, Fr::from(0u64))),
    }
}

/// The call `data` encodes, when it is its one canonical encoding: no extra or missing bytes,
/// no dirty high bits in a short integer (the contract would answer those differently, or
/// revert).
fn canonical_call<T: SolCall>(data: &[u8]) -> Option<T> {
    let call = T::abi_decode_validate(data).ok()?;
    (call.abi_encode() == data).then_some(call)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tree_core::{Depth, UpdateBatch};
    use tree_engines::DbConfig;

    /// `getMerkleProof` is answered here only for a leaf that exists: from `nextFreeIndex()` on
    /// the contract's LazyIMT reverts ("LazyIMT: leaf must exist"), so the node answers.
    #[test]
    fn merkle_proofs_only_of_leaves_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        let mut tree =
            DbTree::<PoseidonHasher>::open(&DbConfig::new(dir.path()), Depth::new(20).unwrap())
                .unwrap();
        let mut batch = UpdateBatch::new();
        batch.set_range(0, [Fr::from(1u64), Fr::from(2u64), Fr::from(3u64)]);
        batch.delete(1); // a full erasure keeps its index below nextFreeIndex
        tree.apply(batch).unwrap();
        let meta = BlockMeta::number(7);
        let proof = |index: u64| {
            let call = Views::getMerkleProofCall {
                index: alloy::primitives::Uint::from(index),
            };
            answer(&tree, &meta, &call.abi_encode(), MAX_LOCAL_PAGE)
        };
        for index in [0, 1, 2] {
            assert!(proof(index).is_some(), "{index}");
        }
        for index in [3, 4, (1 << 20) - 1, 1 << 20, (1 << 40) - 1] {
            assert_eq!(proof(index), None, "{index}");
        }
    }
}
