//! Calldata for the test membership contract's transactions.

use alloy::primitives::{Bytes, U256};
use alloy::sol;
use alloy::sol_types::SolCall;

sol! {
    /// The test contract's state-changing functions (its views are the follower's).
    interface ITestMembership {
        function register(uint256 idCommitment, uint32 rateLimit) external;
        function register(uint256 idCommitment, uint32 rateLimit, uint256[] calldata idCommitmentsToErase) external;
        function registerMany(uint256[] calldata idCommitments, uint32[] calldata rateLimits) external;
        function eraseMemberships(uint256[] calldata idCommitments) external;
        function eraseMemberships(uint256[] calldata idCommitments, bool eraseFromMembershipSet) external;
        function expireMemberships(uint256[] calldata idCommitments, bool eraseFromMembershipSet) external;
        function initialize() external;
        function upgradeToAndCall(address newImplementation, bytes memory data) external payable;
    }

    /// `contracts/LeanGroup.sol`: zk-kit's Solidity LeanIMT.
    interface ILeanGroup {
        function insert(uint256 leaf) external;
        function insertMany(uint256[] calldata leaves) external;
        function update(uint256 oldLeaf, uint256 newLeaf, uint256[] calldata siblingNodes) external;
        function remove(uint256 oldLeaf, uint256[] calldata siblingNodes) external;
        function root() external view returns (uint256);
        function size() external view returns (uint256);
        function depth() external view returns (uint256);
    }

    /// `contracts/Multicall.sol`: several calls to one contract in one transaction.
    interface IMulticall {
        function aggregate(address target, bytes[] calldata calls) external;
    }
}

use ITestMembership as I;

/// `register(id, rateLimit)`.
#[must_use]
pub fn register(id: U256, rate_limit: u32) -> Bytes {
    I::register_0Call {
        idCommitment: id,
        rateLimit: rate_limit,
    }
    .abi_encode()
    .into()
}

/// `register(id, rateLimit, toErase)`: lazy erasures, then the registration.
#[must_use]
pub fn register_erasing(id: U256, rate_limit: u32, to_erase: Vec<U256>) -> Bytes {
    I::register_1Call {
        idCommitment: id,
        rateLimit: rate_limit,
        idCommitmentsToErase: to_erase,
    }
    .abi_encode()
    .into()
}

/// `registerMany(ids, rateLimits)`: several registrations in one transaction.
#[must_use]
pub fn register_many(ids: Vec<U256>, rate_limits: Vec<u32>) -> Bytes {
    I::registerManyCall {
        idCommitments: ids,
        rateLimits: rate_limits,
    }
    .abi_encode()
    .into()
}

/// `eraseMemberships(ids)` (lazy) or `eraseMemberships(ids, full)`.
#[must_use]
pub fn erase(ids: Vec<U256>, full: Option<bool>) -> Bytes {
    match full {
        None => I::eraseMemberships_0Call { idCommitments: ids }
            .abi_encode()
            .into(),
        Some(full) => I::eraseMemberships_1Call {
            idCommitments: ids,
            eraseFromMembershipSet: full,
        }
        .abi_encode()
        .into(),
    }
}

/// `expireMemberships(ids, full)`: `MembershipExpired` then `MembershipErased` per member.
#[must_use]
pub fn expire(ids: Vec<U256>, full: bool) -> Bytes {
    I::expireMembershipsCall {
        idCommitments: ids,
        eraseFromMembershipSet: full,
    }
    .abi_encode()
    .into()
}

/// `initialize()`: sets up a proxy's storage (the owner is the sender).
#[must_use]
pub fn initialize() -> Bytes {
    I::initializeCall {}.abi_encode().into()
}

/// `upgradeToAndCall(implementation, "")`: the owner moves the proxy to another implementation.
#[must_use]
pub fn upgrade_to(implementation: alloy::primitives::Address) -> Bytes {
    I::upgradeToAndCallCall {
        newImplementation: implementation,
        data: Bytes::new(),
    }
    .abi_encode()
    .into()
}

/// `aggregate(target, calls)` of the harness's multicall contract
/// ([`LocalChain::deploy_multicall`](crate::LocalChain::deploy_multicall)): `calls` (each the
/// calldata of one call to `target`) in one transaction, in order.
#[must_use]
pub fn multicall(target: alloy::primitives::Address, calls: Vec<Bytes>) -> Bytes {
    IMulticall::aggregateCall { target, calls }
        .abi_encode()
        .into()
}

/// LeanGroup's `insert(leaf)`.
#[must_use]
pub fn lean_insert(leaf: U256) -> Bytes {
    ILeanGroup::insertCall { leaf }.abi_encode().into()
}

/// LeanGroup's `insertMany(leaves)`.
#[must_use]
pub fn lean_insert_many(leaves: Vec<U256>) -> Bytes {
    ILeanGroup::insertManyCall { leaves }.abi_encode().into()
}

/// LeanGroup's `update(old, new, siblings)`: the siblings are a LeanIMT proof's.
#[must_use]
pub fn lean_update(old: U256, new: U256, siblings: Vec<U256>) -> Bytes {
    ILeanGroup::updateCall {
        oldLeaf: old,
        newLeaf: new,
        siblingNodes: siblings,
    }
    .abi_encode()
    .into()
}

/// LeanGroup's `remove(old, siblings)`.
#[must_use]
pub fn lean_remove(old: U256, siblings: Vec<U256>) -> Bytes {
    ILeanGroup::removeCall {
        oldLeaf: old,
        siblingNodes: siblings,
    }
    .abi_encode()
    .into()
}

/// LeanGroup's views, encoded: `root()`, `size()`, `depth()`.
#[must_use]
pub fn lean_views() -> [Bytes; 3] {
    [
        ILeanGroup::rootCall {}.abi_encode().into(),
        ILeanGroup::sizeCall {}.abi_encode().into(),
        ILeanGroup::depthCall {}.abi_encode().into(),
    ]
}
