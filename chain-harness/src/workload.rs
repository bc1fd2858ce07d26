//! Random membership workloads: registrations (single, several in one transaction, with lazy
//! erasures), lazy and full erasures, expiries, and empty blocks. A small model of who is a
//! member keeps every transaction valid, so a failed one is a bug.

use alloy::primitives::{Address, Bytes, U256};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::calls;
use crate::{HarnessError, LocalChain};

/// The workload's view of the membership set.
#[derive(Clone)]
pub struct Workload {
    rng: StdRng,
    active: Vec<U256>,
    /// Every id registered so far (erased ones included), in order.
    ever: Vec<U256>,
    /// Probability that a block has no transactions.
    pub empty_block: f64,
    /// Transactions per non-empty block: 1..=this.
    pub max_txs: usize,
}

/// Counts of what a workload sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Transactions.
    pub txs: u64,
    /// Registrations.
    pub registrations: u64,
    /// Lazy erasures.
    pub lazy_erasures: u64,
    /// Full erasures (leaf set to 0).
    pub full_erasures: u64,
}

impl Workload {
    /// A workload from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            active: Vec::new(),
            ever: Vec::new(),
            empty_block: 0.1,
            max_txs: 3,
        }
    }

    /// Draws later choices from `seed` (a reorg's other branch: same model, other transactions).
    pub fn reseed(&mut self, seed: u64) {
        self.rng = StdRng::seed_from_u64(seed);
    }

    /// The id commitments of the members the model holds (registered, not erased).
    #[must_use]
    pub fn member_ids(&self) -> &[U256] {
        &self.active
    }

    /// Every id commitment registered so far, erased ones included.
    #[must_use]
    pub fn registered_ids(&self) -> &[U256] {
        &self.ever
    }

    /// Members the model holds.
    #[must_use]
    pub fn members(&self) -> usize {
        self.active.len()
    }

    fn new_id(&mut self) -> U256 {
        let id = U256::from(self.rng.gen_range(1u128..u128::MAX));
        self.ever.push(id);
        id
    }

    fn take_active(&mut self, max: usize) -> Vec<U256> {
        let n = self.rng.gen_range(1..=max).min(self.active.len());
        self.active.shuffle(&mut self.rng);
        self.active.split_off(self.active.len() - n)
    }

    /// One random transaction's calldata, the model updated as the contract will be.
    pub fn next_tx(&mut self, sent: &mut Sent) -> Bytes {
        let choice = if self.active.len() < 4 {
            self.rng.gen_range(0..2)
        } else {
            self.rng.gen_range(0..7)
        };
        sent.txs += 1;
        match choice {
            0 => {
                let id = self.new_id();
                self.active.push(id);
                sent.registrations += 1;
                calls::register(id, self.rng.gen_range(1..=100))
            }
            1 => {
                let n = self.rng.gen_range(2..=8);
                let ids: Vec<U256> = (0..n).map(|_| self.new_id()).collect();
                let limits = (0..n).map(|_| self.rng.gen_range(1..=100)).collect();
                self.active.extend(&ids);
                sent.registrations += n as u64;
                calls::register_many(ids, limits)
            }
            2 => {
                let ids = self.take_active(3);
                sent.lazy_erasures += ids.len() as u64;
                calls::erase(ids, None)
            }
            3 | 4 => {
                let full = self.rng.gen_bool(0.6);
                let ids = self.take_active(3);
                if full {
                    sent.full_erasures += ids.len() as u64;
                } else {
                    sent.lazy_erasures += ids.len() as u64;
                }
                if choice == 3 {
                    calls::erase(ids, Some(full))
                } else {
                    calls::expire(ids, full)
                }
            }
            _ => {
                let erased = self.take_active(2);
                sent.lazy_erasures += erased.len() as u64;
                let id = self.new_id();
                self.active.push(id);
                sent.registrations += 1;
                calls::register_erasing(id, self.rng.gen_range(1..=100), erased)
            }
        }
    }

    /// Sends one block's transactions to `contract` and mines it (automine must be off);
    /// returns the block number.
    ///
    /// # Errors
    /// RPC failures, or a transaction that failed (the model and the contract disagree).
    pub async fn block(
        &mut self,
        chain: &LocalChain,
        contract: Address,
        sent: &mut Sent,
    ) -> Result<u64, HarnessError> {
        let mut hashes = Vec::new();
        if !self.rng.gen_bool(self.empty_block) {
            let n = self.rng.gen_range(1..=self.max_txs.max(1));
            for _ in 0..n {
                let data = self.next_tx(sent);
                hashes.push(chain.send(contract, data).await?);
            }
        }
        let number = chain.mine().await?;
        let failed = chain.failed_transactions(&hashes).await?;
        if failed != 0 {
            return Err(HarnessError::Rpc(format!(
                "{failed} transactions of block {number} failed"
            )));
        }
        Ok(number)
    }

    /// `n` registrations in transactions of `per_tx`, all mined into the next block.
    ///
    /// # Errors
    /// RPC failures.
    pub async fn register_block(
        &mut self,
        chain: &LocalChain,
        contract: Address,
        n: usize,
        per_tx: usize,
        sent: &mut Sent,
    ) -> Result<u64, HarnessError> {
        let mut left = n;
        while left > 0 {
            let k = left.min(per_tx.max(1));
            let ids: Vec<U256> = (0..k).map(|_| self.new_id()).collect();
            let limits = (0..k).map(|_| self.rng.gen_range(1..=100)).collect();
            self.active.extend(&ids);
            chain
                .send(contract, calls::register_many(ids, limits))
                .await?;
            sent.txs += 1;
            sent.registrations += k as u64;
            left -= k;
        }
        chain.mine().await
    }
}
