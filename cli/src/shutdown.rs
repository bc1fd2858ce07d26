//! SIGINT/SIGTERM handling for the daemons: the first signal asks everything to stop (the
//! follower abandons its current block — each block is one atomic commit — and the server stops
//! accepting and drains), a deadline bounds how long that may take, and a second signal exits at
//! once (still consistent on disk: every commit is atomic).

use std::time::Duration;

use tokio::sync::watch;

/// Resolves once a stop was asked for; cheap to clone into every task that must stop.
#[derive(Clone, Debug)]
pub struct Shutdown {
    asked: watch::Receiver<bool>,
}

impl Shutdown {
    /// Installs the signal handlers on the current runtime. After the first signal, the process
    /// exits with status 1 if it has not stopped within `deadline`; a second signal exits with
    /// 130 at once.
    ///
    /// # Errors
    /// The handlers cannot be installed.
    pub fn install(deadline: Duration) -> std::io::Result<Self> {
        let (tell, asked) = watch::channel(false);
        let mut signals = Signals::new()?;
        tokio::spawn(async move {
            let name = signals.next().await;
            tracing::info!(
                signal = name,
                "stopping: finishing or abandoning the current block (signal again to exit at once)"
            );
            let _ = tell.send(true);
            tokio::select! {
                name = signals.next() => {
                    tracing::warn!(signal = name, "second signal: exiting at once");
                    std::process::exit(130);
                }
                () = tokio::time::sleep(deadline) => {
                    tracing::error!(deadline = ?deadline, "did not stop in time: exiting");
                    std::process::exit(1);
                }
            }
        });
        Ok(Self { asked })
    }

    /// Waits until a stop is asked for.
    pub async fn wait(mut self) {
        // An error means the sender is gone: nobody can ask any more, so never resolve.
        if self.asked.wait_for(|asked| *asked).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// SIGINT and SIGTERM (Ctrl-C elsewhere).
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The next signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
