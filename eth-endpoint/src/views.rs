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
use follower::profile::{canonical, to_u256, IMembershipSet as C};
use follower::{membership_info, BlockMeta, HISTORY_SIZE};
use hasher::{Fr, PoseidonHasher};
use tree_core::MerkleTree;
use tree_engines::DbTree;

/// Most leaves one `getRateCommitmentsInRangeBoundsInclusive` answered here returns; a larger
/// page goes to the node, whose gas limit decides.
pub const MAX_LOCAL_PAGE: u64 = 10_000;

/// The encoded result of the view `data` calls, from `tree` and its last block's `meta`; `None`
/// when the node must answer.
#[must_use]
pub fn answer(tree: &DbTree<PoseidonHasher>, meta: &BlockMeta, data: &[u8]) -> Option<Bytes> {
    let selector: [u8; 4] = data.get(..4)?.try_into().ok()?;
    let encoded = match selector {
        C::rootCall::SELECTOR => {
            exact::<C::rootCall>(data)?;
            C::rootCall::abi_encode_returns(&to_u256(&tree.root()))
        }
        C::nextFreeIndexCall::SELECTOR => {
            exact::<C::nextFreeIndexCall>(data)?;
            let next = u32::try_from(tree.next_index()).ok()?;
            C::nextFreeIndexCall::abi_encode_returns(&next)
        }
        C::MERKLE_TREE_DEPTHCall::SELECTOR => {
            exact::<C::MERKLE_TREE_DEPTHCall>(data)?;
            C::MERKLE_TREE_DEPTHCall::abi_encode_returns(&tree.depth().get())
        }
        C::getMerkleProofCall::SELECTOR => {
            let call = exact::<C::getMerkleProofCall>(data)?;
            let index: u64 = call.index.to();
            // Past the capacity the contract reverts ("index out of range").
            if index >= tree.capacity() {
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
            C::getMerkleProofCall::abi_encode_returns(&path)
        }
        C::getRateCommitmentsInRangeBoundsInclusiveCall::SELECTOR => {
            let call = exact::<C::getRateCommitmentsInRangeBoundsInclusiveCall>(data)?;
            let (start, end) = (u64::from(call.startIndex), u64::from(call.endIndex));
            // InvalidPaginationQuery(start, end): the node's revert, with its own data.
            if start > end || end >= tree.next_index() || end - start + 1 > MAX_LOCAL_PAGE {
                return None;
            }
            let leaves = (start..=end)
                .map(|i| tree.get(i).map(|leaf| to_u256(&leaf)))
                .collect::<Result<Vec<_>, _>>()
                .ok()?;
            C::getRateCommitmentsInRangeBoundsInclusiveCall::abi_encode_returns(&leaves)
        }
        C::HISTORY_SIZECall::SELECTOR => {
            exact::<C::HISTORY_SIZECall>(data)?;
            meta.roots?;
            C::HISTORY_SIZECall::abi_encode_returns(&u8::try_from(HISTORY_SIZE).ok()?)
        }
        C::getRecentRootsCall::SELECTOR => {
            exact::<C::getRecentRootsCall>(data)?;
            let recent = meta.roots?.recent_roots().map(|r| to_u256(&r));
            C::getRecentRootsCall::abi_encode_returns(&recent)
        }
        C::getRootAtCall::SELECTOR => {
            let call = exact::<C::getRootAtCall>(data)?;
            // "Out of range", "No roots yet": the node's reverts.
            let root = meta.roots?.root_at(call.position).ok()?;
            C::getRootAtCall::abi_encode_returns(&to_u256(&root))
        }
        C::isInMembershipSetCall::SELECTOR => {
            let call = exact::<C::isInMembershipSetCall>(data)?;
            let (_, _, leaf) = member(tree, meta, call.idCommitment)?;
            C::isInMembershipSetCall::abi_encode_returns(&(leaf != Fr::from(0u64)))
        }
        C::getMembershipInfoCall::SELECTOR => {
            let call = exact::<C::getMembershipInfoCall>(data)?;
            let (rate_limit, index, leaf) = member(tree, meta, call.idCommitment)?;
            C::getMembershipInfoCall::abi_encode_returns(&C::getMembershipInfoReturn {
                _0: rate_limit,
                _1: index,
                _2: to_u256(&leaf),
            })
        }
        C::deployedBlockNumberCall::SELECTOR => {
            exact::<C::deployedBlockNumberCall>(data)?;
            let deployed = u32::try_from(meta.members_from?).ok()?;
            C::deployedBlockNumberCall::abi_encode_returns(&deployed)
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
fn exact<T: SolCall>(data: &[u8]) -> Option<T> {
    let call = T::abi_decode_validate(data).ok()?;
    (call.abi_encode() == data).then_some(call)
}
