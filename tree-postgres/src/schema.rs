//! The tables: one row per tree (name, term, commit count), one row per stored entry. The
//! entries are tree-core's keys and values, byte for byte what sled and redb hold.

/// The schema version this build creates and reads.
pub const SCHEMA_VERSION: i32 = 1;

/// The class key of the advisory locks Canopy takes (`'CNPY'`); the tree's id is the other key.
pub(crate) const LOCK_CLASS: i32 = 0x434E_5059;

/// The advisory lock (transaction-scoped) that serialises creating the schema.
pub(crate) const SCHEMA_LOCK: i64 = 0x434E_5059_0000_0000;

/// The channel a commit notifies, with the tree's name as payload (replicas listen on it).
pub const NOTIFY_CHANNEL: &str = "canopy_commits";

/// Creates every table; run once, under [`SCHEMA_LOCK`], when `canopy_schema` is missing.
pub(crate) const CREATE: &str = "
CREATE TABLE canopy_schema (
    version integer NOT NULL,
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row)
);
CREATE TABLE canopy_trees (
    id serial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    -- advanced by every writer that takes the tree over; a commit must carry the current one
    term bigint NOT NULL DEFAULT 0,
    -- advanced by every commit: a writer knows the count its state is at
    commits bigint NOT NULL DEFAULT 0,
    -- tombstones written before this commit are gone: a replica behind it reloads the tree
    purged_below bigint NOT NULL DEFAULT 0,
    leader text,
    created_at timestamptz NOT NULL DEFAULT now(),
    committed_at timestamptz
);
CREATE TABLE canopy_entries (
    tree integer NOT NULL REFERENCES canopy_trees (id),
    key bytea NOT NULL,
    -- NULL: removed (a tombstone, so replicas learn of the removal; purged later)
    value bytea,
    -- the commit that last wrote the row: a replica reads the rows written since its own
    written bigint NOT NULL,
    PRIMARY KEY (tree, key)
);
CREATE INDEX canopy_entries_written ON canopy_entries (tree, written);
";

pub(crate) const GET: &str =
    "SELECT value FROM canopy_entries WHERE tree = $1 AND key = $2 AND value IS NOT NULL";
pub(crate) const GET_MANY: &str = "SELECT key, value FROM canopy_entries \
     WHERE tree = $1 AND key = ANY ($2) AND value IS NOT NULL";
pub(crate) const SCAN_RANGE: &str = "SELECT key, value FROM canopy_entries \
     WHERE tree = $1 AND key >= $2 AND key < $3 AND value IS NOT NULL ORDER BY key";
pub(crate) const SCAN_FROM: &str = "SELECT key, value FROM canopy_entries \
     WHERE tree = $1 AND key >= $2 AND value IS NOT NULL ORDER BY key";
pub(crate) const ANY: &str =
    "SELECT EXISTS (SELECT 1 FROM canopy_entries WHERE tree = $1 AND value IS NOT NULL)";
/// Every written and removed key of a commit in one statement (a removal writes a tombstone).
pub(crate) const UPSERT: &str = "INSERT INTO canopy_entries (tree, key, value, written) \
     SELECT $1, k, v, $4 FROM unnest($2::bytea[], $3::bytea[]) AS t (k, v) \
     ON CONFLICT (tree, key) DO UPDATE SET value = EXCLUDED.value, written = EXCLUDED.written";
/// How many commits a tombstone is kept for: a replica further behind reloads the tree.
pub(crate) const TOMBSTONE_COMMITS: i64 = 1024;
/// Every this many commits the writer purges older tombstones.
pub(crate) const PURGE_EVERY: i64 = 128;
pub(crate) const PURGE: &str = "WITH purged AS (DELETE FROM canopy_entries \
     WHERE tree = $1 AND value IS NULL AND written < $2) \
     UPDATE canopy_trees SET purged_below = $2 WHERE id = $1";
/// A replica's view of the tree: commits, purge horizon, age of the last commit in seconds.
pub(crate) const REPLICA_STATE: &str = "SELECT commits, purged_below, \
     coalesce(extract(epoch FROM now() - committed_at), 0)::float8 \
     FROM canopy_trees WHERE id = $1";
pub(crate) const CHANGED_SINCE: &str =
    "SELECT key, value FROM canopy_entries WHERE tree = $1 AND written > $2";
pub(crate) const ALL_ENTRIES: &str =
    "SELECT key, value FROM canopy_entries WHERE tree = $1 AND value IS NOT NULL";
/// The fence: one row only if this writer's term is current and its state is the stored one.
pub(crate) const ADVANCE: &str = "UPDATE canopy_trees SET commits = commits + 1, \
     committed_at = now() WHERE id = $1 AND term = $2 AND commits = $3";
pub(crate) const STATE: &str = "SELECT term, commits FROM canopy_trees WHERE id = $1";
