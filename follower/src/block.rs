//! A block's record in the tree's metadata ([`BlockMeta`]: number, hash, chain and contract,
//! root history, member index) and the one reading of it back ([`read_block`]). The block's
//! changes are `changes`' and its commit `commit`'s: `canopy demo`, `apply`, `serve` and
//! `follow` all land blocks through [`commit_block`](crate::commit_block).

use alloy::primitives::{Address, B256};
use hasher::{Fr, PoseidonHasher};
use tree_engines::{DbTree, SharedDbTree as SharedTree};

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
}
