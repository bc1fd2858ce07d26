//! Where the process stands, for `/health` and `/ready`: written by the follow loop after each
//! step, read by the HTTP handlers. A plain `serve` has no follower and is always in sync with
//! what it was given.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{json, Value};

/// Shared sync state (lock-free counters; the last error behind a mutex).
#[derive(Debug, Default)]
pub struct SyncStatus {
    following: bool,
    /// The providers, for their health.
    client: Option<follower::ChainClient>,
    /// The last step failed (the loop retries it): the tree may not be the chain's now.
    failing: AtomicBool,
    stepped: AtomicBool,
    stopping: AtomicBool,
    head: AtomicU64,
    target: AtomicU64,
    applied: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// A read replica of a PostgreSQL tree (`serve --replica`).
    replica: bool,
    /// The database commit the replica serves.
    replica_commits: AtomicU64,
    /// Seconds (f64 bits) from the primary's commit to the replica serving it, at the last
    /// catch-up that found a new commit.
    replica_lag_bits: AtomicU64,
    /// Blocks the replica was behind its writer when it found its last new commit.
    replica_lag_blocks: AtomicU64,
    /// The writer's commit notifications reach the replica (else it polls).
    replica_listening: AtomicBool,
}

/// What a replica's last catch-up that found new commits brought.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplicaCatchUp {
    /// Seconds from the primary's commit to the replica serving it.
    pub seconds: f64,
    /// Blocks the replica was behind: the block it serves now minus the one it served.
    pub blocks: u64,
}

/// The answer of `/health`: a JSON body (`status`: `synced`, `syncing`, `stalled` (the last step
/// failed and is being retried), `starting`, `stopping`, or `serving` without a follower; and
/// each provider's health) and whether the replica should take traffic.
pub struct Health {
    /// Whether a load balancer should send traffic here (HTTP 200, else 503).
    pub ok: bool,
    /// The body.
    pub body: Value,
}

impl SyncStatus {
    /// The status of a follower of `client`'s providers (health depends on its lag and on its
    /// last step).
    #[must_use]
    pub fn following(client: follower::ChainClient) -> Self {
        Self {
            following: true,
            client: Some(client),
            ..Self::default()
        }
    }

    /// The status of a server without a follower.
    #[must_use]
    pub fn serving() -> Self {
        Self::default()
    }

    /// The status of a read replica (health depends on its last catch-up).
    #[must_use]
    pub fn replica() -> Self {
        Self {
            replica: true,
            ..Self::default()
        }
    }

    /// Records a catch-up of a replica: the commit it now serves, whether notifications reach
    /// it, and, when it found new commits, how far behind it was.
    pub fn caught_up(&self, commits: u64, listening: bool, found: Option<ReplicaCatchUp>) {
        self.replica_commits.store(commits, Ordering::Relaxed);
        self.replica_listening.store(listening, Ordering::Relaxed);
        if let Some(found) = found {
            self.replica_lag_bits
                .store(found.seconds.to_bits(), Ordering::Relaxed);
            self.replica_lag_blocks
                .store(found.blocks, Ordering::Relaxed);
        }
        self.stepped.store(true, Ordering::Release);
        self.failing.store(false, Ordering::Release);
        *self.last_error.lock() = None;
    }

    /// Records the chain's head as a replica given `--rpc` sees it.
    pub fn head_seen(&self, head: u64) {
        self.head.store(head, Ordering::Relaxed);
    }

    /// The replica's last measured lag, in seconds.
    #[must_use]
    pub fn replica_lag_seconds(&self) -> f64 {
        f64::from_bits(self.replica_lag_bits.load(Ordering::Relaxed))
    }

    /// Records a successful step.
    pub fn stepped(&self, outcome: &follower::StepOutcome) {
        self.head.store(outcome.head, Ordering::Relaxed);
        self.target.store(outcome.target, Ordering::Relaxed);
        self.applied.store(outcome.block, Ordering::Relaxed);
        self.stepped.store(true, Ordering::Release);
        self.failing.store(false, Ordering::Release);
        *self.last_error.lock() = None;
    }

    /// Records a failed step (the loop retries transient ones): until a step succeeds the
    /// replica is not `synced`, since a failed step may mean the chain moved under its tree.
    pub fn failed(&self, error: &str) {
        *self.last_error.lock() = Some(error.to_owned());
        self.failing.store(true, Ordering::Release);
    }

    /// Marks the process as stopping: not ready, not healthy.
    pub fn stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// `/health`: synced within `max_lag` blocks of the target, or not.
    #[must_use]
    pub fn health(&self, max_lag: u64, members: u64, last_block: Option<u64>) -> Health {
        if self.replica {
            let status = if self.stopping.load(Ordering::Acquire) {
                "stopping"
            } else if self.failing.load(Ordering::Acquire) {
                "stalled"
            } else {
                "replica"
            };
            // Known only to a replica that watches the chain (`--rpc`).
            let head = Some(self.head.load(Ordering::Relaxed)).filter(|&h| h > 0);
            return Health {
                ok: status == "replica",
                body: json!({
                    "status": status,
                    "next_index": members,
                    "last_block": last_block,
                    "commits": self.replica_commits.load(Ordering::Relaxed),
                    "listening": self.replica_listening.load(Ordering::Relaxed),
                    "lag_seconds": self.replica_lag_seconds(),
                    "lag_blocks": self.replica_lag_blocks.load(Ordering::Relaxed),
                    "head_block": head,
                    "blocks_behind_head": head.map(|h| h.saturating_sub(last_block.unwrap_or(0))),
                    "last_error": *self.last_error.lock(),
                }),
            };
        }
        if !self.following {
            let stopping = self.stopping.load(Ordering::Acquire);
            let status = if stopping { "stopping" } else { "serving" };
            return Health {
                ok: !stopping,
                body: json!({"status": status, "next_index": members, "last_block": last_block}),
            };
        }
        let (head, target, applied) = (
            self.head.load(Ordering::Relaxed),
            self.target.load(Ordering::Relaxed),
            self.applied.load(Ordering::Relaxed),
        );
        let behind = target.saturating_sub(applied);
        let status = if self.stopping.load(Ordering::Acquire) {
            "stopping"
        } else if !self.stepped.load(Ordering::Acquire) {
            "starting"
        } else if self.failing.load(Ordering::Acquire) {
            "stalled"
        } else if behind > max_lag {
            "syncing"
        } else {
            "synced"
        };
        Health {
            ok: status == "synced",
            body: json!({
                "status": status,
                "head_block": head,
                "target_block": target,
                "applied_block": applied,
                "blocks_behind": behind,
                "max_lag_blocks": max_lag,
                "next_index": members,
                "last_error": *self.last_error.lock(),
                "quorum": self.client.as_ref().map(follower::ChainClient::quorum),
                "providers": self.client.as_ref().map(follower::ChainClient::providers),
            }),
        }
    }

    /// `/ready`: the tree holds a state worth serving (a follower has committed a block) and
    /// the process is not stopping.
    #[must_use]
    pub fn ready(&self, last_block: Option<u64>) -> bool {
        !self.stopping.load(Ordering::Acquire) && (!self.following || last_block.is_some())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// After a failed step (a reorg under way, the node down) the replica is not `synced`
    /// until a step succeeds again; `/health` names the providers.
    #[test]
    fn a_failed_step_is_never_synced() {
        let url = "http://127.0.0.1:1".parse().unwrap();
        let client = follower::ChainClient::new(
            url,
            alloy::primitives::Address::ZERO,
            follower::RetryConfig::default(),
        )
        .unwrap();
        let status = SyncStatus::following(client);
        let caught_up = follower::StepOutcome {
            block: 10,
            head: 10,
            target: 10,
            caught_up: true,
            ..follower::StepOutcome::default()
        };
        status.stepped(&caught_up);
        let health = status.health(5, 3, Some(10));
        assert!(health.ok);
        assert_eq!(health.body["status"], "synced");
        assert_eq!(health.body["providers"][0]["name"], "http://127.0.0.1:1");
        status.failed("block 11 changed while it was read (reorg in progress)");
        let health = status.health(5, 3, Some(10));
        assert!(!health.ok);
        assert_eq!(health.body["status"], "stalled");
        status.stepped(&caught_up);
        assert!(status.health(5, 3, Some(10)).ok);
    }
}
