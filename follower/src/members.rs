//! Members by id: `idCommitment → (rate limit, index)` as the contract's `memberships` mapping
//! holds it, kept in the tree's records ([`tree_core::UpdateBatch::put_record`]) so every
//! block's changes to it land in the block's commit and a rewind restores it with the leaves.
//! `getMembershipInfo` and `isInMembershipSet` read the leaf at the index from the tree, as the
//! contract does.

use hasher::{Fr, PoseidonHasher};
use tree_core::MerkleTree;
use tree_engines::DbTree;

use crate::{FollowError, FollowedTree};

/// A current member, as the contract stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberInfo {
    /// The membership's rate limit (never 0 for a member).
    pub rate_limit: u32,
    /// The member's leaf index.
    pub index: u32,
}

/// The record key of member `id`: `m` and the id, 32 bytes big-endian.
#[must_use]
pub fn member_key(id: &Fr) -> [u8; 33] {
    let mut key = [0u8; 33];
    key[0] = b'm';
    key[1..].copy_from_slice(&hasher::fr_to_be_bytes(id));
    key
}

impl MemberInfo {
    /// The stored bytes: rate limit and index, `u32` big-endian each.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        out.extend_from_slice(&self.rate_limit.to_be_bytes());
        out.extend_from_slice(&self.index.to_be_bytes());
        out
    }

    /// Decodes stored bytes.
    ///
    /// # Errors
    /// [`FollowError::BadMetadata`] for anything but 8 bytes with a non-zero rate limit.
    pub fn decode(bytes: &[u8]) -> Result<Self, FollowError> {
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
        };
        match (bytes.len(), word(0), word(4)) {
            (8, Some(rate_limit), Some(index)) if rate_limit != 0 => Ok(Self { rate_limit, index }),
            _ => Err(FollowError::BadMetadata(format!(
                "a member record of {} bytes that is not (rate limit, index)",
                bytes.len()
            ))),
        }
    }
}

/// Member `id` in `tree`'s index, if it is a member. Only meaningful where the block's
/// metadata says the index is complete ([`BlockMeta::members_from`](crate::BlockMeta)).
///
/// # Errors
/// A store failure or a damaged record.
pub fn member(tree: &FollowedTree, id: &Fr) -> Result<Option<MemberInfo>, FollowError> {
    let key = member_key(id);
    match tree.read(|t| t.record(&key))? {
        Some(bytes) => MemberInfo::decode(&bytes).map(Some),
        None => Ok(None),
    }
}

/// What the contract's `getMembershipInfo(id)` answers, from `tree`: the member's rate limit,
/// index and the leaf at that index; zeros for a non-member. `isInMembershipSet(id)` is the
/// leaf being non-zero. Called inside [`FollowedTree::read`](tree_core::persistent::SharedTree::read).
///
/// # Errors
/// A store failure or a damaged record.
pub fn membership_info(
    tree: &DbTree<PoseidonHasher>,
    id: &Fr,
) -> Result<(u32, u32, Fr), FollowError> {
    let Some(bytes) = tree.record(&member_key(id))? else {
        return Ok((0, 0, Fr::from(0u64)));
    };
    let info = MemberInfo::decode(&bytes)?;
    let leaf = tree.get(u64::from(info.index))?;
    Ok((info.rate_limit, info.index, leaf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_refuse_damage() {
        let info = MemberInfo {
            rate_limit: 20,
            index: 1 << 19,
        };
        assert_eq!(MemberInfo::decode(&info.encode()).ok(), Some(info));
        assert!(MemberInfo::decode(&info.encode()[..7]).is_err());
        assert!(MemberInfo::decode(&[0, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert_eq!(member_key(&Fr::from(1u64))[32], 1);
    }
}
