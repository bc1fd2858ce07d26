//! The Postgres store's error.

/// Why a Postgres store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The client or the server failed (a lost connection among them, once retrying gave up).
    #[error("postgres: {}", describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// The connection string does not parse.
    #[error("bad postgres URL {url:?}: {reason}")]
    BadUrl {
        /// The URL, password redacted.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A tree name must be 1–64 characters of `[A-Za-z0-9._-]`.
    #[error("bad tree name {0:?}: use 1-64 characters of A-Z a-z 0-9 . _ -")]
    BadTreeName(String),
    /// The database's Canopy schema has another version.
    #[error("the database's Canopy schema is version {found}, this build supports {supported}")]
    SchemaVersion {
        /// Version found.
        found: i32,
        /// Version this build creates and reads.
        supported: i32,
    },
    /// A reader asked for a tree the database does not hold.
    #[error("the database holds no tree named {tree:?}")]
    NoSuchTree {
        /// The tree.
        tree: String,
    },
    /// Another writer holds the tree.
    #[error("tree {tree:?} is held by another writer")]
    Locked {
        /// The tree.
        tree: String,
    },
    /// A successor took the tree over (its term is newer): this writer must step down; it
    /// commits nothing more.
    #[error("tree {tree:?}: this writer's term {term} was superseded by term {current}")]
    Fenced {
        /// The tree.
        tree: String,
        /// This writer's term.
        term: i64,
        /// The term now current.
        current: i64,
    },
    /// The stored tree is not at the commit this writer expected (something wrote it without
    /// the lock): nothing was written.
    #[error("tree {tree:?} is at commit {found}, this writer expected {expected}")]
    Conflict {
        /// The tree.
        tree: String,
        /// The commit count this writer's state is at.
        expected: i64,
        /// The stored commit count.
        found: i64,
    },
    /// A reader cannot commit.
    #[error("tree {tree:?} is open read-only")]
    ReadOnly {
        /// The tree.
        tree: String,
    },
    /// The store's connection runtime could not be started.
    #[error("postgres connection runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl PgError {
    /// True for a failure a reconnect can cure: a lost or refused connection, a server shutting
    /// down or starting up.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        let Self::Postgres(error) = self else {
            return false;
        };
        if error.is_closed() {
            return true;
        }
        match error.code() {
            // Class 08 (connection exception), 57P01-03 (admin/crash shutdown, starting up),
            // 57P05 and 25P03 (the session outlived its idle timeout: a writer's lease).
            Some(code) => {
                let code = code.code();
                code.starts_with("08")
                    || matches!(code, "57P01" | "57P02" | "57P03" | "57P05" | "25P03")
            }
            // No SQLSTATE: an I/O error or a closed connection, not a server's refusal.
            None => error.as_db_error().is_none(),
        }
    }
}

/// The server's own words for a server error (tokio-postgres shows only "db error").
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => match std::error::Error::source(error) {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        },
    }
}
