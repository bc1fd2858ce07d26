//! The directory lock every on-disk engine takes, and the refusal to write into a directory
//! that holds something else.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use super::PersistentTreeError;

/// Name of Canopy's lock file inside the database directory.
pub const LOCK_FILE: &str = "canopy.lock";

/// An OS file lock on `<dir>/canopy.lock`, held for a store's lifetime: a second handle on the
/// same directory, in this process or another, gets [`PersistentTreeError::Locked`] at once.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Creates `dir` if missing and locks it. `database_files` are the names the engine keeps
    /// there: a non-empty directory holding none of them (nor the lock file) is refused, never
    /// written to.
    ///
    /// # Errors
    /// [`PersistentTreeError::ForeignDirectory`], [`PersistentTreeError::Locked`],
    /// [`PersistentTreeError::Io`].
    pub fn acquire<E: std::error::Error + 'static>(
        dir: &Path,
        database_files: &[&str],
    ) -> Result<Self, PersistentTreeError<E>> {
        let io = |source| PersistentTreeError::Io {
            path: dir.to_path_buf(),
            source,
        };
        if is_foreign_directory(dir, database_files).map_err(io)? {
            return Err(PersistentTreeError::ForeignDirectory {
                path: dir.to_path_buf(),
            });
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(LOCK_FILE))
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(TryLockError::WouldBlock) => Err(PersistentTreeError::Locked {
                path: PathBuf::from(dir),
            }),
            Err(TryLockError::Error(source)) => Err(io(source)),
        }
    }
}

/// True when `path` is a directory with entries, none of which is a database file.
fn is_foreign_directory(path: &Path, database_files: &[&str]) -> std::io::Result<bool> {
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        // Missing: it will be created. Not a directory: create_dir_all reports it.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(false)
        }
        Err(e) => return Err(e),
    };
    let mut any = false;
    for entry in entries {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name == LOCK_FILE
            || database_files
                .iter()
                .any(|f| name == *f || name.starts_with(&format!("{f}.")))
        {
            return Ok(false);
        }
        any = true;
    }
    Ok(any)
}
