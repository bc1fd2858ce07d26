//! Snapshot export and import: a tree's leaves and state in one compact, checksummed stream, so
//! a new node starts from a file instead of replaying the chain.
//!
//! Layout (all integers big-endian):
//!
//! | field        | bytes                                      |
//! |--------------|--------------------------------------------|
//! | magic        | `CANOPYSN`                                 |
//! | version      | `u32` ([`SNAPSHOT_VERSION`])               |
//! | depth        | `u8`                                       |
//! | hasher ID    | `u16` length + UTF-8                       |
//! | digest len   | `u32`                                      |
//! | next_index   | `u64`                                      |
//! | root         | `LEN` bytes, the codec's canonical form    |
//! | metadata     | `u32` length + bytes                       |
//! | deleted      | `u64` count + that many `u64` indices      |
//! | leaves       | `next_index × LEN` bytes, indices `0..next_index` |
//! | checksum     | Keccak-256 of everything above (32 bytes)  |
//!
//! Import checks, before it writes anything: magic, version, depth, hasher, digest length,
//! canonical digests, the checksum, and the claimed root against the root the caller expects (the
//! on-chain root). It then rebuilds the tree in one batch (the parallel rehash) and refuses the
//! result if the recomputed root differs from the claimed one.

use std::io::{Read, Write};

use hasher::{Digest, DigestCodec, Hasher};
use tiny_keccak::{Hasher as _, Keccak};

use crate::{Depth, MerkleTree, TreeError, UpdateBatch};

/// The snapshot layout version this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"CANOPYSN";

/// Why a snapshot could not be written or imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError<E: std::error::Error + 'static = TreeError> {
    /// Reading or writing the stream failed.
    #[error("snapshot I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The stream ended early.
    #[error("snapshot is truncated")]
    Truncated,
    /// Not a Canopy snapshot.
    #[error("not a Canopy snapshot (bad magic)")]
    BadMagic,
    /// A layout version this build does not read.
    #[error("snapshot version {found}, this build reads {supported}")]
    Version {
        /// Version in the stream.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// The stream's checksum does not match its contents.
    #[error("snapshot checksum mismatch: the file is corrupted")]
    Checksum,
    /// A field that cannot be right (bad UTF-8, non-canonical digest, deleted slot not empty...).
    #[error("malformed snapshot: {0}")]
    Malformed(&'static str),
    /// The snapshot is of another depth than the tree it is imported into.
    #[error("snapshot depth {found}, tree depth {expected}")]
    DepthMismatch {
        /// Depth in the snapshot.
        found: u8,
        /// Depth of the tree.
        expected: u8,
    },
    /// The snapshot was made with another hasher.
    #[error("snapshot hasher {found:?}, tree hasher {expected:?}")]
    HasherMismatch {
        /// Hasher ID in the snapshot.
        found: String,
        /// The tree's hasher ID.
        expected: &'static str,
    },
    /// The claimed root is not the root the caller expects.
    #[error("snapshot root is not the expected root")]
    UnexpectedRoot,
    /// The leaves do not hash to the claimed root.
    #[error("snapshot leaves do not hash to the root it claims")]
    RootMismatch,
    /// Import needs an empty tree.
    #[error("import needs an empty tree (next_index {next_index})")]
    NotEmpty {
        /// The tree's `next_index`.
        next_index: u64,
    },
    /// The tree refused the rebuild or failed to store it.
    #[error("tree: {0}")]
    Tree(#[source] E),
}

/// What a snapshot of a tree hashed with `H` holds, decoded.
#[derive_where::derive_where(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot<H: Hasher> {
    /// Tree depth.
    pub depth: Depth,
    /// The hasher's ID.
    pub hasher_id: String,
    /// `next_index`.
    pub next_index: u64,
    /// The root the leaves hash to.
    pub root: Digest<H>,
    /// The caller's metadata.
    pub metadata: Vec<u8>,
    /// Deleted slots, increasing.
    pub deleted: Vec<u64>,
    /// Leaves `0..next_index`.
    pub leaves: Vec<Digest<H>>,
}

/// A writer that feeds everything it writes into the checksum.
struct Summed<W> {
    inner: W,
    sum: Keccak,
}

impl<W: Write> Summed<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sum.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// A reader that feeds everything it reads into the checksum; EOF is `Truncated`.
struct Checked<R> {
    inner: R,
    sum: Keccak,
}

impl<R: Read> Checked<R> {
    fn take<E: std::error::Error>(&mut self, out: &mut [u8]) -> Result<(), SnapshotError<E>> {
        self.inner.read_exact(out).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => SnapshotError::Truncated,
            _ => SnapshotError::Io(e),
        })?;
        self.sum.update(out);
        Ok(())
    }

    fn array<const N: usize, E: std::error::Error>(&mut self) -> Result<[u8; N], SnapshotError<E>> {
        let mut out = [0u8; N];
        self.take(&mut out)?;
        Ok(out)
    }

    fn vec<E: std::error::Error>(&mut self, len: usize) -> Result<Vec<u8>, SnapshotError<E>> {
        // Read in bounded steps so a forged length cannot allocate more than the stream holds.
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let mut left = len;
        while left > 0 {
            let n = left.min(buf.len());
            self.take(&mut buf[..n])?;
            out.extend_from_slice(&buf[..n]);
            left -= n;
        }
        Ok(out)
    }
}

fn digest<H: DigestCodec, E: std::error::Error>(
    bytes: &[u8],
) -> Result<Digest<H>, SnapshotError<E>> {
    H::decode(bytes).map_err(|_| SnapshotError::Malformed("non-canonical digest"))
}

impl<H: DigestCodec> Snapshot<H> {
    /// Reads `tree`'s leaves and state.
    ///
    /// # Errors
    /// The tree's read errors.
    pub fn of<T: MerkleTree<Hasher = H>>(tree: &T) -> Result<Self, T::Error> {
        let leaves = (0..tree.next_index())
            .map(|i| tree.get(i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            depth: tree.depth(),
            hasher_id: H::ID.to_owned(),
            next_index: tree.next_index(),
            root: tree.root(),
            metadata: tree.metadata()?,
            deleted: tree.empty_leaves_indices()?,
            leaves,
        })
    }

    /// Writes the snapshot, checksum last.
    ///
    /// # Errors
    /// The writer's error.
    pub fn write_to(&self, writer: impl Write) -> std::io::Result<()> {
        let mut out = Summed {
            inner: std::io::BufWriter::new(writer),
            sum: Keccak::v256(),
        };
        out.put(MAGIC)?;
        out.put(&SNAPSHOT_VERSION.to_be_bytes())?;
        out.put(&[self.depth.get()])?;
        let id = self.hasher_id.as_bytes();
        // A truncated id or digest length would write a snapshot that reads back as another
        // hasher's: refuse instead.
        let id_len = u16::try_from(id.len())
            .map_err(|_| std::io::Error::other("hasher id longer than 65535 bytes"))?;
        out.put(&id_len.to_be_bytes())?;
        out.put(id)?;
        let digest_len =
            u32::try_from(H::LEN).map_err(|_| std::io::Error::other("digest longer than 4 GiB"))?;
        out.put(&digest_len.to_be_bytes())?;
        out.put(&self.next_index.to_be_bytes())?;
        let mut node = vec![0u8; H::LEN];
        H::encode(&self.root, &mut node);
        out.put(&node)?;
        let metadata_len = u32::try_from(self.metadata.len())
            .map_err(|_| std::io::Error::other("metadata longer than 4 GiB"))?;
        out.put(&metadata_len.to_be_bytes())?;
        out.put(&self.metadata)?;
        let deleted = u64::try_from(self.deleted.len())
            .map_err(|_| std::io::Error::other("more deleted slots than a u64 counts"))?;
        out.put(&deleted.to_be_bytes())?;
        for index in &self.deleted {
            out.put(&index.to_be_bytes())?;
        }
        for leaf in &self.leaves {
            H::encode(leaf, &mut node);
            out.put(&node)?;
        }
        let mut sum = [0u8; 32];
        out.sum.finalize(&mut sum);
        out.inner.write_all(&sum)?;
        out.inner.flush()
    }

    /// Reads and checks a snapshot for hasher `H`: layout, version, hasher, canonical digests
    /// and checksum (nothing about any tree yet). The snapshot must be the whole stream: bytes
    /// after the checksum are refused.
    ///
    /// # Errors
    /// Every [`SnapshotError`] but `Tree`, `NotEmpty`, `DepthMismatch` and the root checks.
    pub fn read_from(reader: impl Read) -> Result<Self, SnapshotError> {
        let mut r = Checked {
            inner: std::io::BufReader::new(reader),
            sum: Keccak::v256(),
        };
        if &r.array::<8, _>()? != MAGIC {
            return Err(SnapshotError::BadMagic);
        }
        let version = u32::from_be_bytes(r.array()?);
        if version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version {
                found: version,
                supported: SNAPSHOT_VERSION,
            });
        }
        let [depth] = r.array::<1, _>()?;
        let depth =
            Depth::new(depth).map_err(|_| SnapshotError::Malformed("depth outside 1..=63"))?;
        let id_len = u16::from_be_bytes(r.array()?);
        let hasher_id = String::from_utf8(r.vec(usize::from(id_len))?)
            .map_err(|_| SnapshotError::Malformed("hasher ID is not UTF-8"))?;
        if hasher_id != H::ID {
            return Err(SnapshotError::HasherMismatch {
                found: hasher_id,
                expected: H::ID,
            });
        }
        if u32::from_be_bytes(r.array()?) as usize != H::LEN {
            return Err(SnapshotError::Malformed(
                "digest length differs from the hasher's",
            ));
        }
        let next_index = u64::from_be_bytes(r.array()?);
        if next_index > depth.capacity() {
            return Err(SnapshotError::Malformed("next_index exceeds capacity"));
        }
        let root = digest::<H, _>(&r.vec(H::LEN)?)?;
        let metadata_len = u32::from_be_bytes(r.array()?);
        let metadata = r.vec(metadata_len as usize)?;
        let deleted_count = u64::from_be_bytes(r.array()?);
        if deleted_count > next_index {
            return Err(SnapshotError::Malformed("more deleted slots than leaves"));
        }
        let mut deleted = Vec::new();
        for _ in 0..deleted_count {
            let index = u64::from_be_bytes(r.array()?);
            if index >= next_index || deleted.last().is_some_and(|&last| index <= last) {
                return Err(SnapshotError::Malformed(
                    "deleted slots not increasing below next_index",
                ));
            }
            deleted.push(index);
        }
        let mut leaves = Vec::new();
        let mut node = vec![0u8; H::LEN];
        for _ in 0..next_index {
            r.take(&mut node)?;
            leaves.push(digest::<H, _>(&node)?);
        }
        let mut want = [0u8; 32];
        r.sum.finalize(&mut want);
        let mut found = [0u8; 32];
        r.inner.read_exact(&mut found).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => SnapshotError::Truncated,
            _ => SnapshotError::Io(e),
        })?;
        if found != want {
            return Err(SnapshotError::Checksum);
        }
        // A snapshot is the whole stream: bytes after the checksum are not covered by it, so a
        // file carrying them is refused rather than half-trusted.
        let mut extra = [0u8; 1];
        loop {
            match r.inner.read(&mut extra) {
                Ok(0) => break,
                Ok(_) => return Err(SnapshotError::Malformed("bytes after the checksum")),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SnapshotError::Io(e)),
            }
        }
        let empty = H::empty_leaf();
        let leaf = |i: u64| usize::try_from(i).ok().and_then(|i| leaves.get(i));
        if deleted.iter().any(|&i| leaf(i) != Some(&empty)) {
            return Err(SnapshotError::Malformed("a deleted slot holds a leaf"));
        }
        Ok(Self {
            depth,
            hasher_id,
            next_index,
            root,
            metadata,
            deleted,
            leaves,
        })
    }

    /// Rebuilds `tree` (which must be empty and of the snapshot's depth) from the snapshot in one
    /// batch, with the tree's parallel rehash, and returns it. `expect_root` is checked before
    /// anything is written; the recomputed root after. A refused tree is dropped, so pass a fresh
    /// one (for a persistent tree, a fresh directory).
    ///
    /// # Errors
    /// `NotEmpty`, `DepthMismatch`, `UnexpectedRoot`, `RootMismatch`, or the tree's error.
    pub fn import<T>(
        self,
        mut tree: T,
        expect_root: Option<&Digest<H>>,
    ) -> Result<T, SnapshotError<T::Error>>
    where
        T: MerkleTree<Hasher = H>,
        T::Error: std::error::Error + 'static,
    {
        if tree.next_index() != 0 {
            return Err(SnapshotError::NotEmpty {
                next_index: tree.next_index(),
            });
        }
        if tree.depth() != self.depth {
            return Err(SnapshotError::DepthMismatch {
                found: self.depth.get(),
                expected: tree.depth().get(),
            });
        }
        if expect_root.is_some_and(|root| *root != self.root) {
            return Err(SnapshotError::UnexpectedRoot);
        }
        let mut batch = UpdateBatch::<H>::new();
        if !self.leaves.is_empty() {
            batch.set_range(0, self.leaves);
        }
        for index in self.deleted {
            batch.delete(index);
        }
        batch.metadata(self.metadata);
        tree.apply(batch).map_err(SnapshotError::Tree)?;
        if tree.root() != self.root {
            return Err(SnapshotError::RootMismatch);
        }
        Ok(tree)
    }
}
