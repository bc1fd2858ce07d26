//! The on-disk layout: every key of a tree, in one sled tree (the database's default tree).
//!
//! | key                                   | value                                  |
//! |---------------------------------------|----------------------------------------|
//! | `M` `format_version`                  | `u32` big-endian, [`FORMAT_VERSION`]   |
//! | `M` `depth`                           | `u8`                                   |
//! | `M` `hasher`                          | the hasher's `ID`, UTF-8               |
//! | `M` `digest_len`                      | `u32` big-endian, the codec's `LEN`    |
//! | `M` `next_index`                      | `u64` big-endian                       |
//! | `M` `metadata`                        | the caller's bytes (absent = empty)    |
//! | `N` level:`u8` chunk:`u64` big-endian | nodes `chunk·16 .. chunk·16+15` of the level, each in its canonical encoding, in order (`16 × LEN` bytes) |
//! | `D` index:`u64` big-endian            | empty: the leaf slot was deleted       |
//! | `M` `history`                         | `max_checkpoints`, `root_window`: two `u64` big-endian (absent = defaults) |
//! | `C` id:`u64` big-endian               | a checkpoint: root (`LEN` bytes), `next_index` `u64` BE, metadata |
//! | `U` id:`u64` BE, then a key           | undo: that key's value at checkpoint `id`, `0` = absent or `1` + value |
//! | `M` `commits`                         | `u64` big-endian: batches committed (absent = 0); every batch bumps it, so after a failed commit one read tells whether it landed |
//!
//! Nodes are stored in chunks of [`CHUNK_NODES`] consecutive nodes of one level: one sled entry per
//! 16 nodes instead of one per node cuts sled's per-entry log and index overhead (disk, batch
//! and open time) by the same factor, and a membership set, which grows from index 0, fills its
//! chunks densely. Slots holding the empty subtree of their level are stored as that value; a
//! chunk whose slots are all empty is not stored (absent = empty), so a fresh tree holds only its
//! header. Big-endian chunk numbers make sled's byte order equal `(level, index)` order. The
//! header, nodes, `next_index`, deleted slots and metadata of one apply travel in one
//! `sled::Batch`, together with the undo records it adds to the newest checkpoint's frame.
//!
//! Undo records work on keys, not nodes: before an apply first overwrites a key after checkpoint
//! `id`, its previous value is stored under `U id key`. Rewinding to `id` writes back, per key,
//! the record of the oldest frame `>= id` (sled scans `U` keys in id order) and drops those
//! frames and later checkpoints, in one batch.

use tree_core::NodeAddr;

/// The layout version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Key of the format version.
pub const FORMAT_VERSION_KEY: &[u8] = b"Mformat_version";
/// Key of the depth.
pub const DEPTH_KEY: &[u8] = b"Mdepth";
/// Key of the hasher ID.
pub const HASHER_KEY: &[u8] = b"Mhasher";
/// Key of the digest length.
pub const DIGEST_LEN_KEY: &[u8] = b"Mdigest_len";
/// Key of `next_index`.
pub const NEXT_INDEX_KEY: &[u8] = b"Mnext_index";
/// Key of the caller's metadata.
pub const METADATA_KEY: &[u8] = b"Mmetadata";
/// Prefix of node keys.
pub const NODE_PREFIX: u8 = b'N';
/// Prefix of deleted-slot keys.
pub const DELETED_PREFIX: u8 = b'D';

/// Key of the commit counter.
pub const COMMITS_KEY: &[u8] = b"Mcommits";

/// Key of the persisted history configuration.
pub const HISTORY_KEY: &[u8] = b"Mhistory";
/// Prefix of checkpoint records.
pub const CHECKPOINT_PREFIX: u8 = b'C';
/// Prefix of undo records.
pub const UNDO_PREFIX: u8 = b'U';

/// log2 of [`CHUNK_NODES`].
pub const CHUNK_BITS: u8 = 4;
/// Nodes per stored chunk.
pub const CHUNK_NODES: usize = 1 << CHUNK_BITS;

/// A chunk: `CHUNK_NODES` consecutive nodes of one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkAddr {
    /// The level.
    pub level: u8,
    /// `index >> CHUNK_BITS` of its nodes.
    pub chunk: u64,
}

impl ChunkAddr {
    /// The chunk holding `addr`, and the node's slot in it.
    #[must_use]
    pub fn of(addr: NodeAddr) -> (Self, usize) {
        let slot = usize::try_from(addr.index & ((1 << CHUNK_BITS) - 1)).unwrap_or(0);
        (
            Self {
                level: addr.level,
                chunk: addr.index >> CHUNK_BITS,
            },
            slot,
        )
    }

    /// The node in `slot`.
    #[must_use]
    pub fn node(self, slot: usize) -> NodeAddr {
        NodeAddr {
            level: self.level,
            index: (self.chunk << CHUNK_BITS) | slot as u64,
        }
    }
}

/// `N | level | chunk BE`.
#[must_use]
pub fn chunk_key(chunk: ChunkAddr) -> [u8; 10] {
    let mut key = [0u8; 10];
    key[0] = NODE_PREFIX;
    key[1] = chunk.level;
    key[2..].copy_from_slice(&chunk.chunk.to_be_bytes());
    key
}

/// The key of the chunk holding `addr`.
#[must_use]
pub fn node_key(addr: NodeAddr) -> [u8; 10] {
    chunk_key(ChunkAddr::of(addr).0)
}

/// Parses a chunk key.
#[must_use]
pub fn parse_chunk_key(key: &[u8]) -> Option<ChunkAddr> {
    match key {
        [NODE_PREFIX, level, chunk @ ..] => Some(ChunkAddr {
            level: *level,
            chunk: u64::from_be_bytes(<[u8; 8]>::try_from(chunk).ok()?),
        }),
        _ => None,
    }
}

/// `D | index BE`.
#[must_use]
pub fn deleted_key(index: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = DELETED_PREFIX;
    key[1..].copy_from_slice(&index.to_be_bytes());
    key
}

/// Parses a deleted-slot key.
#[must_use]
pub fn parse_deleted_key(key: &[u8]) -> Option<u64> {
    match key {
        [DELETED_PREFIX, index @ ..] => Some(u64::from_be_bytes(<[u8; 8]>::try_from(index).ok()?)),
        _ => None,
    }
}

/// `C | id BE`.
#[must_use]
pub fn checkpoint_key(id: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = CHECKPOINT_PREFIX;
    key[1..].copy_from_slice(&id.to_be_bytes());
    key
}

/// Parses a checkpoint key.
#[must_use]
pub fn parse_checkpoint_key(key: &[u8]) -> Option<u64> {
    match key {
        [CHECKPOINT_PREFIX, id @ ..] => Some(u64::from_be_bytes(<[u8; 8]>::try_from(id).ok()?)),
        _ => None,
    }
}

/// `U | id BE`: the prefix of checkpoint `id`'s undo frame.
#[must_use]
pub fn undo_prefix(id: u64) -> [u8; 9] {
    let mut key = [0u8; 9];
    key[0] = UNDO_PREFIX;
    key[1..].copy_from_slice(&id.to_be_bytes());
    key
}

/// `U | id BE | key`.
#[must_use]
pub fn undo_key(id: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + key.len());
    out.extend_from_slice(&undo_prefix(id));
    out.extend_from_slice(key);
    out
}

/// Parses an undo key into its checkpoint id and the key it restores.
#[must_use]
pub fn parse_undo_key(key: &[u8]) -> Option<(u64, &[u8])> {
    match key {
        [UNDO_PREFIX, rest @ ..] if rest.len() > 8 => {
            let (id, original) = rest.split_at(8);
            Some((u64::from_be_bytes(<[u8; 8]>::try_from(id).ok()?), original))
        }
        _ => None,
    }
}

/// An undo record's value: `0` (the key was absent) or `1` followed by the value.
#[must_use]
pub fn encode_undo(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        None => vec![0],
        Some(bytes) => {
            let mut out = Vec::with_capacity(1 + bytes.len());
            out.push(1);
            out.extend_from_slice(bytes);
            out
        }
    }
}

/// Parses an undo record's value; `None` when malformed.
#[must_use]
pub fn decode_undo(bytes: &[u8]) -> Option<Option<&[u8]>> {
    match bytes {
        [0] => Some(None),
        [1, value @ ..] => Some(Some(value)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_keys_sort_by_level_then_index() {
        let a = node_key(NodeAddr {
            level: 0,
            index: 255,
        });
        let b = node_key(NodeAddr {
            level: 0,
            index: 256,
        });
        let c = node_key(NodeAddr { level: 1, index: 0 });
        assert!(a < b && b < c);
        assert_eq!(
            node_key(NodeAddr {
                level: 0,
                index: 257
            }),
            b
        );
        assert_eq!(
            parse_chunk_key(&b),
            Some(ChunkAddr {
                level: 0,
                chunk: 16
            })
        );
        assert_eq!(parse_chunk_key(&b[..9]), None);
        let (chunk, slot) = ChunkAddr::of(NodeAddr {
            level: 3,
            index: 35,
        });
        assert_eq!((chunk.chunk, slot), (2, 3));
        assert_eq!(
            chunk.node(slot),
            NodeAddr {
                level: 3,
                index: 35
            }
        );
        assert_eq!(parse_deleted_key(&deleted_key(7)), Some(7));
    }

    #[test]
    fn history_keys_round_trip_and_sort_by_id() {
        assert_eq!(parse_checkpoint_key(&checkpoint_key(9)), Some(9));
        let key = undo_key(3, &deleted_key(5));
        assert_eq!(parse_undo_key(&key), Some((3, &deleted_key(5)[..])));
        assert!(undo_key(3, b"Zzz") < undo_key(4, b"A"));
        assert_eq!(parse_undo_key(&undo_prefix(3)), None);
        assert_eq!(decode_undo(&encode_undo(None)), Some(None));
        assert_eq!(
            decode_undo(&encode_undo(Some(b"ab"))),
            Some(Some(&b"ab"[..]))
        );
        assert_eq!(decode_undo(&[2, 1]), None);
        assert_eq!(decode_undo(&[]), None);
    }
}
