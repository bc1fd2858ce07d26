//! The bad-input table: one row per case across the public API and the on-disk data. Each row
//! runs under `catch_unwind` (a panic fails it loudly) and asserts the typed error or the
//! documented behaviour. Tree rows run on Optimal, Full and the store-backed tree alike.

use std::panic::{catch_unwind, AssertUnwindSafe};

use hasher::{DecodeError, DigestCodec, Fr, Keccak256Hasher, PoseidonHasher};
use integration_tests::report;
use rln_glue::verifier::{proof_from_bytes, RlnVerifier, VerifyError, PROOF_LEN};
use tree_core::persistent::layout::{
    node_key, COMMITS_KEY, DEPTH_KEY, DIGEST_LEN_KEY, FORMAT_VERSION_KEY, HASHER_KEY, HISTORY_KEY,
    NEXT_INDEX_KEY,
};
use tree_core::testing::MixHasher;
use tree_core::{
    AsTreeError, Depth, FullMerkleTree, MerkleProof, MerkleTree, MerkleTreeExt, OptimalMerkleTree,
    RehashConfig, Snapshot, SnapshotError, TreeError,
};
use tree_sled::{KvStore, MemStore, SledMerkleTree, SledTreeError, StoreBatch};

type Row = (&'static str, Box<dyn Fn() -> Result<(), String>>);

fn ensure(ok: bool, what: impl std::fmt::Debug) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{what:?}"))
    }
}

/// The rule error of a tree result, whatever the tree.
fn rule<T, E: AsTreeError>(r: Result<T, E>) -> Option<TreeError> {
    r.err().and_then(|e| e.as_tree_error().cloned())
}

/// Runs `case` on an Optimal, a Full and a store-backed tree of `depth` holding leaves 1..=4.
fn on_every_tree(
    depth: u8,
    case: impl Fn(&mut dyn FnMut(Op) -> Out) -> Result<(), String>,
) -> Result<(), String> {
    let depth = Depth::new(depth).map_err(|e| e.to_string())?;
    let mut optimal = OptimalMerkleTree::<MixHasher>::new(depth);
    let mut full = FullMerkleTree::<MixHasher>::new(depth).map_err(|e| e.to_string())?;
    let mut sled = SledMerkleTree::<MixHasher, _>::open_store(
        MemStore::new(),
        depth,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .map_err(|e| e.to_string())?;
    optimal.set_range(0, 1..=4u64).map_err(|e| e.to_string())?;
    full.set_range(0, 1..=4u64).map_err(|e| e.to_string())?;
    sled.set_range(0, 1..=4u64).map_err(|e| e.to_string())?;
    case(&mut |op| run_op(&mut optimal, op)).map_err(|e| format!("optimal: {e}"))?;
    case(&mut |op| run_op(&mut full, op)).map_err(|e| format!("full: {e}"))?;
    case(&mut |op| run_op(&mut sled, op)).map_err(|e| format!("sled: {e}"))
}

/// A tree operation of the table.
enum Op {
    Set(u64),
    SetRange(u64, u64),
    Delete(u64),
    Override(u64, u64, Vec<u64>),
    Get(u64),
    Proof(u64),
}

/// What the operation did: its rule error, and the tree's (root, next_index, deleted) after.
type Out = (Option<TreeError>, (u64, u64, Vec<u64>));

fn run_op<T: MerkleTree<Hasher = MixHasher>>(tree: &mut T, op: Op) -> Out {
    let err = match op {
        Op::Set(i) => rule(tree.set(i, 9)),
        Op::SetRange(s, n) => rule(tree.set_range(s, (0..n).map(|i| i + 10))),
        Op::Delete(i) => rule(tree.delete(i)),
        Op::Override(s, n, removed) => {
            rule(tree.override_range(s, (0..n).map(|i| i + 20), removed))
        }
        Op::Get(i) => rule(tree.get(i)),
        Op::Proof(i) => rule(tree.proof(i)),
    };
    let deleted = tree.empty_leaves_indices().unwrap_or_default();
    (err, (tree.root(), tree.next_index(), deleted))
}

/// The operation fails with `want` and changes nothing.
fn refused(
    op: impl Fn() -> Op,
    want: TreeError,
) -> impl Fn(&mut dyn FnMut(Op) -> Out) -> Result<(), String> {
    move |tree| {
        let (_, before) = tree(Op::Get(0));
        let (err, after) = tree(op());
        ensure(err.as_ref() == Some(&want), (&err, &want))?;
        ensure(after == before, "a refused operation changed the tree")
    }
}

fn store_with_tree(depth: u8) -> MemStore {
    let store = MemStore::new();
    if let Ok(depth) = Depth::new(depth) {
        if let Ok(mut tree) = SledMerkleTree::<PoseidonHasher, _>::open_store(
            store.clone(),
            depth,
            RehashConfig::default(),
            tree_core::persistent::NodeCache::top(2),
        ) {
            let _ = tree.set_range(0, (1..=5u64).map(Fr::from));
            let _ = tree_core::History::checkpoint(&mut tree, 1);
        }
    }
    store
}

fn put(store: &MemStore, key: &[u8], value: Vec<u8>) {
    let mut batch = StoreBatch::default();
    batch.insert(key, value);
    let Ok(()) = store.commit(batch);
}

/// Reopening a depth-4 tree whose `key` was overwritten with `value` is refused as corrupted
/// (or the given error).
fn damaged(
    key: &'static [u8],
    value: Vec<u8>,
    want: fn(&SledTreeError<std::convert::Infallible>) -> bool,
) -> Result<(), String> {
    let store = store_with_tree(4);
    put(&store, key, value);
    let got = reopen(store, 4);
    match got {
        Err(e) if want(&e) => Ok(()),
        Err(e) => Err(format!("wrong error: {e:?}")),
        Ok(_) => Err("opened".into()),
    }
}

/// The bytes of a depth-4 Poseidon proof for leaf 3, changed by `edit`, are refused at `depth`.
fn proof_bytes_refused(edit: fn(&mut Vec<u8>), depth: u8) -> Result<(), String> {
    let mut bytes = MerkleProof::<PoseidonHasher>::new(3, vec![Fr::from(1u64); 4]).to_bytes();
    edit(&mut bytes); // index at 1..9 (big-endian, low byte 8), siblings from 9
    let depth = Depth::new(depth).map_err(|e| e.to_string())?;
    let got = MerkleProof::<PoseidonHasher>::from_bytes(&bytes, depth);
    ensure(matches!(got, Err(TreeError::MalformedProof { .. })), got)
}

/// Opens the Poseidon tree of depth `depth` in `store`.
fn reopen(
    store: MemStore,
    depth: u8,
) -> Result<SledMerkleTree<PoseidonHasher, MemStore>, SledTreeError<std::convert::Infallible>> {
    SledMerkleTree::open_store(
        store,
        Depth::new(depth)?,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    )
}

/// The value stored at `key`.
fn stored(store: &MemStore, key: &[u8]) -> Result<Vec<u8>, String> {
    let Ok(value) = store.get(key);
    value.ok_or_else(|| format!("nothing stored at {key:?}"))
}

fn corrupted(e: &SledTreeError<std::convert::Infallible>) -> bool {
    matches!(e, SledTreeError::Corrupted { .. })
}

fn rows() -> Vec<Row> {
    let tree_rule = |name, op: fn() -> Op, want: TreeError| -> Row {
        (
            name,
            Box::new(move || on_every_tree(3, refused(op, want.clone()))),
        )
    };
    vec![
        // Depths.
        (
            "depth 0",
            Box::new(|| {
                ensure(
                    Depth::new(0) == Err(TreeError::InvalidDepth { depth: 0, max: 63 }),
                    "depth 0",
                )
            }),
        ),
        (
            "depth 64",
            Box::new(|| {
                ensure(
                    matches!(Depth::new(64), Err(TreeError::InvalidDepth { .. })),
                    "depth 64",
                )
            }),
        ),
        (
            "optimal at every depth 1..=63",
            Box::new(|| {
                for d in 1..=63u8 {
                    let depth = Depth::new(d).map_err(|e| e.to_string())?;
                    let mut tree = OptimalMerkleTree::<MixHasher>::new(depth);
                    tree.set(depth.capacity() - 1, 5)
                        .map_err(|e| format!("depth {d}: {e}"))?;
                    let proof = tree
                        .proof(depth.capacity() - 1)
                        .map_err(|e| e.to_string())?;
                    ensure(proof.verify(&tree.root(), &5), d)?;
                }
                Ok(())
            }),
        ),
        (
            "full: depth it cannot allocate",
            Box::new(|| {
                for d in [40u8, 50, 63] {
                    let got =
                        FullMerkleTree::<MixHasher>::new(Depth::new(d).map_err(|e| e.to_string())?);
                    ensure(matches!(got, Err(TreeError::AllocationFailed { .. })), d)?;
                }
                Ok(())
            }),
        ),
        (
            "sled at depth 63, last index",
            Box::new(|| {
                let depth = Depth::new(63).map_err(|e| e.to_string())?;
                let mut tree = SledMerkleTree::<MixHasher, _>::open_store(
                    MemStore::new(),
                    depth,
                    RehashConfig::default(),
                    tree_core::persistent::NodeCache::top(2),
                )
                .map_err(|e| e.to_string())?;
                tree.set(u64::MAX >> 1, 3).map_err(|e| e.to_string())?;
                ensure(tree.next_index() == 1 << 63, tree.next_index())
            }),
        ),
        // Indices and ranges.
        tree_rule(
            "set at capacity",
            || Op::Set(8),
            TreeError::IndexOutOfBounds {
                index: 8,
                capacity: 8,
            },
        ),
        tree_rule(
            "set at u64::MAX",
            || Op::Set(u64::MAX),
            TreeError::IndexOutOfBounds {
                index: u64::MAX,
                capacity: 8,
            },
        ),
        tree_rule(
            "get past capacity",
            || Op::Get(8),
            TreeError::IndexOutOfBounds {
                index: 8,
                capacity: 8,
            },
        ),
        tree_rule(
            "proof past capacity",
            || Op::Proof(u64::MAX),
            TreeError::IndexOutOfBounds {
                index: u64::MAX,
                capacity: 8,
            },
        ),
        tree_rule(
            "set_range ending past capacity",
            || Op::SetRange(7, 2),
            TreeError::RangeOutOfBounds {
                start: 7,
                end: 9,
                capacity: 8,
            },
        ),
        tree_rule(
            "set_range overflowing u64",
            || Op::SetRange(u64::MAX, 2),
            TreeError::RangeOverflow {
                start: u64::MAX,
                len: 2,
            },
        ),
        tree_rule(
            "delete at capacity",
            || Op::Delete(8),
            TreeError::IndexOutOfBounds {
                index: 8,
                capacity: 8,
            },
        ),
        tree_rule(
            "delete at next_index",
            || Op::Delete(4),
            TreeError::DeleteUnset {
                index: 4,
                next_index: 4,
            },
        ),
        tree_rule(
            "override with nothing",
            || Op::Override(0, 0, vec![]),
            TreeError::EmptyOverride,
        ),
        tree_rule(
            "override removing past next_index",
            || Op::Override(0, 1, vec![6]),
            TreeError::DeleteUnset {
                index: 6,
                next_index: 4,
            },
        ),
        tree_rule(
            "override removing u64::MAX",
            || Op::Override(0, 1, vec![u64::MAX]),
            TreeError::IndexOutOfBounds {
                index: u64::MAX,
                capacity: 8,
            },
        ),
        (
            "set_range ending exactly at capacity",
            Box::new(|| {
                on_every_tree(3, |t| {
                    let (err, (_, next, _)) = t(Op::SetRange(4, 4));
                    ensure(err.is_none() && next == 8, (err, next))
                })
            }),
        ),
        (
            "duplicated removal indices act once",
            Box::new(|| {
                on_every_tree(3, |t| {
                    let (err, (_, _, deleted)) = t(Op::Override(3, 1, vec![1, 1, 2, 1]));
                    ensure(err.is_none() && deleted == vec![1, 2], (err, deleted))
                })
            }),
        ),
        (
            "removal inside the written range: the write wins",
            Box::new(|| {
                on_every_tree(3, |t| {
                    let (err, (_, _, deleted)) = t(Op::Override(0, 2, vec![1, 3]));
                    ensure(err.is_none() && deleted == vec![3], (err, deleted))
                })
            }),
        ),
        (
            "a write past next_index leaves a gap, not deleted slots",
            Box::new(|| {
                on_every_tree(3, |t| {
                    let (err, (_, next, deleted)) = t(Op::Set(7));
                    ensure(
                        err.is_none() && next == 8 && deleted.is_empty(),
                        (err, next, deleted),
                    )
                })
            }),
        ),
        // Node bytes.
        (
            "poseidon digest: 31 and 33 bytes",
            Box::new(|| {
                ensure(
                    matches!(
                        PoseidonHasher::decode(&[0; 31]),
                        Err(DecodeError::WrongLength { .. })
                    ),
                    31,
                )?;
                ensure(
                    matches!(
                        PoseidonHasher::decode(&[0; 33]),
                        Err(DecodeError::WrongLength { .. })
                    ),
                    33,
                )
            }),
        ),
        (
            "poseidon digest: the modulus and 2^256-1",
            Box::new(|| {
                let modulus = PoseidonHasher::encode_to_vec(&(-Fr::from(1u64)));
                let mut p = modulus.clone();
                p[0] = p[0].wrapping_add(1); // little-endian: p - 1 + 1 = p
                ensure(
                    PoseidonHasher::decode(&p) == Err(DecodeError::NonCanonical),
                    "p",
                )?;
                ensure(
                    PoseidonHasher::decode(&[0xff; 32]) == Err(DecodeError::NonCanonical),
                    "ff",
                )?;
                ensure(PoseidonHasher::decode(&modulus).is_ok(), "p - 1")
            }),
        ),
        (
            "keccak digest: wrong length",
            Box::new(|| ensure(Keccak256Hasher::decode(&[0; 31]).is_err(), "31")),
        ),
        // On-disk header fields and counters.
        (
            "stored format version",
            Box::new(|| {
                damaged(FORMAT_VERSION_KEY, 3u32.to_be_bytes().to_vec(), |e| {
                    matches!(e, SledTreeError::FormatVersion { found: 3, .. })
                })
            }),
        ),
        (
            "stored format version of 3 bytes",
            Box::new(|| damaged(FORMAT_VERSION_KEY, vec![0, 0, 1], corrupted)),
        ),
        (
            "stored depth differs",
            Box::new(|| {
                damaged(DEPTH_KEY, vec![5], |e| {
                    matches!(
                        e,
                        SledTreeError::DepthMismatch {
                            stored: 5,
                            requested: 4
                        }
                    )
                })
            }),
        ),
        (
            "stored depth of 2 bytes",
            Box::new(|| damaged(DEPTH_KEY, vec![4, 4], corrupted)),
        ),
        (
            "stored hasher differs",
            Box::new(|| {
                damaged(HASHER_KEY, b"keccak".to_vec(), |e| {
                    matches!(e, SledTreeError::HasherMismatch { .. })
                })
            }),
        ),
        (
            "stored digest length",
            Box::new(|| damaged(DIGEST_LEN_KEY, 31u32.to_be_bytes().to_vec(), corrupted)),
        ),
        (
            "next_index of 7 bytes",
            Box::new(|| damaged(NEXT_INDEX_KEY, vec![0; 7], corrupted)),
        ),
        (
            "next_index past capacity",
            Box::new(|| damaged(NEXT_INDEX_KEY, 17u64.to_be_bytes().to_vec(), corrupted)),
        ),
        (
            "commit counter of 3 bytes",
            Box::new(|| damaged(COMMITS_KEY, vec![1, 2, 3], corrupted)),
        ),
        (
            "history settings of 15 bytes",
            Box::new(|| damaged(HISTORY_KEY, vec![0; 15], corrupted)),
        ),
        (
            "checkpoint record too short",
            Box::new(|| damaged(b"C\0\0\0\0\0\0\0\x01", vec![1; 8], corrupted)),
        ),
        (
            "root chunk with trailing bytes",
            Box::new(|| {
                let key = node_key(tree_core::NodeAddr { level: 4, index: 0 });
                let store = store_with_tree(4);
                let mut chunk = stored(&store, &key)?;
                chunk.push(0);
                put(&store, &key, chunk);
                let got = reopen(store, 4);
                ensure(
                    matches!(got, Err(SledTreeError::Corrupted { .. })),
                    got.err(),
                )
            }),
        ),
        (
            "non-canonical leaf bytes: proofs refuse, integrity refuses",
            Box::new(|| {
                let key = node_key(tree_core::NodeAddr { level: 0, index: 0 });
                let store = store_with_tree(4);
                let slots = tree_core::persistent::layout::ChunkShape::current().slots();
                put(&store, &key, vec![0xff; slots * 32]);
                let tree = reopen(store, 4).map_err(|e| e.to_string())?;
                ensure(
                    matches!(tree.proof(1), Err(SledTreeError::Corrupted { .. })),
                    "proof",
                )?;
                ensure(
                    matches!(tree.get(1), Err(SledTreeError::Corrupted { .. })),
                    "get",
                )?;
                ensure(
                    matches!(
                        tree.verify_integrity(),
                        Err(SledTreeError::Corrupted { .. })
                    ),
                    "integrity",
                )
            }),
        ),
        (
            "a root that does not match the stored nodes",
            Box::new(|| {
                let key = node_key(tree_core::NodeAddr { level: 4, index: 0 });
                let store = store_with_tree(4);
                let mut chunk = stored(&store, &key)?;
                chunk[..32].copy_from_slice(&PoseidonHasher::encode_to_vec(&Fr::from(42u64)));
                put(&store, &key, chunk);
                let tree = reopen(store, 4).map_err(|e| e.to_string())?;
                let issues = tree.verify_integrity().map_err(|e| e.to_string())?;
                ensure(issues.iter().any(|i| i.addr.level == 4), issues)
            }),
        ),
        (
            "a depth byte changed to another valid depth",
            Box::new(|| {
                let store = store_with_tree(4);
                put(&store, DEPTH_KEY, vec![5]);
                let tree = reopen(store, 5).map_err(|e| e.to_string())?;
                let issues = tree.verify_integrity().map_err(|e| e.to_string())?;
                ensure(
                    !issues.is_empty(),
                    "integrity missed nodes below an absent root",
                )
            }),
        ),
        // Proofs.
        (
            "merkle proof bytes: wrong length",
            Box::new(|| {
                let depth = Depth::new(4).map_err(|e| e.to_string())?;
                let proof =
                    MerkleProof::<PoseidonHasher>::new(3, vec![Fr::from(1u64); 4]).to_bytes();
                ensure(
                    MerkleProof::<PoseidonHasher>::from_bytes(&proof, depth).is_ok(),
                    "valid",
                )?;
                for bytes in [
                    &proof[..proof.len() - 1],
                    &[proof.as_slice(), &[0]].concat()[..],
                    &[][..],
                ] {
                    ensure(
                        matches!(
                            MerkleProof::<PoseidonHasher>::from_bytes(bytes, depth),
                            Err(TreeError::MalformedProof { .. })
                        ),
                        bytes.len(),
                    )?;
                }
                Ok(())
            }),
        ),
        (
            "merkle proof bytes: made for another depth",
            Box::new(|| proof_bytes_refused(|_| {}, 5)),
        ),
        (
            "merkle proof bytes: index past the depth",
            Box::new(|| proof_bytes_refused(|p| p[8] = 16, 4)),
        ),
        (
            "merkle proof bytes: non-canonical sibling",
            Box::new(|| proof_bytes_refused(|p| p[9..41].copy_from_slice(&[0xff; 32]), 4)),
        ),
        (
            "path bits: not 0/1, or not one per sibling",
            Box::new(|| {
                let s = vec![1u64; 3];
                ensure(
                    matches!(
                        MerkleProof::<MixHasher>::from_path(s.clone(), &[0, 2, 1]),
                        Err(TreeError::MalformedProof { .. })
                    ),
                    "bit 2",
                )?;
                ensure(
                    matches!(
                        MerkleProof::<MixHasher>::from_path(s.clone(), &[0, 1]),
                        Err(TreeError::MalformedProof { .. })
                    ),
                    "short",
                )?;
                let p = MerkleProof::<MixHasher>::from_path(s, &[1, 0, 1])
                    .map_err(|e| e.to_string())?;
                ensure(p.leaf_index() == 5, p.leaf_index())
            }),
        ),
        (
            "proofs of the wrong length or a contradicting index do not verify",
            Box::new(|| {
                let mut tree =
                    OptimalMerkleTree::<MixHasher>::new(Depth::new(4).map_err(|e| e.to_string())?);
                tree.set_range(0, 1..=6u64).map_err(|e| e.to_string())?;
                let proof = tree.proof(2).map_err(|e| e.to_string())?;
                ensure(proof.verify(&tree.root(), &3), "valid")?;
                let short = MerkleProof::<MixHasher>::new(2, proof.path_elements()[..3].to_vec());
                ensure(!tree.verify_proof(&short, &3), "short")?;
                let long = MerkleProof::<MixHasher>::new(2, [proof.path_elements(), &[0]].concat());
                ensure(!tree.verify_proof(&long, &3), "long")?;
                let contradicting =
                    MerkleProof::<MixHasher>::new(2 + 16, proof.path_elements().to_vec());
                ensure(!contradicting.verify(&tree.root(), &3), "index")
            }),
        ),
        (
            "rln proof bytes of 127, 129 and 0 bytes",
            Box::new(|| {
                for n in [PROOF_LEN - 1, PROOF_LEN + 1, 0] {
                    let got = proof_from_bytes(&vec![0; n]);
                    ensure(
                        matches!(got, Err(VerifyError::MalformedProof { found }) if found == n),
                        n,
                    )?;
                }
                Ok(())
            }),
        ),
        (
            "rln proof bytes that are not curve points",
            Box::new(|| {
                let got = proof_from_bytes(&[0x5a; PROOF_LEN]);
                ensure(
                    matches!(got, Err(VerifyError::MalformedProof { .. })),
                    "points",
                )
            }),
        ),
        (
            "rln verifying key of garbage",
            Box::new(|| {
                ensure(
                    matches!(
                        RlnVerifier::from_bytes(&[7; 100]),
                        Err(VerifyError::MalformedKey)
                    ),
                    "key",
                )
            }),
        ),
        // Snapshots.
        (
            "snapshot with bytes after the checksum",
            Box::new(|| {
                let mut tree =
                    OptimalMerkleTree::<MixHasher>::new(Depth::new(3).map_err(|e| e.to_string())?);
                tree.set_range(0, 1..=3u64).map_err(|e| e.to_string())?;
                let mut bytes = Vec::new();
                Snapshot::of(&tree)
                    .map_err(|e| e.to_string())?
                    .write_to(&mut bytes)
                    .map_err(|e| e.to_string())?;
                ensure(
                    Snapshot::<MixHasher>::read_from(&bytes[..]).is_ok(),
                    "valid",
                )?;
                bytes.push(0);
                let got = Snapshot::<MixHasher>::read_from(&bytes[..]);
                ensure(matches!(got, Err(SnapshotError::Malformed(_))), got.err())
            }),
        ),
    ]
}

#[test]
fn bad_input_table() {
    let rows = rows();
    let total = rows.len() as u64;
    let mut failed = Vec::new();
    for (name, case) in &rows {
        match catch_unwind(AssertUnwindSafe(case)) {
            Ok(Ok(())) => {}
            Ok(Err(why)) => failed.push(format!("{name}: {why}")),
            Err(_) => failed.push(format!("{name}: PANICKED")),
        }
    }
    let passed = total - failed.len() as u64;
    println!("bad input: {passed}/{total}");
    report::record(
        "bad_input",
        "table",
        &[("passed", passed), ("total", total)],
        &[],
    );
    assert!(failed.is_empty(), "failed rows:\n{}", failed.join("\n"));
}
