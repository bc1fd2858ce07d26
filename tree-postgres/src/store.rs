//! PostgreSQL behind [`KvStore`]: one connection per handle, one transaction per commit, the
//! writer fenced by a term.
//!
//! The KvStore interface is synchronous and is called from tokio workers too (the follower, the
//! JSON-RPC server), where a synchronous client that runs its own runtime would panic. So the
//! store uses tokio-postgres: its connection task runs on a one-thread runtime the store owns,
//! and each call waits on the client's future with `futures::executor::block_on`, which needs no
//! runtime of its own.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use parking_lot::Mutex;
use tokio_postgres::{Client, NoTls, Statement};
use tree_core::persistent::{KvStore, NodeCache, OpenStore, PersistentTreeError, StoreBatch};

use crate::config::{LockWait, PgConfig, Role};
use crate::schema::{self, LOCK_CLASS, NOTIFY_CHANNEL, SCHEMA_LOCK, SCHEMA_VERSION};
use crate::PgError;

/// How often a waiting standby asks for the tree's lock.
const LOCK_POLL: Duration = Duration::from_millis(100);

/// The waits between attempts to reach a lost server: 20 ms, doubling to 1 s, until a deadline.
pub(crate) struct Backoff {
    deadline: Instant,
    delay: Duration,
}

impl Backoff {
    /// Attempts until `deadline`.
    pub(crate) fn until(deadline: Instant) -> Self {
        Self {
            deadline,
            delay: Duration::from_millis(20),
        }
    }

    /// Sleeps before the next attempt, or says to give up (false) once the deadline passed.
    pub(crate) fn wait(&mut self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        std::thread::sleep(self.delay);
        self.delay = (self.delay * 2).min(Duration::from_secs(1));
        true
    }
}

/// A tree in a PostgreSQL database, behind [`KvStore`].
#[derive(Debug)]
pub struct PgStore {
    pub(crate) inner: Arc<Inner>,
    heartbeat: Option<Heartbeat>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// Drives the connection; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    pg: tokio_postgres::Config,
    config: PgConfig,
    pub(crate) tree_id: i32,
    /// The writer's term (0 for a reader).
    term: i64,
    /// The commit count the stored tree is at, as this writer last left it.
    commits: AtomicI64,
    /// Set once a successor has taken the tree: every later call fails with `Fenced`.
    fenced: AtomicBool,
    session: Mutex<Option<Session>>,
}

/// One connection and its prepared statements.
pub(crate) struct Session {
    pub(crate) client: Client,
    get: Statement,
    get_many: Statement,
    scan_range: Statement,
    scan_from: Statement,
    any: Statement,
    upsert: Statement,
    advance: Statement,
    state: Statement,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("closed", &self.client.is_closed())
            .finish_non_exhaustive()
    }
}

/// The writer's heartbeat thread: keeps its session (and so its lock) alive while the process
/// runs, and only then.
#[derive(Debug)]
struct Heartbeat {
    stop: mpsc::Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl PgStore {
    /// Connects, creates the schema if the database has none, and takes the tree: a writer
    /// creates its row if missing, takes its advisory lock (waiting if `lock_wait` says so)
    /// and starts a new term; a reader requires the tree to exist.
    ///
    /// # Errors
    /// [`PgError::BadUrl`], [`PgError::SchemaVersion`], [`PgError::Locked`],
    /// [`PgError::NoSuchTree`] and Postgres errors.
    pub fn open(config: &PgConfig) -> Result<Self, PgError> {
        let pg = client_config(config)?;
        let runtime = connection_runtime("canopy-postgres")?;
        let mut inner = Inner {
            runtime: Some(runtime),
            pg,
            config: config.clone(),
            tree_id: 0,
            term: 0,
            commits: AtomicI64::new(0),
            fenced: AtomicBool::new(false),
            session: Mutex::new(None),
        };
        let deadline = Instant::now() + config.reconnect_duration();
        let mut client = retry_until(deadline, || inner.connect())?;
        let tree_id = match config.role {
            Role::Writer => ensure_schema_and_tree(&mut client, &config.tree)?,
            Role::Reader => find_tree(&client, &config.tree)?,
        };
        inner.tree_id = tree_id;
        if config.role == Role::Writer {
            take_lock(&client, tree_id, config)?;
            let row = block_on(client.query_one(
                "UPDATE canopy_trees SET term = term + 1, leader = $2 WHERE id = $1 \
                 RETURNING term, commits",
                &[&tree_id, &leader_name()],
            ))?;
            inner.term = row.get(0);
            inner.commits = AtomicI64::new(row.get(1));
        }
        let session = inner.prepare(client)?;
        *inner.session.lock() = Some(session);
        let inner = Arc::new(inner);
        let heartbeat = (config.role == Role::Writer).then(|| Heartbeat::start(&inner));
        Ok(Self { inner, heartbeat })
    }

    /// The tree's id in `canopy_trees`.
    #[must_use]
    pub fn tree_id(&self) -> i32 {
        self.inner.tree_id
    }

    /// The writer's term (0 for a reader): advanced by each writer that takes the tree.
    #[must_use]
    pub fn term(&self) -> i64 {
        self.inner.term
    }

    /// The commit count the stored tree is at, as this handle last saw or left it.
    #[must_use]
    pub fn commits(&self) -> i64 {
        self.inner.commits.load(Ordering::Acquire)
    }

    /// The stored tree's `(term, commits)` now: how a replica learns that a block landed.
    ///
    /// # Errors
    /// Postgres errors.
    pub fn stored_state(&self) -> Result<(i64, i64), PgError> {
        let id = self.inner.tree_id;
        self.inner.call(|s| {
            let row = block_on(s.client.query_one(&s.state, &[&id]))?;
            Ok((row.get(0), row.get(1)))
        })
    }

    /// True once a successor has taken the tree over: this handle will commit nothing more.
    #[must_use]
    pub fn is_fenced(&self) -> bool {
        self.inner.fenced.load(Ordering::Acquire)
    }
}

impl Inner {
    /// A new connection, its session settings made.
    fn connect(&self) -> Result<Client, PgError> {
        let pg = self.pg.clone();
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| PgError::Runtime(std::io::Error::other("the store is being dropped")))?;
        let task = runtime.spawn(async move {
            let (client, connection) = pg.connect(NoTls).await?;
            tokio::spawn(async move {
                // Ends when the connection does; the client's next call reports why.
                let _ = connection.await;
            });
            Ok::<_, tokio_postgres::Error>(client)
        });
        let client = block_on(task).map_err(|e| PgError::Runtime(std::io::Error::other(e)))??;
        let settings = match self.config.role {
            Role::Writer => {
                let lease = self.config.lease_duration().as_millis();
                format!(
                    "SET application_name = 'canopy writer'; \
                     SET idle_session_timeout = {lease}; \
                     SET idle_in_transaction_session_timeout = {lease}"
                )
            }
            Role::Reader => "SET application_name = 'canopy reader'; \
                 SET default_transaction_read_only = on"
                .to_owned(),
        };
        block_on(client.batch_execute(&settings))?;
        Ok(client)
    }

    fn prepare(&self, client: Client) -> Result<Session, PgError> {
        let prepare = |sql: &str| block_on(client.prepare(sql));
        Ok(Session {
            get: prepare(schema::GET)?,
            get_many: prepare(schema::GET_MANY)?,
            scan_range: prepare(schema::SCAN_RANGE)?,
            scan_from: prepare(schema::SCAN_FROM)?,
            any: prepare(schema::ANY)?,
            upsert: prepare(schema::UPSERT)?,
            advance: prepare(schema::ADVANCE)?,
            state: prepare(schema::STATE)?,
            client,
        })
    }

    /// A session after a lost connection: a writer must get its lock back and find its own
    /// term still current, else a successor has the tree and this handle is fenced.
    fn reconnect(&self) -> Result<Session, PgError> {
        let client = self.connect()?;
        if self.config.role == Role::Writer {
            let locked = try_lock(&client, self.tree_id)?;
            let term: i64 = block_on(client.query_one(
                "SELECT term FROM canopy_trees WHERE id = $1",
                &[&self.tree_id],
            ))?
            .get(0);
            if !locked || term != self.term {
                self.fenced.store(true, Ordering::Release);
                return Err(self.fenced_error(term));
            }
        }
        self.prepare(client)
    }

    fn fenced_error(&self, current: i64) -> PgError {
        PgError::Fenced {
            tree: self.config.tree.clone(),
            term: self.term,
            current,
        }
    }

    /// Runs `op` on the session, reconnecting and retrying while the failure is a lost
    /// connection and the reconnect window lasts.
    pub(crate) fn call<R>(
        &self,
        mut op: impl FnMut(&mut Session) -> Result<R, tokio_postgres::Error>,
    ) -> Result<R, PgError> {
        let mut guard = self.session.lock();
        let mut backoff = Backoff::until(Instant::now() + self.config.reconnect_duration());
        loop {
            if self.fenced.load(Ordering::Acquire) {
                return Err(self.fenced_error(self.term + 1));
            }
            if guard.is_none() {
                match self.reconnect() {
                    Ok(session) => *guard = Some(session),
                    Err(error) if error.is_transient() && backoff.wait() => continue,
                    Err(error) => return Err(error),
                }
            }
            let Some(session) = guard.as_mut() else {
                continue;
            };
            let result = op(session).map_err(PgError::from);
            // A closed connection is worth a reconnect whatever error reported it.
            let lost = session.client.is_closed();
            match result {
                Ok(value) => return Ok(value),
                Err(error) if lost || error.is_transient() => {
                    *guard = None;
                    if !backoff.wait() {
                        return Err(error);
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Writes `batch` in one transaction fenced by the term and the commit count.
    fn commit(&self, batch: StoreBatch) -> Result<(), PgError> {
        if self.config.role == Role::Reader {
            return Err(PgError::ReadOnly {
                tree: self.config.tree.clone(),
            });
        }
        // The batch's operations in order, collapsed to each key's last one: a multi-row
        // upsert may touch a key once only.
        let mut last = BTreeMap::new();
        for (key, value) in batch.into_ops() {
            last.insert(key, value);
        }
        let (keys, values): (Vec<Vec<u8>>, Vec<Option<Vec<u8>>>) = last.into_iter().unzip();
        let expected = self.commits.load(Ordering::Acquire);
        let (id, term, tree) = (self.tree_id, self.term, self.config.tree.as_str());
        let mut attempts = 0u32;
        let advanced = self.call(|s| {
            attempts += 1;
            block_on(async {
                let tx = s.client.transaction().await?;
                if tx.execute(&s.advance, &[&id, &term, &expected]).await? == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                let written = expected + 1;
                if !keys.is_empty() {
                    tx.execute(&s.upsert, &[&id, &keys, &values, &written])
                        .await?;
                }
                if written % schema::PURGE_EVERY == 0 && written > schema::TOMBSTONE_COMMITS {
                    let below = written - schema::TOMBSTONE_COMMITS;
                    tx.execute(schema::PURGE, &[&id, &below]).await?;
                }
                tx.execute("SELECT pg_notify($1, $2)", &[&NOTIFY_CHANNEL, &tree])
                    .await?;
                tx.commit().await?;
                Ok(true)
            })
        })?;
        if advanced {
            self.commits.store(expected + 1, Ordering::Release);
            return Ok(());
        }
        let (current_term, commits) = self.call(|s| {
            let row = block_on(s.client.query_one(&s.state, &[&id]))?;
            Ok((row.get::<_, i64>(0), row.get::<_, i64>(1)))
        })?;
        if current_term != term {
            self.fenced.store(true, Ordering::Release);
            return Err(self.fenced_error(current_term));
        }
        // The connection broke after an earlier attempt's COMMIT was sent, and it landed.
        if attempts > 1 && commits == expected + 1 {
            self.commits.store(commits, Ordering::Release);
            return Ok(());
        }
        Err(PgError::Conflict {
            tree: self.config.tree.clone(),
            expected,
            found: commits,
        })
    }
}

impl Heartbeat {
    fn start(inner: &Arc<Inner>) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let every = inner.config.lease_duration() / 3;
        let inner = Arc::downgrade(inner);
        let thread = std::thread::Builder::new()
            .name("canopy-postgres-heartbeat".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    let Some(inner) = inner.upgrade() else { return };
                    // A failed beat is reported by the next real call; once fenced, stop.
                    let _ = inner.call(|s| block_on(s.client.simple_query("")).map(drop));
                    if inner.fenced.load(Ordering::Acquire) {
                        return;
                    }
                }
            })
            .ok();
        Self { stop, thread }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(mut heartbeat) = self.heartbeat.take() {
            let _ = heartbeat.stop.send(());
            if let Some(thread) = heartbeat.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The session first (its connection task ends), then the runtime without blocking:
        // a store may be dropped on a tokio worker, where dropping a runtime would panic.
        drop(self.session.get_mut().take());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The client's view of `config.url` (a bad URL is [`PgError::BadUrl`], password redacted).
pub(crate) fn client_config(config: &PgConfig) -> Result<tokio_postgres::Config, PgError> {
    config.url.parse().map_err(|e| PgError::BadUrl {
        url: redact_url(&config.url),
        reason: format!("{e}"),
    })
}

/// The one-thread runtime that drives a handle's connections, its thread named `name`.
pub(crate) fn connection_runtime(name: &str) -> Result<tokio::runtime::Runtime, PgError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(PgError::Runtime)
}

/// Retries `connect` while it fails with a lost or refused connection and `deadline` allows.
fn retry_until<T>(
    deadline: Instant,
    mut connect: impl FnMut() -> Result<T, PgError>,
) -> Result<T, PgError> {
    let mut backoff = Backoff::until(deadline);
    loop {
        match connect() {
            Err(error) if error.is_transient() && backoff.wait() => {}
            other => return other,
        }
    }
}

/// Creates the schema if missing (checks its version otherwise) and the tree's row; the tree's id.
fn ensure_schema_and_tree(client: &mut Client, tree: &str) -> Result<i32, PgError> {
    check_tree_name(tree)?;
    block_on(async {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await?;
        let exists: bool = tx
            .query_one("SELECT to_regclass('canopy_schema') IS NOT NULL", &[])
            .await?
            .get(0);
        if exists {
            let found: i32 = tx
                .query_one("SELECT version FROM canopy_schema", &[])
                .await?
                .get(0);
            if found != SCHEMA_VERSION {
                return Err(PgError::SchemaVersion {
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
        } else {
            tx.batch_execute(schema::CREATE).await?;
            tx.execute(
                "INSERT INTO canopy_schema (version) VALUES ($1)",
                &[&SCHEMA_VERSION],
            )
            .await?;
        }
        tx.execute(
            "INSERT INTO canopy_trees (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
            &[&tree],
        )
        .await?;
        let id: i32 = tx
            .query_one("SELECT id FROM canopy_trees WHERE name = $1", &[&tree])
            .await?
            .get(0);
        tx.commit().await?;
        Ok(id)
    })
}

/// The id of an existing tree, for a reader (which creates nothing).
fn find_tree(client: &Client, tree: &str) -> Result<i32, PgError> {
    check_tree_name(tree)?;
    let missing = || PgError::NoSuchTree {
        tree: tree.to_owned(),
    };
    let exists: bool =
        block_on(client.query_one("SELECT to_regclass('canopy_schema') IS NOT NULL", &[]))?.get(0);
    if !exists {
        return Err(missing());
    }
    let found: i32 = block_on(client.query_one("SELECT version FROM canopy_schema", &[]))?.get(0);
    if found != SCHEMA_VERSION {
        return Err(PgError::SchemaVersion {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    block_on(client.query_opt("SELECT id FROM canopy_trees WHERE name = $1", &[&tree]))?
        .map(|row| row.get(0))
        .ok_or_else(missing)
}

/// Takes the tree's advisory lock, or waits for it (a standby), or fails.
fn take_lock(client: &Client, tree_id: i32, config: &PgConfig) -> Result<(), PgError> {
    loop {
        if try_lock(client, tree_id)? {
            return Ok(());
        }
        match config.lock_wait {
            LockWait::Fail => {
                return Err(PgError::Locked {
                    tree: config.tree.clone(),
                })
            }
            LockWait::Wait => std::thread::sleep(LOCK_POLL),
        }
    }
}

/// One attempt at the tree's advisory lock (held by the session until it ends).
fn try_lock(client: &Client, tree_id: i32) -> Result<bool, PgError> {
    let row = block_on(client.query_one(
        "SELECT pg_try_advisory_lock($1, $2)",
        &[&LOCK_CLASS, &tree_id],
    ))?;
    Ok(row.get(0))
}

fn check_tree_name(tree: &str) -> Result<(), PgError> {
    let ok = !tree.is_empty()
        && tree.len() <= 64
        && tree
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(PgError::BadTreeName(tree.to_owned()))
    }
}

/// Who leads, as `canopy_trees.leader` records it: host and process.
fn leader_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned());
    format!("{host}:{}", std::process::id())
}

/// The URL without its password, for messages and logs.
#[must_use]
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &userinfo[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The first key after every key that starts with `prefix` (`None`: no such bound).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

impl KvStore for PgStore {
    type Error = PgError;

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, PgError> {
        let id = self.inner.tree_id;
        self.inner.call(|s| {
            Ok(block_on(s.client.query_opt(&s.get, &[&id, &key]))?
                .map(|row| row.get::<_, Vec<u8>>(0)))
        })
    }

    /// One round trip for all of `keys`.
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, PgError> {
        let id = self.inner.tree_id;
        let rows = self
            .inner
            .call(|s| block_on(s.client.query(&s.get_many, &[&id, &keys])))?;
        let mut found: std::collections::HashMap<Vec<u8>, Vec<u8>> = rows
            .into_iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
        Ok(keys.iter().map(|key| found.remove(key)).collect())
    }

    fn commit(&self, batch: StoreBatch) -> Result<(), PgError> {
        self.inner.commit(batch)
    }

    /// Nothing to do: a commit returns once Postgres has made it durable.
    fn flush(&self) -> Result<(), PgError> {
        Ok(())
    }

    fn scan_prefix(
        &self,
        prefix: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), PgError> {
        let id = self.inner.tree_id;
        let end = prefix_end(prefix);
        let rows = self.inner.call(|s| match &end {
            Some(end) => block_on(s.client.query(&s.scan_range, &[&id, &prefix, end])),
            None => block_on(s.client.query(&s.scan_from, &[&id, &prefix])),
        })?;
        for row in rows {
            visit(row.get::<_, &[u8]>(0), row.get::<_, &[u8]>(1));
        }
        Ok(())
    }

    fn is_empty(&self) -> Result<bool, PgError> {
        let id = self.inner.tree_id;
        self.inner
            .call(|s| Ok(!block_on(s.client.query_one(&s.any, &[&id]))?.get::<_, bool>(0)))
    }
}

impl OpenStore for PgStore {
    type Config = PgConfig;

    fn open(config: &PgConfig) -> Result<Self, PersistentTreeError<PgError>> {
        Self::open(config).map_err(PersistentTreeError::Store)
    }

    /// None: the tree lives in a database, not at a path.
    fn path(_config: &PgConfig) -> Option<&std::path::Path> {
        None
    }

    fn node_cache(config: &PgConfig) -> NodeCache {
        NodeCache {
            top_levels: config.cached_levels,
            band_chunks: config.cached_band_chunks,
        }
    }

    /// The bytes of the table that holds every tree of the database (with its indexes): one
    /// catalog lookup, cheap enough for every `/metrics` scrape.
    fn size_on_disk(&self) -> Result<u64, PgError> {
        self.inner.call(|s| {
            let bytes: i64 = block_on(
                s.client
                    .query_one("SELECT pg_total_relation_size('canopy_entries')", &[]),
            )?
            .get(0);
            Ok(u64::try_from(bytes).unwrap_or(0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_first_key_past_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn passwords_never_reach_an_error_message() {
        assert_eq!(
            redact_url("postgres://canopy:secret@db:5432/x"),
            "postgres://canopy:***@db:5432/x"
        );
        assert_eq!(
            redact_url("postgres://canopy@db/x"),
            "postgres://canopy@db/x"
        );
    }

    #[test]
    fn tree_names_are_checked() {
        assert!(check_tree_name("waku-mainnet_1.0").is_ok());
        for bad in ["", "a b", "x;drop", &"a".repeat(65)] {
            assert!(matches!(check_tree_name(bad), Err(PgError::BadTreeName(_))));
        }
    }
}
