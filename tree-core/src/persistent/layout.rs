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
//! | `N` level:`u8` chunk:`u64` big-endian | one chunk of nodes ([`ChunkShape`]): `level` is the bottom level of its band, each node in its canonical encoding, in slot order (`slots × LEN` bytes) |
//! | `D` index:`u64` big-endian            | empty: the leaf slot was deleted       |
//! | `M` `history`                         | `max_checkpoints`, `root_window`: two `u64` big-endian (absent = defaults) |
//! | `C` id:`u64` big-endian               | a checkpoint: root (`LEN` bytes), `next_index` `u64` BE, metadata |
//! | `R` key (1–64 bytes)                  | a record's value (`UpdateBatch::put_record`) |
//! | `U` id:`u64` BE, then a key           | undo: that key's value at checkpoint `id`, `0` = absent or `1` + value |
//! | `M` `commits`                         | `u64` big-endian: batches committed (absent = 0); every batch bumps it, so after a failed commit one read tells whether it landed |
//!
//! Nodes are stored in chunks, one store entry per chunk, shaped by the format version
//! ([`ChunkShape`]). Format 2 cuts the levels into bands of four and stores, per band, the 4-level
//! subtree under each node at the band's top: 16 nodes of the band's bottom level, their 8 parents,
//! 4 and 2 (30 slots). A proof then reads one entry per four levels and an update writes one per
//! four, and the store holds about half the entries of format 1, which stored 16 consecutive nodes
//! of one level per entry (a band of one level: one entry per level of a proof). Format 1
//! databases are read and written in their own shape. One entry per chunk instead of one per node
//! cuts the engine's per-entry log and index overhead (disk, batch and open time), and a
//! membership set, which grows from index 0, fills its chunks densely. Slots hold the empty
//! subtree of their level where nothing is stored, slots outside the tree (right of it, or above
//! the root in the root's band) included, so that no chunk's bytes depend on the depth; a chunk whose slots are all empty is not stored (absent =
//! empty), so a fresh tree holds only its header. Big-endian chunk numbers make the engine's byte
//! order equal `(band, chunk)` order. The header, nodes, `next_index`, deleted slots, records and
//! metadata of one apply travel in one [`StoreBatch`](super::StoreBatch) (one sled batch, one redb
//! write transaction), together with the undo records it adds to the newest checkpoint's frame.
//!
//! Undo records work on keys, not nodes: before an apply first overwrites a key after checkpoint
//! `id`, its previous value is stored under `U id key`. Rewinding to `id` writes back, per key,
//! the record of the oldest frame `>= id` (a prefix scan returns `U` keys in id order) and drops those
//! frames and later checkpoints, in one batch.

use hasher::{Digest, DigestCodec};

use super::Corrupt;
use crate::{CheckpointInfo, Depth, HistoryConfig, NodeAddr};

/// The layout version this build writes (it reads this one and format 1, whose chunks are rows).
pub const FORMAT_VERSION: u32 = 2;

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

/// log2 of the nodes of a chunk's bottom row.
pub const CHUNK_BITS: u8 = 4;

/// How nodes are grouped into stored chunks: the levels are cut into bands of `band` levels,
/// and a chunk holds the nodes of one band under one node just above it: 16 nodes of the band's
/// bottom level, then 8, 4, … of the levels above (`band` ≤ 4 rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkShape {
    band: u8,
}

impl ChunkShape {
    /// Format 1: 16 consecutive nodes of one level.
    pub const ROWS: Self = Self { band: 1 };
    /// Format 2: 4-level subtrees (30 nodes).
    pub const SUBTREES: Self = Self { band: 4 };

    /// The shape of format `version`; `None` for a format this build does not know.
    #[must_use]
    pub fn for_format(version: u32) -> Option<Self> {
        match version {
            1 => Some(Self::ROWS),
            2 => Some(Self::SUBTREES),
            _ => None,
        }
    }

    /// The shape this build writes new databases in.
    #[must_use]
    pub fn current() -> Self {
        Self::SUBTREES
    }

    /// Levels per band.
    #[must_use]
    pub fn band(self) -> u8 {
        self.band
    }

    /// The first slot of `row` (0 = the band's bottom level): 16 + 8 + … slots below it.
    fn row_offset(row: u8) -> usize {
        (2usize << CHUNK_BITS) - ((2usize << CHUNK_BITS) >> row)
    }

    /// The top level of the band holding the root of a tree of `depth`: the highest level a
    /// chunk has slots for (at most 63, as bands start at multiples of 4 and depths end there).
    #[must_use]
    pub fn top_level(self, depth: Depth) -> u8 {
        (depth.get() / self.band * self.band + self.band - 1).min(63)
    }

    /// Nodes per chunk.
    #[must_use]
    pub fn slots(self) -> usize {
        Self::row_offset(self.band)
    }

    /// The chunk holding `addr`, and the node's slot in it.
    #[must_use]
    pub fn of(self, addr: NodeAddr) -> (ChunkAddr, usize) {
        let row = addr.level % self.band;
        let width_bits = CHUNK_BITS - row;
        let within = usize::try_from(addr.index & ((1 << width_bits) - 1)).unwrap_or(0);
        (
            ChunkAddr {
                level: addr.level - row,
                chunk: addr.index >> width_bits,
            },
            Self::row_offset(row) + within,
        )
    }

    /// The row (0 = the band's bottom level) of `slot`.
    fn row(self, slot: usize) -> u8 {
        (1..self.band)
            .take_while(|&row| Self::row_offset(row) <= slot)
            .last()
            .unwrap_or(0)
    }

    /// The node in `slot` of `chunk`.
    #[must_use]
    pub fn node(self, chunk: ChunkAddr, slot: usize) -> NodeAddr {
        let row = self.row(slot);
        NodeAddr {
            level: chunk.level + row,
            index: (chunk.chunk << (CHUNK_BITS - row)) | (slot - Self::row_offset(row)) as u64,
        }
    }

    /// The level of the node in `slot` of `chunk`.
    #[must_use]
    pub fn level(self, chunk: ChunkAddr, slot: usize) -> u8 {
        chunk.level + self.row(slot)
    }

    /// Chunk `chunk` with nothing stored: each slot its level's empty value.
    #[must_use]
    pub fn empty_chunk<D: Copy>(self, chunk: ChunkAddr, empty: impl Fn(u8) -> D) -> Vec<D> {
        (0..self.band)
            .flat_map(|row| {
                let value = empty(chunk.level + row);
                std::iter::repeat_n(value, (1usize << CHUNK_BITS) >> row)
            })
            .collect()
    }

    /// The key of the chunk holding `addr`.
    #[must_use]
    pub fn key_of(self, addr: NodeAddr) -> [u8; 10] {
        chunk_key(self.of(addr).0)
    }

    /// The lowest band bottom level at or above which, with `next_index` leaves filled from
    /// index 0, every band has at most `chunks` chunks in use (`u8::MAX` when `chunks` is 0).
    #[must_use]
    pub fn lowest_band_within(self, next_index: u64, chunks: u32) -> u8 {
        if chunks == 0 {
            return u8::MAX;
        }
        let mut level = 0u8;
        // Chunks of a band at `level` cover 2^(level + 4) leaves each.
        while level < 64
            && next_index.div_ceil(1u64 << (u32::from(level) + 4).min(63)) > u64::from(chunks)
        {
            level += self.band;
        }
        level
    }
}

/// A chunk: the nodes of one band under one node (see [`ChunkShape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChunkAddr {
    /// The bottom level of its band.
    pub level: u8,
    /// Its number: `index >> CHUNK_BITS` of its nodes at the band's bottom level.
    pub chunk: u64,
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

/// The key of the chunk holding `addr` in the shape this build writes (tests and tools that
/// reach into a new database).
#[must_use]
pub fn node_key(addr: NodeAddr) -> [u8; 10] {
    ChunkShape::current().key_of(addr)
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

/// Reads a chunk of `shape` stored at `key`.
///
/// # Errors
/// [`Corrupt`] for a wrong length or a non-canonical node.
pub fn decode_chunk<H: DigestCodec>(
    shape: ChunkShape,
    key: &[u8],
    bytes: &[u8],
) -> Result<Vec<Digest<H>>, Corrupt> {
    if bytes.len() != shape.slots() * H::LEN {
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
    shape: ChunkShape,
    key: &[u8],
    bytes: &[u8],
    slot: usize,
) -> Result<Digest<H>, Corrupt> {
    if bytes.len() != shape.slots() * H::LEN || slot >= shape.slots() {
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
    fn row_chunks_sort_by_level_then_index() {
        let rows = ChunkShape::ROWS;
        let at = |level, index| NodeAddr { level, index };
        let (a, b, c) = (
            rows.key_of(at(0, 255)),
            rows.key_of(at(0, 256)),
            rows.key_of(at(1, 0)),
        );
        assert!(a < b && b < c);
        assert_eq!(rows.key_of(at(0, 257)), b);
        assert_eq!(
            parse_chunk_key(&b),
            Some(ChunkAddr {
                level: 0,
                chunk: 16
            })
        );
        assert_eq!(parse_chunk_key(&b[..9]), None);
        let (chunk, slot) = rows.of(at(3, 35));
        assert_eq!((chunk.level, chunk.chunk, slot), (3, 2, 3));
        assert_eq!(rows.node(chunk, slot), at(3, 35));
        assert_eq!(rows.slots(), 16);
        assert_eq!(parse_deleted_key(&deleted_key(7)), Some(7));
    }

    #[test]
    fn subtree_chunks_hold_four_levels_under_one_node() {
        let shape = ChunkShape::SUBTREES;
        assert_eq!(shape.slots(), 30);
        let at = |level, index| NodeAddr { level, index };
        // Level 5, index 9: band 4, row 1, the chunk under node (8, 1), slot 16 + 1.
        let (chunk, slot) = shape.of(at(5, 9));
        assert_eq!((chunk.level, chunk.chunk, slot), (4, 1, 17));
        // Every slot of a chunk is a distinct node under the chunk's top, round trip.
        for band in [0u8, 4, 8] {
            let chunk = ChunkAddr {
                level: band,
                chunk: 5,
            };
            let mut seen = std::collections::HashSet::new();
            for slot in 0..shape.slots() {
                let node = shape.node(chunk, slot);
                assert_eq!(shape.of(node), (chunk, slot));
                assert_eq!(shape.level(chunk, slot), node.level);
                assert_eq!(node.index >> (band + 4 - node.level), 5);
                assert!(seen.insert(node));
            }
        }
        // The empty chunk holds each row's level's value.
        let empty = shape.empty_chunk(ChunkAddr { level: 8, chunk: 0 }, |level| level);
        assert_eq!(empty.len(), 30);
        assert_eq!(
            (empty[0], empty[15], empty[16], empty[24], empty[29]),
            (8, 8, 9, 10, 11)
        );
        // Bands are in level order, chunks in index order within one.
        assert!(shape.key_of(at(3, 1 << 20)) < shape.key_of(at(4, 0)));
        assert_eq!(
            ChunkShape::for_format(FORMAT_VERSION),
            Some(ChunkShape::current())
        );
        assert_eq!(ChunkShape::for_format(1), Some(ChunkShape::ROWS));
        assert_eq!(ChunkShape::for_format(3), None);
    }

    #[test]
    fn cached_bands_start_where_the_chunks_in_use_fit() {
        let shape = ChunkShape::SUBTREES;
        // 2^24 leaves: band 0 uses 2^20 chunks, band 4 2^16, band 8 2^12.
        assert_eq!(shape.lowest_band_within(1 << 24, 4096), 8);
        assert_eq!(shape.lowest_band_within((1 << 24) + 1, 4096), 12);
        assert_eq!(shape.lowest_band_within(1 << 20, 4096), 4);
        assert_eq!(shape.lowest_band_within(0, 4096), 0);
        assert_eq!(shape.lowest_band_within(1 << 20, 0), u8::MAX);
        assert_eq!(ChunkShape::ROWS.lowest_band_within(1 << 20, 4096), 4);
        assert_eq!(shape.lowest_band_within(u64::MAX, 1), 64);
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

        for shape in [ChunkShape::ROWS, ChunkShape::SUBTREES] {
            let slots = u8::try_from(shape.slots()).unwrap();
            let chunk: Vec<[u8; 32]> = (0..slots).map(|i| [i; 32]).collect();
            let bytes = encode_chunk::<K>(&chunk);
            assert_eq!(decode_chunk::<K>(shape, b"N", &bytes), Ok(chunk.clone()));
            assert_eq!(decode_chunk_slot::<K>(shape, b"N", &bytes, 5), Ok([5; 32]));
            assert!(decode_chunk::<K>(shape, b"N", &bytes[1..]).is_err());
            assert!(decode_chunk_slot::<K>(shape, b"N", &bytes, shape.slots()).is_err());
        }
        let rows = encode_chunk::<K>(&[[0u8; 32]; 16]);
        assert!(decode_chunk::<K>(ChunkShape::SUBTREES, b"N", &rows).is_err());

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
