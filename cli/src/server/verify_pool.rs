//! RLN verification on its own threads, a bounded number at once, at the lowest CPU priority;
//! the verifier loaded on first use.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rln_glue::verifier::RlnVerifier;
use tokio::sync::Semaphore;

/// RLN verification on its own threads, a bounded number at once, at the lowest CPU priority:
/// a pairing never takes a core that `/proof` (on the async threads) wants.
pub(super) struct VerifyPool {
    pub(super) permits: Arc<Semaphore>,
    threads: Option<rayon::ThreadPool>,
    key: Option<PathBuf>,
    verifier: OnceLock<Result<RlnVerifier, String>>,
}

impl VerifyPool {
    pub(super) fn new(threads: usize, key: Option<PathBuf>) -> Self {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("canopy-verify-{i}"))
            .start_handler(|_| lowest_priority())
            .build();
        if let Err(e) = &pool {
            tracing::warn!("no verifier threads ({e}): /verify runs on the blocking pool");
        }
        Self {
            permits: Arc::new(Semaphore::new(threads)),
            threads: pool.ok(),
            key,
            verifier: OnceLock::new(),
        }
    }

    /// Runs `job` on a verifier thread (the blocking pool if there are none).
    pub(super) async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        match &self.threads {
            Some(pool) => {
                let (tell, answer) = tokio::sync::oneshot::channel();
                pool.spawn(move || {
                    let _ = tell.send(job());
                });
                answer.await.map_err(|e| format!("verifier thread: {e}"))
            }
            None => tokio::task::spawn_blocking(job)
                .await
                .map_err(|e| format!("verifier task: {e}")),
        }
    }

    /// The verifier, loaded on first use: the configured key file, else the key of zerokit's
    /// depth-20 circuit when built with `rln`.
    pub(super) fn verifier(&self) -> Result<&RlnVerifier, String> {
        self.verifier
            .get_or_init(|| crate::verify::load_verifier(self.key.as_deref()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Puts the calling thread in the scheduler's lowest class (Linux `SCHED_IDLE`: it runs only
/// when no other thread wants the core); elsewhere at the lowest normal priority.
fn lowest_priority() {
    #[cfg(unix)]
    {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
        #[cfg(target_os = "linux")]
        let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        #[cfg(not(target_os = "linux"))]
        let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other);
        if let Err(e) = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            ThreadPriority::Min,
            policy,
        ) {
            tracing::warn!("verifier thread keeps its priority: {e:?}");
        }
    }
}
