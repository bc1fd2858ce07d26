//! Snapshot import: any byte stream is refused with a typed error, or imports into a tree whose
//! root is the snapshot's and whose export gives the same bytes back.

use tiny_keccak::{Hasher as _, Keccak};
use tree_core::testing::MixHasher;
use tree_core::{Depth, MerkleTreeExt, OptimalMerkleTree, Snapshot};

/// Reads, imports and re-exports the input. An input whose first byte is 0 is the rest of the
/// input with a valid checksum appended, so the structural checks and the import are reached
/// and not only the checksum.
pub fn run(input: &[u8]) {
    let owned;
    let data = match input.split_first() {
        Some((0, body)) => {
            let mut sum = Keccak::v256();
            sum.update(body);
            let mut digest = [0u8; 32];
            sum.finalize(&mut digest);
            owned = [body, &digest].concat();
            &owned[..]
        }
        _ => input,
    };
    let Ok(snapshot) = Snapshot::<MixHasher>::read_from(data) else {
        return;
    };
    let depth = snapshot.depth;
    let Ok(tree) = snapshot.import(OptimalMerkleTree::<MixHasher>::new(depth), None) else {
        return;
    };
    let Ok(again) = Snapshot::of(&tree) else {
        return;
    };
    let mut bytes = Vec::new();
    if again.write_to(&mut bytes).is_ok() {
        assert_eq!(
            bytes, data,
            "an imported snapshot does not export to the same bytes"
        );
    }
}

/// Snapshots of a few small trees.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (depth, n) in [(3u8, 5u64), (5, 17), (8, 40)] {
        let Ok(depth) = Depth::new(depth) else {
            continue;
        };
        let mut tree = OptimalMerkleTree::<MixHasher>::new(depth);
        let _ = tree.set_range(0, (1..=n).map(|i| i * 3));
        let _ = tree.delete(1);
        let _ = tree.set_metadata(b"m");
        let mut bytes = Vec::new();
        if let Ok(snapshot) = Snapshot::of(&tree) {
            if snapshot.write_to(&mut bytes).is_ok() {
                // As it is, and as a body whose checksum the target appends.
                let body = bytes.len().saturating_sub(32);
                seeds.push([&[0u8][..], &bytes[..body]].concat());
                seeds.push(bytes);
            }
        }
    }
    seeds
}
