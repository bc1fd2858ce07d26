//! Wakes a replica when its tree's writer commits: `LISTEN canopy_commits` on the server the
//! replica reads (every commit notifies with the tree's name), reconnecting after a lost
//! connection. A server that refuses LISTEN (a hot standby, where notifications never arrive)
//! leaves the replica on polling: [`CommitListener::is_listening`] says which.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::{Condvar, Mutex};
use tokio_postgres::{AsyncMessage, NoTls};

use crate::config::PgConfig;
use crate::schema::NOTIFY_CHANNEL;
use crate::store::{client_config, connection_runtime};
use crate::PgError;

/// How long a listener waits before asking a server that refused LISTEN again (it may have
/// been promoted to primary meanwhile).
const REFUSED_RETRY: Duration = Duration::from_secs(10);

/// Wakes a waiting replica when its tree commits; its connection lives on a thread of its own.
#[derive(Debug)]
pub struct CommitListener {
    /// Runs the listening connection; `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    /// A commit was notified (or the listener connected, and may have missed some) since the
    /// last [`CommitListener::wait`].
    pending: Mutex<bool>,
    woken: Condvar,
    /// LISTEN is in force on a live connection.
    listening: AtomicBool,
    /// The server's last refusal of LISTEN (a hot standby), until it accepts one.
    refusal: Mutex<Option<String>>,
}

impl Shared {
    fn wake(&self) {
        *self.pending.lock() = true;
        self.woken.notify_all();
    }
}

impl CommitListener {
    /// Starts listening for the commits of `config`'s tree. Connection failures are not
    /// errors: the listener retries in the background, and until it listens the caller polls.
    ///
    /// # Errors
    /// [`PgError::BadUrl`] and [`PgError::Runtime`] (the listener's thread cannot start).
    pub fn start(config: &PgConfig) -> Result<Self, PgError> {
        let mut pg = client_config(config)?;
        // A server that vanished without closing the connection (a failover) is noticed by
        // keepalives within seconds, not hours; the caller's slow poll covers the meantime.
        pg.application_name("canopy replica listener")
            .keepalives_idle(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5));
        let runtime = connection_runtime("canopy-postgres-listen")?;
        let shared = Arc::new(Shared::default());
        runtime.spawn(listen_forever(pg, config.tree.clone(), shared.clone()));
        Ok(Self {
            runtime: Some(runtime),
            shared,
        })
    }

    /// True while LISTEN is in force: commits wake [`wait`](Self::wait) as they land.
    #[must_use]
    pub fn is_listening(&self) -> bool {
        self.shared.listening.load(Ordering::Acquire)
    }

    /// Why the server refused LISTEN, if it did the last time the listener asked (a hot
    /// standby: "cannot execute LISTEN during recovery"); the listener asks again every 10 s.
    #[must_use]
    pub fn refusal(&self) -> Option<String> {
        self.shared.refusal.lock().clone()
    }

    /// Waits until the tree commits or `timeout` passes; true when woken by a commit (or by
    /// the listener connecting, which may have missed some). A commit notified before the call
    /// and not yet waited for returns at once.
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut pending = self.shared.pending.lock();
        if !*pending {
            let _ = self.shared.woken.wait_for(&mut pending, timeout);
        }
        std::mem::take(&mut *pending)
    }
}

impl Drop for CommitListener {
    fn drop(&mut self) {
        // Without blocking: a listener may be dropped on a tokio worker.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Listens, reconnects after a lost connection (20 ms doubling to 1 s), and waits longer after
/// a refusal, until the runtime is shut down.
async fn listen_forever(pg: tokio_postgres::Config, tree: String, shared: Arc<Shared>) {
    let mut delay = Duration::from_millis(20);
    loop {
        let ended = listen_once(&pg, &tree, &shared).await;
        shared.listening.store(false, Ordering::Release);
        let pause = match ended {
            // The connection had listened, then ended: try again at once.
            Ok(()) => {
                delay = Duration::from_millis(20);
                delay
            }
            // A server's refusal (a hot standby) is not retried quickly.
            Err(error) if error.code().is_some() => {
                let reason = error
                    .as_db_error()
                    .map_or_else(|| error.to_string(), |db| db.message().to_owned());
                *shared.refusal.lock() = Some(reason);
                REFUSED_RETRY
            }
            Err(_) => {
                delay = (delay * 2).min(Duration::from_secs(1));
                delay
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// One connection: LISTEN, then wake the replica on each of its tree's notifications until the
/// connection ends (`Ok`), or the error that kept it from listening.
async fn listen_once(
    pg: &tokio_postgres::Config,
    tree: &str,
    shared: &Arc<Shared>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = pg.connect(NoTls).await?;
    let messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    let (tree, woken) = (tree.to_owned(), shared.clone());
    let driver = tokio::spawn(async move {
        futures::pin_mut!(messages);
        while let Some(Ok(message)) = messages.next().await {
            if let AsyncMessage::Notification(note) = message {
                if note.payload() == tree {
                    woken.wake();
                }
            }
        }
    });
    if let Err(error) = client
        .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
        .await
    {
        driver.abort();
        return Err(error);
    }
    shared.listening.store(true, Ordering::Release);
    *shared.refusal.lock() = None;
    // Commits may have landed while no connection listened.
    shared.wake();
    let _ = driver.await;
    drop(client);
    Ok(())
}
