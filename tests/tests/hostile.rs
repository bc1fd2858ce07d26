//! Hostile environments: the same path twice, a full disk, a read-only directory, a directory
//! that is not a tree, a path that is a file, a stale lock file. Each must be a typed error (or
//! a working tree where that is the documented behaviour) without a panic, and lose nothing.
//!
//! A real full disk needs a small tmpfs, and a real read-only directory as root needs a
//! read-only mount: both run when this process may mount (root with CAP_SYS_ADMIN) and are
//! counted as skipped otherwise. The out-of-space store always runs. Every filesystem check runs
//! on sled and on redb, each engine with its own record (`env`, `redb_env`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use integration_tests::engines::TestEngine;
use integration_tests::report;
use tree_core::persistent::{PersistentTree, PersistentTreeError, StoreTreeError};
use tree_core::testing::MixHasher;
use tree_core::{Depth, MerkleTree, RehashConfig, UpdateBatch};
use tree_redb::RedbStore;
use tree_sled::{KvStore, MemStore, SledMerkleTree, SledStore, SledTreeError, StoreBatch};

const DEPTH: u8 = 16;

/// Results of every check in this binary per report suite, written as one record per suite by
/// each test as it ends.
type Results = Vec<(String, &'static str, Option<&'static str>)>;
static RESULTS: Mutex<Results> = Mutex::new(Vec::new());

/// Records check `name` on engine `S` as run (`skipped = None`) or skipped with a reason;
/// rewrites that engine's record.
fn done<S: TestEngine>(name: &'static str, skipped: Option<&'static str>) {
    let suite = S::report_suite("env");
    let mut all = RESULTS.lock().unwrap();
    all.push((suite.clone(), name, skipped));
    let results: Vec<(&'static str, Option<&'static str>)> = all
        .iter()
        .filter(|(s, _, _)| *s == suite)
        .map(|(_, n, w)| (*n, *w))
        .collect();
    let checks = results.len() as u64;
    let skipped_names: Vec<String> = results
        .iter()
        .filter_map(|(n, why)| why.map(|w| format!("{n}: {w}")))
        .collect();
    let tmpfs = results
        .iter()
        .any(|(n, why)| *n == "full disk (tmpfs)" && why.is_none());
    // The out-of-space store is a byte-level fake under sled's suite only.
    let store = S::NAME == "sled";
    let full_disk = match (tmpfs, store) {
        (true, true) => "full disk: tmpfs and out-of-space store",
        (true, false) => "full disk: tmpfs",
        (false, true) => "full disk: out-of-space store only",
        (false, false) => "full disk: not run",
    };
    let skipped_text = skipped_names.join("; ");
    let mut notes = vec![("full_disk", full_disk)];
    if !skipped_text.is_empty() {
        notes.push(("skipped_what", skipped_text.as_str()));
    }
    report::record(
        &suite,
        "hostile",
        &[("checks", checks), ("skipped", skipped_names.len() as u64)],
        &notes,
    );
}

fn tree_at<S: TestEngine>(path: &Path) -> Result<PersistentTree<MixHasher, S>, StoreTreeError<S>> {
    S::open_tree(path, Depth::new(DEPTH).unwrap())
}

/// Depth of the full-disk test's tree: deep enough that no engine fills the tree before the
/// 3 MiB disk (redb stores 2^16 leaves in less).
const FULL_DISK_DEPTH: u8 = 20;

fn big_tree_at<S: TestEngine>(
    path: &Path,
) -> Result<PersistentTree<MixHasher, S>, StoreTreeError<S>> {
    S::open_tree(path, Depth::new(FULL_DISK_DEPTH).unwrap())
}

/// Declares `name` for sled and `name_on_redb` for redb, both running `body::<S>`.
macro_rules! on_both_engines {
    ($name:ident, $redb:ident, $body:ident) => {
        #[test]
        fn $name() {
            $body::<SledStore>();
        }

        #[test]
        fn $redb() {
            $body::<RedbStore>();
        }
    };
}

fn block(k: u64, next: u64) -> UpdateBatch<MixHasher> {
    let mut batch = UpdateBatch::new();
    batch.set_range(next, (0..64).map(|i| (k << 32) | (i + 1)));
    batch.metadata(k.to_be_bytes().to_vec());
    batch
}

/// Every file under `dir` with its bytes, to prove a refused open touched nothing.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path.clone());
                out.push((path, Vec::new()));
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

on_both_engines!(
    same_path_twice_is_locked_at_once,
    same_path_twice_is_locked_at_once_on_redb,
    same_path_twice
);

fn same_path_twice<S: TestEngine>() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = tree_at::<S>(dir.path()).unwrap();
    first.apply(block(1, 0)).unwrap();
    let started = Instant::now();
    let second = tree_at::<S>(dir.path());
    let waited = started.elapsed();
    assert!(
        matches!(second, Err(PersistentTreeError::Locked { ref path }) if path == dir.path()),
        "{second:?}"
    );
    assert!(waited < Duration::from_secs(1), "waited {waited:?}");
    // The holder is unaffected, and once it closes the path opens with its data.
    first.apply(block(2, 64)).unwrap();
    let root = first.root();
    drop(first);
    assert_eq!(tree_at::<S>(dir.path()).unwrap().root(), root);
    done::<S>("same path twice", None);
}

on_both_engines!(
    stale_lock_file_of_a_dead_process_does_not_block,
    stale_lock_file_of_a_dead_process_does_not_block_on_redb,
    stale_lock
);

fn stale_lock<S: TestEngine>() {
    let dir = tempfile::tempdir().unwrap();
    drop(tree_at::<S>(dir.path()).unwrap());
    // The lock file stays behind (as after kill -9); the OS lock died with its holder.
    assert!(dir.path().join(tree_sled::LOCK_FILE).exists());
    tree_at::<S>(dir.path()).unwrap();
    done::<S>("stale lock file", None);
}

on_both_engines!(
    non_empty_foreign_directory_is_refused_and_untouched,
    non_empty_foreign_directory_is_refused_and_untouched_on_redb,
    foreign_directory
);

fn foreign_directory<S: TestEngine>() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"not a tree").unwrap();
    std::fs::create_dir(dir.path().join("photos")).unwrap();
    std::fs::write(dir.path().join("photos/a.jpg"), [0xff, 0xd8]).unwrap();
    let before = contents(dir.path());
    let got = tree_at::<S>(dir.path());
    assert!(
        matches!(got, Err(PersistentTreeError::ForeignDirectory { .. })),
        "{got:?}"
    );
    let existing = PersistentTree::<MixHasher, S>::open_existing(&S::durable(dir.path()));
    assert!(
        matches!(existing, Err(PersistentTreeError::ForeignDirectory { .. })),
        "{existing:?}"
    );
    assert_eq!(contents(dir.path()), before, "the directory was modified");
    done::<S>("foreign directory", None);
}

on_both_engines!(
    path_that_is_a_file_is_an_io_error,
    path_that_is_a_file_is_an_io_error_on_redb,
    path_is_a_file
);

fn path_is_a_file<S: TestEngine>() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tree");
    std::fs::write(&file, b"x").unwrap();
    let got = tree_at::<S>(&file);
    assert!(
        matches!(got, Err(PersistentTreeError::Io { .. })),
        "{got:?}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    done::<S>("path is a file", None);
}

/// A store that refuses writes past a byte budget with the OS's "no space" error.
#[derive(Clone)]
struct SmallDisk {
    inner: MemStore,
    budget: std::sync::Arc<AtomicU64>,
}

impl KvStore for SmallDisk {
    type Error = std::io::Error;
    fn get(&self, key: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
        Ok(self.inner.get(key).unwrap_or_default())
    }
    fn commit(&self, batch: StoreBatch) -> std::io::Result<()> {
        let size: usize = batch
            .ops()
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len))
            .sum();
        if (self.inner.bytes() + size) as u64 > self.budget.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        let Ok(()) = self.inner.commit(batch);
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> std::io::Result<()> {
        let Ok(()) = self.inner.scan_prefix(prefix, visit);
        Ok(())
    }
    fn is_empty(&self) -> std::io::Result<bool> {
        Ok(self.inner.is_empty().unwrap_or(false))
    }
}

#[test]
fn out_of_space_store_refuses_whole_batches_and_recovers() {
    let disk = SmallDisk {
        inner: MemStore::new(),
        budget: std::sync::Arc::new(AtomicU64::new(64 * 1024)),
    };
    let depth = Depth::new(DEPTH).unwrap();
    let mut tree = SledMerkleTree::<MixHasher, _>::open_store(
        disk.clone(),
        depth,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .unwrap();
    let mut k = 0;
    let err = loop {
        k += 1;
        let before = (tree.root(), tree.next_index(), tree.metadata().unwrap());
        match tree.apply(block(k, tree.next_index())) {
            Ok(()) => continue,
            Err(e) => {
                assert_eq!(
                    (tree.root(), tree.next_index(), tree.metadata().unwrap()),
                    before
                );
                break e;
            }
        }
    };
    assert!(
        matches!(&err, SledTreeError::Store(e) if e.raw_os_error() == Some(28)),
        "{err:?}"
    );
    // Reopen on the full disk: the last committed batch, intact.
    let reopened = SledMerkleTree::<MixHasher, _>::open_store(
        disk.clone(),
        depth,
        RehashConfig::default(),
        tree_core::persistent::NodeCache::top(2),
    )
    .unwrap();
    assert_eq!(reopened.root(), tree.root());
    assert_eq!(reopened.metadata().unwrap(), (k - 1).to_be_bytes().to_vec());
    assert!(reopened.verify_integrity().unwrap().is_empty());
    // Space freed: the same handle goes on from where it was.
    disk.budget.store(u64::MAX, Ordering::SeqCst);
    tree.apply(block(k, tree.next_index())).unwrap();
    assert_eq!(tree.metadata().unwrap(), k.to_be_bytes().to_vec());
    done::<SledStore>("full disk (out-of-space store)", None);
}

/// Mounts a tmpfs of `size` at `at`; false when this process may not mount.
fn mount_tmpfs(at: &Path, size: &str) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn umount(at: &Path) {
    let _ = Command::new("umount").arg(at).output();
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

on_both_engines!(
    full_tmpfs_gives_typed_errors_and_keeps_committed_batches,
    full_tmpfs_gives_typed_errors_and_keeps_committed_batches_on_redb,
    full_tmpfs
);

fn full_tmpfs<S: TestEngine>() {
    let mount = tempfile::tempdir().unwrap();
    if !mount_tmpfs(mount.path(), "3m") {
        done::<S>("full disk (tmpfs)", Some("cannot mount a tmpfs here"));
        return;
    }
    let path = mount.path().join("db");
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut tree = match big_tree_at::<S>(&path) {
            Ok(tree) => tree,
            // Too small even to create: a typed error is the right answer too.
            Err(e @ (PersistentTreeError::Store(_) | PersistentTreeError::Io { .. })) => {
                println!("tmpfs too small to create a tree: {e}");
                return (0, None);
            }
            Err(e) => panic!("unexpected error creating on tmpfs: {e}"),
        };
        let mut committed = 0u64;
        let mut last = (tree.root(), Vec::new());
        for k in 1..=100_000u64 {
            let before = (tree.root(), tree.next_index());
            match tree.apply(block(k, tree.next_index())) {
                Ok(()) => {
                    committed = k;
                    last = (tree.root(), tree.metadata().unwrap());
                }
                Err(e @ (PersistentTreeError::Store(_) | PersistentTreeError::Indeterminate)) => {
                    println!("tmpfs full after {committed} batches: {e}");
                    assert_eq!((tree.root(), tree.next_index()), before);
                    return (committed, Some(last));
                }
                Err(e) => panic!("unexpected error on a full disk: {e}"),
            }
        }
        panic!("3 MiB never filled");
    }));
    let result = match outcome {
        Ok(result) => result,
        Err(_) => {
            umount(mount.path());
            panic!("a full disk caused a panic");
        }
    };
    if let (committed, Some((root, metadata))) = result {
        assert!(committed > 0);
        // Reopen (still full): the last committed batch or, when sled wrote the failing batch
        // before its flush failed, that one; never a torn one.
        let reopened = catch_unwind(|| big_tree_at::<S>(&path));
        match reopened {
            Ok(Ok(tree)) => {
                let got_meta = tree.metadata().unwrap();
                let next = (committed + 1).to_be_bytes().to_vec();
                assert!(
                    (tree.root() == root && got_meta == metadata) || got_meta == next,
                    "reopened state is not a committed prefix"
                );
                assert!(tree.verify_integrity().unwrap().is_empty());
            }
            Ok(Err(PersistentTreeError::Store(_) | PersistentTreeError::Io { .. })) => {}
            Ok(Err(e)) => panic!("unexpected reopen error on a full disk: {e}"),
            Err(_) => {
                umount(mount.path());
                panic!("reopening on a full disk panicked");
            }
        }
    }
    umount(mount.path());
    done::<S>("full disk (tmpfs)", None);
}

on_both_engines!(
    read_only_directory_is_a_typed_error_and_untouched,
    read_only_directory_is_a_typed_error_and_untouched_on_redb,
    read_only_directory
);

fn read_only_directory<S: TestEngine>() {
    let holder = tempfile::tempdir().unwrap();
    let (dir, mounted) = if is_root() {
        // Root ignores permission bits: only a read-only mount is read-only.
        if !mount_tmpfs(holder.path(), "16m") {
            done::<S>(
                "read-only directory",
                Some("root without mount: permissions do not bind root"),
            );
            return;
        }
        (holder.path().join("db"), true)
    } else {
        (holder.path().join("db"), false)
    };
    {
        let mut tree = tree_at::<S>(&dir).unwrap();
        tree.apply(block(1, 0)).unwrap();
    }
    if mounted {
        let ok = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(holder.path())
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "remount read-only failed");
    } else {
        set_mode(&dir, true);
    }
    let before = contents(&dir);
    let got = catch_unwind(|| tree_at::<S>(&dir).map(|t| t.root()));
    if mounted {
        umount(holder.path());
    } else {
        set_mode(&dir, false);
    }
    let got = got.expect("opening a read-only directory panicked");
    assert!(
        matches!(
            got,
            Err(PersistentTreeError::Io { .. } | PersistentTreeError::Store(_))
        ),
        "{got:?}"
    );
    if !mounted {
        assert_eq!(contents(&dir), before);
    }
    done::<S>("read-only directory", None);
}

/// Makes `dir` and its files read-only (or writable again).
fn set_mode(dir: &Path, read_only: bool) {
    use std::os::unix::fs::PermissionsExt;
    for (path, _) in contents(dir) {
        let mode = match (path.is_dir(), read_only) {
            (true, true) => 0o555,
            (false, true) => 0o444,
            (true, false) => 0o755,
            (false, false) => 0o644,
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mode = if read_only { 0o555 } else { 0o755 };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
}
