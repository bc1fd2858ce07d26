//! Capped exponential backoff: the one rule for how long to wait after a failure, used by the
//! RPC client's retries, the follower's step loop and `canopy follow --once`.

use std::time::Duration;

use rand::Rng;

use crate::rpc::RetryConfig;

/// Waits that double after each failure, from [`RetryConfig::initial_backoff_ms`] up to
/// [`RetryConfig::max_backoff_ms`] (each at least 1 ms), and start over after a success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    initial_ms: u64,
    max_ms: u64,
    next_ms: u64,
}

impl Backoff {
    /// The backoff `retry` describes, at its first wait.
    #[must_use]
    pub fn new(retry: &RetryConfig) -> Self {
        let initial_ms = retry.initial_backoff_ms.max(1);
        Self {
            initial_ms,
            max_ms: retry.max_backoff_ms.max(1),
            next_ms: initial_ms,
        }
    }

    /// The wait after this failure; the next one is twice as long, up to the cap.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next_ms;
        self.next_ms = self.next_ms.saturating_mul(2).min(self.max_ms);
        Duration::from_millis(wait)
    }

    /// [`next_wait`](Self::next_wait) plus a random part of up to half of it, so clients that
    /// failed together do not retry together.
    pub fn next_wait_jittered(&mut self) -> Duration {
        let wait = self.next_wait();
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        wait + Duration::from_millis(rand::thread_rng().gen_range(0..=ms / 2))
    }

    /// A success: the next wait is the first one again.
    pub fn reset(&mut self) {
        self.next_ms = self.initial_ms;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_starts_over() {
        let retry = RetryConfig {
            initial_backoff_ms: 100,
            max_backoff_ms: 350,
            ..RetryConfig::default()
        };
        let mut backoff = Backoff::new(&retry);
        let waits: Vec<u64> = (0..5)
            .map(|_| u64::try_from(backoff.next_wait().as_millis()).unwrap_or(0))
            .collect();
        assert_eq!(waits, [100, 200, 350, 350, 350]);
        backoff.reset();
        assert_eq!(backoff.next_wait(), Duration::from_millis(100));
        let jittered = backoff.next_wait_jittered();
        assert!((200..=300).contains(&jittered.as_millis()), "{jittered:?}");
        // A zero setting is still a wait: 1 ms.
        let mut zero = Backoff::new(&RetryConfig {
            initial_backoff_ms: 0,
            max_backoff_ms: 0,
            ..RetryConfig::default()
        });
        assert_eq!(zero.next_wait(), Duration::from_millis(1));
    }
}
