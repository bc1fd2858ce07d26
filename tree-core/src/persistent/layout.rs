//! The on-disk layout: every key of a tree and every value's encoding, side by side, for every
//! engine. sled keeps these keys in its default tree, redb in one table; the bytes are the same,
//! so what a key means and how its value is read is written once, here.
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
//! | `R` key (1–64 bytes)                  | a record's value (`UpdateBatch::put_record`) |
//! | `U` id:`u64` BE, then a key           | undo: that key's value at checkpoint `id`, `0` = absent or `1` + value |
//! | `M` `commits`                         | `u64` big-endian: batches committed (absent = 0); every batch bumps it, so after a failed commit one read tells whether it landed |
//!
//! Nodes are stored in chunks of [`CHUNK_NODES`] consecutive nodes of one level: one store entry per
//! 16 nodes instead of one per node cuts the engine's per-entry log and index overhead (disk, batch
//! and open time) by the same factor, and a membership set, which grows from index 0, fills its
//! chunks densely. Slots holding the empty subtree of their level are stored as that value; a
//! chunk whose slots are all empty is not stored (absent = empty), so a fresh tree holds only its
//! header. Big-endian chunk numbers make the engine's byte order equal `(level, index)` order. The
//! header, nodes, `next_index`, deleted slots, records and metadata of one apply travel in one
//! [`StoreBatch`](super::StoreBatch) (one sled batch, one redb write transaction), together with the undo records it adds to the newest checkpoint's frame.
//!
//! Undo records work on keys, not nodes: before an apply first overwrites a key after checkpoint
//! `id`, its previous value is stored under `U id key`. Rewinding to `id` writes back, per key,
//! the record of the oldest frame `>= id` (a prefix scan returns `U` keys in id order) and drops those
//! frames and later checkpoints, in one batch.

use hasher::{Digest, DigestCodec};

use super::Corrupt;
use crate::{CheckpointInfo, Depth, HistoryConfig, NodeAddr};

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
/// Prefix of records (a keyed side table that commits and rewinds with the tree).
pub const RECORD_PREFIX: u8 = b'R';

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

/// `prefix | n BE`: the keys of the deleted slots, checkpoints and undo frames.
fn numbered_key(prefix: u8, n: u64) -> [u8; 9] {
    let mut key = [prefix; 9];
    key[1..].copy_from_slice(&n.to_be_bytes());
    key
}

/// The number of a [`numbered_key`] with `prefix`.
fn parse_numbered_key(prefix: u8, key: &[u8]) -> Option<u64> {
    match key {
        [first, n @ ..] if *first == prefix => {
            Some(u64::from_be_bytes(<[u8; 8]>::try_from(n).ok()?))
        }
        _ => None,
    }
}

/// `D | index BE`.
#[must_use]
pub fn deleted_key(index: u64) -> [u8; 9] {
    numbered_key(DELETED_PREFIX, index)
}

/// Parses a deleted-slot key.
#[must_use]
pub fn parse_deleted_key(key: &[u8]) -> Option<u64> {
    parse_numbered_key(DELETED_PREFIX, key)
}

/// `C | id BE`.
#[must_use]
pub fn checkpoint_key(id: u64) -> [u8; 9] {
    numbered_key(CHECKPOINT_PREFIX, id)
}

/// Parses a checkpoint key.
#[must_use]
pub fn parse_checkpoint_key(key: &[u8]) -> Option<u64> {
    parse_numbered_key(CHECKPOINT_PREFIX, key)
}

/// `R | key`: where record `key` is stored.
#[must_use]
pub fn record_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(RECORD_PREFIX);
    out.extend_from_slice(key);
    out
}

/// `U | id BE`: the prefix of checkpoint `id`'s undo frame.
#[must_use]
pub fn undo_prefix(id: u64) -> [u8; 9] {
    numbered_key(UNDO_PREFIX, id)
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
            let (id, original) = key.split_at(9);
            Some((parse_numbered_key(UNDO_PREFIX, id)?, original))
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

/// `u64` big-endian (counters, `next_index`).
#[must_use]
pub fn encode_u64(value: u64) -> Vec<u8> {
    value.to_be_bytes().to_vec()
}

/// Reads a `u64` big-endian value stored at `key`.
///
/// # Errors
/// [`Corrupt`] unless the value is exactly 8 bytes.
pub fn decode_u64(key: &[u8], bytes: &[u8]) -> Result<u64, Corrupt> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| Corrupt::new(key, "expected 8 bytes"))
}

/// `u32` big-endian (format version, digest length).
#[must_use]
pub fn encode_u32(value: u32) -> Vec<u8> {
    value.to_be_bytes().to_vec()
}

/// Reads a `u32` big-endian value stored at `key`.
///
/// # Errors
/// [`Corrupt`] unless the value is exactly 4 bytes.
pub fn decode_u32(key: &[u8], bytes: &[u8]) -> Result<u32, Corrupt> {
    <[u8; 4]>::try_from(bytes)
        .map(u32::from_be_bytes)
        .map_err(|_| Corrupt::new(key, "expected 4 bytes"))
}

/// The stored depth: one byte.
#[must_use]
pub fn encode_depth(depth: Depth) -> Vec<u8> {
    vec![depth.get()]
}

/// Reads the stored depth.
///
/// # Errors
/// [`Corrupt`] for a value that is not one byte in `1..=63`.
pub fn decode_depth(bytes: &[u8]) -> Result<Depth, Corrupt> {
    match bytes {
        [depth] => Depth::new(*depth).map_err(|_| Corrupt::new(DEPTH_KEY, "depth outside 1..=63")),
        _ => Err(Corrupt::new(DEPTH_KEY, "expected 1 byte")),
    }
}

/// The digest length of codec `H`, as stored under [`DIGEST_LEN_KEY`].
///
/// # Errors
/// [`Corrupt`] (naming the key) for a codec whose length does not fit the field: a codec bug,
/// reported rather than stored saturated.
pub fn digest_len<H: DigestCodec>() -> Result<u32, Corrupt> {
    u32::try_from(H::LEN).map_err(|_| Corrupt::new(DIGEST_LEN_KEY, "digest length exceeds u32"))
}

/// A chunk's nodes, each in its canonical encoding, in slot order.
#[must_use]
pub fn encode_chunk<H: DigestCodec>(nodes: &[Digest<H>]) -> Vec<u8> {
    let mut bytes = vec![0u8; nodes.len() * H::LEN];
    for (out, value) in bytes.chunks_exact_mut(H::LEN).zip(nodes) {
        H::encode(value, out);
    }
    bytes
}

/// Reads a chunk stored at `key`.
///
/// # Errors
/// [`Corrupt`] for a wrong length or a non-canonical node.
pub fn decode_chunk<H: DigestCodec>(key: &[u8], bytes: &[u8]) -> Result<Vec<Digest<H>>, Corrupt> {
    if bytes.len() != CHUNK_NODES * H::LEN {
        return Err(Corrupt::new(key, "node chunk has the wrong length"));
    }
    bytes
        .chunks_exact(H::LEN)
        .map(|node| {
            H::decode(node).map_err(|_| Corrupt::new(key, "node bytes are not a canonical digest"))
        })
        .collect()
}

/// Reads only slot `slot` of a chunk stored at `key` (a proof decodes one node per level).
///
/// # Errors
/// As [`decode_chunk`].
pub fn decode_chunk_slot<H: DigestCodec>(
    key: &[u8],
    bytes: &[u8],
    slot: usize,
) -> Result<Digest<H>, Corrupt> {
    if bytes.len() != CHUNK_NODES * H::LEN || slot >= CHUNK_NODES {
        return Err(Corrupt::new(key, "node chunk has the wrong length"));
    }
    H::decode(&bytes[slot * H::LEN..(slot + 1) * H::LEN])
        .map_err(|_| Corrupt::new(key, "node bytes are not a canonical digest"))
}

/// A checkpoint record: root, `next_index` big-endian, metadata.
#[must_use]
pub fn encode_checkpoint<H: DigestCodec>(info: &CheckpointInfo<Digest<H>>) -> Vec<u8> {
    let mut record = vec![0u8; H::LEN];
    H::encode(&info.root, &mut record);
    record.extend_from_slice(&info.next_index.to_be_bytes());
    record.extend_from_slice(&info.metadata);
    record
}

/// Reads a checkpoint record from its key and value.
///
/// # Errors
/// [`Corrupt`] for a malformed key, a short record or a non-canonical root.
pub fn decode_checkpoint<H: DigestCodec>(
    key: &[u8],
    value: &[u8],
) -> Result<CheckpointInfo<Digest<H>>, Corrupt> {
    let id =
        parse_checkpoint_key(key).ok_or_else(|| Corrupt::new(key, "malformed checkpoint key"))?;
    if value.len() < H::LEN + 8 {
        return Err(Corrupt::new(key, "checkpoint record too short"));
    }
    let (root, rest) = value.split_at(H::LEN);
    let (next_index, metadata) = rest.split_at(8);
    Ok(CheckpointInfo {
        id,
        root: H::decode(root).map_err(|_| Corrupt::new(key, "checkpoint root is not a digest"))?,
        next_index: decode_u64(key, next_index)?,
        metadata: metadata.to_vec(),
    })
}

/// The history settings: `max_checkpoints`, `root_window`, two `u64` big-endian.
///
/// # Errors
/// [`Corrupt`] (naming [`HISTORY_KEY`]) for a limit beyond `u64` (no platform has one today).
pub fn encode_history(config: HistoryConfig) -> Result<Vec<u8>, Corrupt> {
    let wide = |n: usize| {
        u64::try_from(n).map_err(|_| Corrupt::new(HISTORY_KEY, "history limit beyond u64"))
    };
    let mut value = Vec::with_capacity(16);
    value.extend_from_slice(&wide(config.max_checkpoints)?.to_be_bytes());
    value.extend_from_slice(&wide(config.root_window)?.to_be_bytes());
    Ok(value)
}

/// Reads the history settings.
///
/// # Errors
/// [`Corrupt`] unless 16 bytes whose limits fit this platform's `usize`.
pub fn decode_history(bytes: &[u8]) -> Result<HistoryConfig, Corrupt> {
    if bytes.len() != 16 {
        return Err(Corrupt::new(HISTORY_KEY, "expected 16 bytes"));
    }
    let narrow = |half: &[u8]| {
        usize::try_from(decode_u64(HISTORY_KEY, half)?)
            .map_err(|_| Corrupt::new(HISTORY_KEY, "history limit beyond this platform's usize"))
    };
    Ok(HistoryConfig {
        max_checkpoints: narrow(&bytes[..8])?,
        root_window: narrow(&bytes[8..])?,
    })
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

    #[test]
    fn values_round_trip_and_reject_bad_lengths() {
        use hasher::Keccak256Hasher as K;
        assert_eq!(decode_u64(b"k", &encode_u64(u64::MAX)), Ok(u64::MAX));
        assert!(decode_u64(b"k", &[0; 7]).is_err());
        assert_eq!(decode_u32(b"k", &encode_u32(7)), Ok(7));
        assert!(decode_u32(b"k", &[0; 5]).is_err());
        let depth = Depth::new(20).unwrap();
        assert_eq!(decode_depth(&encode_depth(depth)), Ok(depth));
        assert!(decode_depth(&[0]).is_err() && decode_depth(&[64]).is_err());
        assert!(decode_depth(&[1, 2]).is_err());
        assert_eq!(digest_len::<K>(), Ok(32));

        let chunk: Vec<[u8; 32]> = (0..16u8).map(|i| [i; 32]).collect();
        let bytes = encode_chunk::<K>(&chunk);
        assert_eq!(decode_chunk::<K>(b"N", &bytes), Ok(chunk.clone()));
        assert_eq!(decode_chunk_slot::<K>(b"N", &bytes, 5), Ok([5; 32]));
        assert!(decode_chunk::<K>(b"N", &bytes[1..]).is_err());
        assert!(decode_chunk_slot::<K>(b"N", &bytes, CHUNK_NODES).is_err());

        let info = CheckpointInfo {
            id: 9,
            root: [3u8; 32],
            next_index: 77,
            metadata: b"block".to_vec(),
        };
        let record = encode_checkpoint::<K>(&info);
        assert_eq!(
            decode_checkpoint::<K>(&checkpoint_key(9), &record),
            Ok(info)
        );
        assert!(decode_checkpoint::<K>(&checkpoint_key(9), &record[..39]).is_err());
        assert!(decode_checkpoint::<K>(b"C", &record).is_err());

        let history = HistoryConfig {
            max_checkpoints: 3,
            root_window: 4,
        };
        assert_eq!(
            decode_history(&encode_history(history).unwrap()),
            Ok(history)
        );
        assert!(decode_history(&[0; 15]).is_err());
    }
}
