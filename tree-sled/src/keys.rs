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
//! | `N` level:`u8` index:`u64` big-endian | the node's canonical encoding          |
//! | `D` index:`u64` big-endian            | empty: the leaf slot was deleted       |
//!
//! Big-endian indices make sled's byte order equal `(level, index)` order. Nodes equal to the
//! empty subtree of their level are never stored (absent = empty), so a fresh tree holds only its
//! header. The header, nodes, `next_index`, deleted slots and metadata of one apply travel in one
//! `sled::Batch`.

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

/// `N | level | index BE`.
#[must_use]
pub fn node_key(addr: NodeAddr) -> [u8; 10] {
    let mut key = [0u8; 10];
    key[0] = NODE_PREFIX;
    key[1] = addr.level;
    key[2..].copy_from_slice(&addr.index.to_be_bytes());
    key
}

/// Parses a node key.
#[must_use]
pub fn parse_node_key(key: &[u8]) -> Option<NodeAddr> {
    match key {
        [NODE_PREFIX, level, index @ ..] => Some(NodeAddr {
            level: *level,
            index: u64::from_be_bytes(<[u8; 8]>::try_from(index).ok()?),
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
            parse_node_key(&b),
            Some(NodeAddr {
                level: 0,
                index: 256
            })
        );
        assert_eq!(parse_node_key(&b[..9]), None);
        assert_eq!(parse_deleted_key(&deleted_key(7)), Some(7));
    }
}
