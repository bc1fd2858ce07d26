//! The chain as the follower reads it: its id (every provider must agree), the head, a block's
//! hash and parent hash (agreed by the quorum), and the contract's logs.

use std::future::IntoFuture;

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::B256;
use alloy::providers::Provider as _;
use alloy::rpc::types::{Filter, Log};

use super::failover::Purpose;
use super::failure::classify;
use super::{BlockRef, ChainClient, Failure, RangeError};
use crate::FollowError;

impl ChainClient {
    /// `eth_chainId`, which every provider must agree on.
    ///
    /// # Errors
    /// A provider is unavailable; providers of different chains.
    pub async fn chain_id(&self) -> Result<u64, FollowError> {
        let mut first: Option<(u64, String)> = None;
        for (i, provider) in self.shared.providers.iter().enumerate() {
            let id = self
                .send("eth_chainId", i, async {
                    provider
                        .alloy
                        .get_chain_id()
                        .await
                        .map_err(|e| classify(&e))
                })
                .await;
            let id = match id {
                Ok(id) => id,
                // A provider down now is the failover's business; the others decide.
                Err(Failure::Transient(_)) if self.shared.providers.len() > 1 => continue,
                Err(failure) => return Err(self.error("eth_chainId", (failure, i))),
            };
            match &first {
                Some((chain, name)) if *chain != id => {
                    return Err(FollowError::Config(format!(
                        "the providers serve different chains: {name} chain {chain}, {} chain {id}",
                        provider.name
                    )))
                }
                Some(_) => {}
                None => first = Some((id, provider.name.clone())),
            }
        }
        match first {
            Some((id, _)) => Ok(id),
            None => self
                .attempt("eth_chainId", Purpose::Any, |i| async move {
                    let p = &self.shared.providers[i].alloy;
                    p.get_chain_id().await.map_err(|e| classify(&e))
                })
                .await
                .map(|(id, _)| id)
                .map_err(|f| self.error("eth_chainId", f)),
        }
    }

    /// `eth_blockNumber` of the preferred provider.
    ///
    /// # Errors
    /// Every provider is unavailable.
    pub async fn head(&self) -> Result<u64, FollowError> {
        self.attempt("eth_blockNumber", Purpose::Any, |i| async move {
            let p = &self.shared.providers[i].alloy;
            p.get_block_number().await.map_err(|e| classify(&e))
        })
        .await
        .map(|(n, _)| n)
        .map_err(|f| self.error("eth_blockNumber", f))
    }

    /// The preferred provider's newest block, number and hash in one request (what a watcher of
    /// the head needs to tell a block replaced at the same height).
    ///
    /// # Errors
    /// Every provider is unavailable; a node without a latest block.
    pub async fn head_block(&self) -> Result<BlockRef, FollowError> {
        self.attempt("eth_getBlockByNumber", Purpose::Any, |i| async move {
            let p = &self.shared.providers[i].alloy;
            let block = p
                .get_block_by_number(BlockNumberOrTag::Latest)
                .into_future()
                .await
                .map_err(|e| classify(&e))?;
            block
                .map(|b| BlockRef {
                    number: b.header.number,
                    hash: b.header.hash,
                })
                .ok_or_else(|| Failure::Transient("no latest block".into()))
        })
        .await
        .map(|(block, _)| block)
        .map_err(|f| self.error("eth_getBlockByNumber", f))
    }

    /// One provider's hash and parent hash of block `number`, in one request.
    pub(super) async fn header_from(
        &self,
        i: usize,
        number: u64,
    ) -> Result<Option<(B256, B256)>, Failure> {
        let p = &self.shared.providers[i].alloy;
        let block = p
            .get_block_by_number(BlockNumberOrTag::Number(number))
            .into_future()
            .await
            .map_err(|e| classify(&e))?;
        Ok(block.map(|b| (b.header.hash, b.header.inner.parent_hash)))
    }

    /// The hash and parent hash of block `number` (agreed by the quorum), `None` when the node
    /// has no such block.
    ///
    /// # Errors
    /// The providers are unavailable or do not agree.
    pub async fn header(&self, number: u64) -> Result<Option<(B256, B256)>, FollowError> {
        self.agreed(
            "eth_getBlockByNumber",
            &format!("the hash of block {number}"),
            |i| self.header_from(i, number),
        )
        .await
        .map_err(|f| self.error("eth_getBlockByNumber", f))
    }

    /// Block `number` as the node has it now, to pin views at.
    ///
    /// # Errors
    /// As [`header`](Self::header); [`FollowError::ReorgInProgress`] when the node has no such
    /// block.
    pub async fn block(&self, number: u64) -> Result<BlockRef, FollowError> {
        match self.header(number).await? {
            Some((hash, _)) => Ok(BlockRef { number, hash }),
            None => Err(FollowError::ReorgInProgress { block: number }),
        }
    }

    /// The contract's logs with these `topics` in blocks `from..=to`.
    ///
    /// # Errors
    /// [`RangeError::TooLarge`] when the node asks for a smaller range.
    pub async fn logs(&self, from: u64, to: u64, topics: &[B256]) -> Result<Vec<Log>, RangeError> {
        let filter = Filter::new()
            .address(self.shared.contract)
            .event_signature(topics.to_vec())
            .from_block(from)
            .to_block(to);
        let filter = &filter;
        match self
            .attempt("eth_getLogs", Purpose::Data, |i| async move {
                let p = &self.shared.providers[i].alloy;
                p.get_logs(filter).await.map_err(|e| classify(&e))
            })
            .await
        {
            Ok((logs, _)) => Ok(logs),
            Err((Failure::TooLarge(_), _)) => Err(RangeError::TooLarge),
            Err(other) => Err(RangeError::Failed(self.error("eth_getLogs", other))),
        }
    }
}
