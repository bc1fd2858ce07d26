//! Cheap deterministic hashers for tests.

use hasher::{DecodeError, DigestCodec, Hasher};

/// A `u64` mixer (splitmix64 finaliser over an asymmetric combination): cheap, and order
/// sensitive, so a swapped left/right child changes the root. Empty leaf is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MixHasher;

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Hasher for MixHasher {
    type Digest = u64;
    const ID: &'static str = "test-mix64";

    fn hash_pair(left: &u64, right: &u64) -> u64 {
        splitmix(splitmix(*left) ^ right.rotate_left(23) ^ 0x5851_f42d_4c95_7f2d)
    }
}

impl DigestCodec for MixHasher {
    const LEN: usize = 8;

    fn encode(digest: &u64, out: &mut [u8]) {
        out[..8].copy_from_slice(&digest.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> Result<u64, DecodeError> {
        <[u8; 8]>::try_from(bytes)
            .map(u64::from_le_bytes)
            .map_err(|_| DecodeError::WrongLength {
                expected: 8,
                found: bytes.len(),
            })
    }
}

impl hasher::LeanHash for MixHasher {
    const LEAN_ID: &'static str = "lean-test-mix64";
}
