//! Quorum: an answer taken only when enough providers agree (the others reported and asked last),
//! and the providers whose data produced a root the quorum disowned.

use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::Ordering;

use super::failover::Purpose;
use super::{ChainClient, Failure};
use crate::backoff::Backoff;
use crate::metrics;

impl ChainClient {
    /// Forgets which providers served data: a step calls this before it reads a range.
    pub(crate) fn begin_data(&self) {
        self.shared.data_sources.lock().clear();
    }

    /// The quorum disowned the root that the data read since [`begin_data`](Self::begin_data)
    /// produced: the providers that served it are reported and asked last from now on.
    /// Returns whether another provider is left to read the data from again (never with a
    /// quorum of one: one provider's root says nothing about another's logs).
    pub(crate) fn distrust_data_sources(&self, what: &str) -> bool {
        let shared = &self.shared;
        if shared.quorum < 2 {
            return false;
        }
        let sources: Vec<usize> = shared.data_sources.lock().iter().copied().collect();
        for &i in &sources {
            shared.providers[i].disagreed(what.to_owned());
            shared.distrusted[i].store(true, Ordering::Relaxed);
        }
        let left = shared.distrusted.iter().any(|d| !d.load(Ordering::Relaxed));
        if !left {
            // Every provider's data has been disowned once: start over rather than refuse all.
            for d in &shared.distrusted {
                d.store(false, Ordering::Relaxed);
            }
        }
        left && !sources.is_empty()
    }

    /// The answer `quorum` providers agree on. Providers are asked in turn until one answer has
    /// that many votes; those that answered otherwise are reported. When every provider has
    /// answered and none agree, the call fails as transient (the block waits); `None` (the
    /// provider has no such block: it lags or reorged) counts as no vote, not as a lie.
    pub(super) async fn agreed<T, F, Fut>(
        &self,
        method: &'static str,
        what: &str,
        mut op: F,
    ) -> Result<Option<T>, (Failure, usize)>
    where
        T: PartialEq + Debug,
        F: FnMut(usize) -> Fut,
        Fut: Future<Output = Result<Option<T>, Failure>>,
    {
        let shared = &self.shared;
        if shared.quorum < 2 {
            return self.attempt(method, Purpose::Any, op).await.map(|(v, _)| v);
        }
        let n = shared.providers.len();
        let mut backoff = Backoff::new(&shared.retry);
        let mut rounds = 0u32;
        loop {
            rounds += 1;
            let start = self.first(Purpose::Any);
            let mut answers: Vec<(usize, Option<T>)> = Vec::with_capacity(n);
            let mut last_failure = None;
            for k in 0..n {
                let i = (start + k) % n;
                match self.send(method, i, op(i)).await {
                    Ok(answer) => answers.push((i, answer)),
                    Err(Failure::Reorged) => answers.push((i, None)),
                    Err(failure) => {
                        last_failure = Some((failure, i));
                        continue;
                    }
                }
                let Some((_, candidate)) = answers.last() else {
                    continue;
                };
                let votes = answers.iter().filter(|(_, a)| a == candidate).count();
                if votes >= shared.quorum {
                    for (j, answer) in &answers {
                        if answer != candidate && answer.is_some() {
                            shared.providers[*j].disagreed(format!(
                                "{what}: answered {answer:?}, {votes} providers agree on {candidate:?}"
                            ));
                            // Asked last from now on, for votes and for data.
                            shared.distrusted[*j].store(true, Ordering::Relaxed);
                            shared.preferred.store(i, Ordering::Relaxed);
                        }
                    }
                    let (_, agreed) = answers.swap_remove(answers.len() - 1);
                    return Ok(agreed);
                }
            }
            let distinct: Vec<&Option<T>> = answers.iter().fold(Vec::new(), |mut seen, (_, a)| {
                if !seen.contains(&a) {
                    seen.push(a);
                }
                seen
            });
            if answers.len() == n || (distinct.len() > 1 && last_failure.is_none()) {
                let listed: Vec<String> = answers
                    .iter()
                    .map(|(j, a)| format!("{} says {a:?}", shared.providers[*j].name))
                    .collect();
                let message = format!(
                    "no {} providers agree on {what}: {}",
                    shared.quorum,
                    listed.join("; ")
                );
                tracing::warn!("{message}; the block waits");
                metrics::no_quorum();
                return Err((Failure::Transient(message), start));
            }
            if rounds >= shared.retry.max_attempts {
                return Err(last_failure
                    .unwrap_or((Failure::Transient(format!("no quorum on {what}")), start)));
            }
            tokio::time::sleep(backoff.next_wait()).await;
        }
    }
}
