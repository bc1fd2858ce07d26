//! The contract's views by `eth_call`: any block id, or pinned to exactly one block's state
//! (EIP-1898 `{blockHash, requireCanonical}`, or by number with the hash checked before and
//! after the call on a node that refuses that form), decoded and checked canonical.

use std::future::IntoFuture;

use alloy::eips::{BlockId, BlockNumberOrTag, RpcBlockHash};
use alloy::primitives::{Bytes, U256};
use alloy::providers::Provider as _;
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;
use hasher::Fr;

use super::failover::Purpose;
use super::failure::classify;
use super::{BlockRef, ChainClient, Failure, RangeError};
use crate::profile::{canonical, IMembershipSet};
use crate::roots::RootHistory;
use crate::FollowError;

impl ChainClient {
    /// One provider's `eth_call` of `call` at `at`, decoded.
    pub(super) async fn call_from<View: SolCall>(
        &self,
        i: usize,
        call: &View,
        at: BlockId,
    ) -> Result<View::Return, Failure> {
        let request = TransactionRequest::default()
            .to(self.shared.contract)
            .input(alloy::rpc::types::TransactionInput::new(Bytes::from(
                call.abi_encode(),
            )));
        let p = &self.shared.providers[i].alloy;
        let bytes = p
            .call(request)
            .block(at)
            .into_future()
            .await
            .map_err(|e| classify(&e))?;
        View::abi_decode_returns_validate(&bytes).map_err(|e| Failure::Permanent {
            code: None,
            message: format!(
                "undecodable {} result: {e} (is {} the membership contract?)",
                View::SIGNATURE,
                self.shared.contract
            ),
        })
    }

    /// A view at `at` (any block id, not pinned), from the preferred provider.
    pub(super) async fn view<View: SolCall>(
        &self,
        call: View,
        at: BlockId,
    ) -> Result<View::Return, FollowError> {
        let call = &call;
        self.attempt("eth_call", Purpose::Any, |i| self.call_from(i, call, at))
            .await
            .map(|(value, _)| value)
            .map_err(|f| self.error("eth_call", f))
    }

    /// Fails with [`Failure::Reorged`] unless provider `i` still has `block` at its number.
    pub(super) async fn still_there(&self, i: usize, block: BlockRef) -> Result<(), Failure> {
        match self.header_from(i, block.number).await? {
            Some((hash, _)) if hash == block.hash => Ok(()),
            _ => Err(Failure::Reorged),
        }
    }

    /// One provider's `eth_call` of `call` in exactly `block`'s state: by hash (EIP-1898,
    /// `requireCanonical`), or — on a node that refuses that form — by number with the hash
    /// checked before and after the call, so a reorg between them is seen.
    pub(super) async fn pinned_from<View: SolCall>(
        &self,
        i: usize,
        call: &View,
        block: BlockRef,
    ) -> Result<View::Return, Failure> {
        let provider = &self.shared.providers[i];
        if provider.eip1898() {
            let at = BlockId::Hash(RpcBlockHash::from_hash(block.hash, Some(true)));
            match self.call_from(i, call, at).await {
                Ok(value) => return Ok(value),
                Err(failure) if failure.is_malformed_request() => {
                    provider.no_eip1898(&failure.message());
                }
                Err(Failure::Transient(message)) => {
                    // A node answers a hash it no longer has with some error; tell a reorg
                    // from a bad moment.
                    self.still_there(i, block).await?;
                    return Err(Failure::Transient(message));
                }
                Err(failure) => return Err(failure),
            }
        }
        self.still_there(i, block).await?;
        let value = self
            .call_from(i, call, BlockId::Number(block.number.into()))
            .await?;
        self.still_there(i, block).await?;
        Ok(value)
    }

    /// A view at `block`, from the preferred provider (`Purpose::Data`: remembered as a source).
    pub(super) async fn pinned<View: SolCall>(
        &self,
        call: View,
        block: BlockRef,
        purpose: Purpose,
    ) -> Result<View::Return, (Failure, usize)> {
        let call = &call;
        self.attempt("eth_call", purpose, |i| self.pinned_from(i, call, block))
            .await
            .map(|(v, _)| v)
    }

    pub(super) fn pinned_error(&self, block: BlockRef, failure: (Failure, usize)) -> FollowError {
        match failure {
            (Failure::Reorged, _) => FollowError::ReorgInProgress {
                block: block.number,
            },
            other => self.error("eth_call", other),
        }
    }

    /// `root()` in `block`'s state, agreed by the quorum.
    ///
    /// # Errors
    /// Unavailable or disagreeing providers, a refused call, a non-canonical root,
    /// [`FollowError::ReorgInProgress`] when the block left the chain.
    pub async fn root_at(&self, block: BlockRef) -> Result<Fr, FollowError> {
        let call = &IMembershipSet::rootCall {};
        let root = self
            .agreed(
                "eth_call",
                &format!("root() at block {}", block.number),
                |i| async move { self.pinned_from(i, call, block).await.map(Some) },
            )
            .await
            .map_err(|f| self.pinned_error(block, f))?
            .ok_or(FollowError::ReorgInProgress {
                block: block.number,
            })?;
        canonical(root, "root()").map_err(|reason| FollowError::BadData {
            block: block.number,
            reason,
        })
    }

    /// `root()` at `at` (any block id; the preferred provider), for callers that check by hand.
    ///
    /// # Errors
    /// Unavailable node, refused call, a non-canonical root.
    pub async fn root(&self, at: BlockId) -> Result<Fr, FollowError> {
        let root = self.view(IMembershipSet::rootCall {}, at).await?;
        canonical(root, "root()").map_err(|reason| FollowError::Refused {
            method: "eth_call",
            provider: self.names(),
            message: reason,
        })
    }

    /// `nextFreeIndex()` in `block`'s state.
    ///
    /// # Errors
    /// Unavailable node, refused call, the block left the chain.
    pub async fn next_free_index(&self, block: BlockRef) -> Result<u64, FollowError> {
        let n = self
            .pinned(IMembershipSet::nextFreeIndexCall {}, block, Purpose::Data)
            .await
            .map_err(|f| self.pinned_error(block, f))?;
        Ok(u64::from(n))
    }

    /// Whether the contract keeps a root history at `block`: `HISTORY_SIZE()` answers (true)
    /// or reverts (false: a contract without one).
    ///
    /// # Errors
    /// Unavailable node, refused call, the block left the chain, a `HISTORY_SIZE` other than
    /// [`HISTORY_SIZE`](crate::roots::HISTORY_SIZE).
    pub async fn has_root_history(&self, block: BlockRef) -> Result<bool, FollowError> {
        let size = match self
            .pinned(IMembershipSet::HISTORY_SIZECall {}, block, Purpose::Any)
            .await
        {
            Ok(size) => size,
            Err((failure, _)) if failure.is_revert() => return Ok(false),
            Err(other) => return Err(self.pinned_error(block, other)),
        };
        if usize::from(size) != crate::roots::HISTORY_SIZE {
            return Err(FollowError::Refused {
                method: "eth_call",
                provider: self.names(),
                message: format!(
                    "HISTORY_SIZE() is {size}; Canopy follows root histories of {}",
                    crate::roots::HISTORY_SIZE
                ),
            });
        }
        Ok(true)
    }

    /// The contract's root history at `block`, from `getRecentRoots()` (newest first,
    /// zero-padded); `None` when the call reverts (no history at that block yet).
    ///
    /// # Errors
    /// Unavailable node, refused call, the block left the chain, a non-canonical root.
    pub async fn recent_roots(&self, block: BlockRef) -> Result<Option<RootHistory>, FollowError> {
        let words = match self
            .pinned(IMembershipSet::getRecentRootsCall {}, block, Purpose::Any)
            .await
        {
            Ok(words) => words,
            Err((failure, _)) if failure.is_revert() => return Ok(None),
            Err(other) => return Err(self.pinned_error(block, other)),
        };
        let mut roots = [Fr::from(0u64); crate::roots::HISTORY_SIZE];
        for (slot, word) in roots.iter_mut().zip(words) {
            *slot = canonical(word, "getRecentRoots()").map_err(|reason| FollowError::BadData {
                block: block.number,
                reason,
            })?;
        }
        Ok(Some(RootHistory::from_recent_roots(&roots)))
    }

    /// `deployedBlockNumber()` (latest state).
    ///
    /// # Errors
    /// Unavailable node, refused call.
    pub async fn deployed_block(&self) -> Result<u64, FollowError> {
        let at = BlockId::Number(BlockNumberOrTag::Latest);
        let n = self
            .view(IMembershipSet::deployedBlockNumberCall {}, at)
            .await?;
        Ok(u64::from(n))
    }

    /// `getRateCommitmentsInRangeBoundsInclusive(start, end)` in `block`'s state: the leaves,
    /// raw.
    ///
    /// # Errors
    /// [`RangeError::TooLarge`] when the call fails for a page of more than one leaf (gas or
    /// response limits): the caller asks for less.
    pub async fn leaves(
        &self,
        start: u32,
        end: u32,
        block: BlockRef,
    ) -> Result<Vec<U256>, RangeError> {
        let call = IMembershipSet::getRateCommitmentsInRangeBoundsInclusiveCall {
            startIndex: start,
            endIndex: end,
        };
        match self.pinned(call, block, Purpose::Data).await {
            Ok(leaves) => Ok(leaves),
            Err((Failure::TooLarge(_) | Failure::Permanent { .. }, _)) if end > start => {
                Err(RangeError::TooLarge)
            }
            Err(other) => Err(RangeError::Failed(self.pinned_error(block, other))),
        }
    }

    /// `getMerkleProof(index)` at `at`: the sibling path, leaf level first.
    ///
    /// # Errors
    /// Unavailable node, refused call.
    pub async fn merkle_proof(&self, index: u64, at: BlockId) -> Result<Vec<U256>, FollowError> {
        let call = IMembershipSet::getMerkleProofCall {
            index: alloy::primitives::Uint::<40, 1>::from(index),
        };
        Ok(self.view(call, at).await?.to_vec())
    }

    /// The contract's `getMembershipInfo(id)` at `at`: (rate limit, index, rate commitment),
    /// zeros for a non-member.
    ///
    /// # Errors
    /// RPC failures after retries, a revert.
    pub async fn membership_info(
        &self,
        id: U256,
        at: BlockId,
    ) -> Result<(u32, u32, U256), FollowError> {
        let call = IMembershipSet::getMembershipInfoCall { idCommitment: id };
        let answer = self.view(call, at).await?;
        Ok((answer._0, answer._1, answer._2))
    }
}
