//! What a membership contract looks like from outside: its events, views and leaf rule.

use alloy::primitives::U256;
use alloy::rpc::types::Log;
use alloy::sol;
use alloy::sol_types::SolEvent;
use hasher::{fr_from_be_bytes, Fr, Hasher, PoseidonHasher};
use serde::{Deserialize, Serialize};

sol! {
    /// WakuRlnV2's events and the views the follower reads (waku-org/waku-rlnv2-contract).
    interface IMembershipSet {
        event MembershipRegistered(uint256 idCommitment, uint256 membershipRateLimit, uint32 index);
        event MembershipErased(uint256 idCommitment, uint32 membershipRateLimit, uint32 index);
        event MembershipExpired(uint256 idCommitment, uint32 membershipRateLimit, uint32 index);
        event RootStored(uint256 newRoot);
        function root() external view returns (uint256);
        function nextFreeIndex() external view returns (uint32);
        function deployedBlockNumber() external view returns (uint32);
        function getRateCommitmentsInRangeBoundsInclusive(uint32 startIndex, uint32 endIndex) external view returns (uint256[] memory);
        function getMerkleProof(uint40 index) external view returns (uint256[20] memory);
        function MERKLE_TREE_DEPTH() external view returns (uint8);
        function HISTORY_SIZE() external view returns (uint8);
        function getRecentRoots() external view returns (uint256[5] memory);
        function getRootAt(uint8 position) external view returns (uint256);
        function isInMembershipSet(uint256 idCommitment) external view returns (bool);
        function getMembershipInfo(uint256 idCommitment) external view returns (uint32, uint32, uint256);
    }
}

sol! {
    /// The ERC1967 proxy's event (EIP-1967): the proxy now runs `implementation`. Emitted by the
    /// proxy's address when it is deployed and at every upgrade.
    event Upgraded(address indexed implementation);
}

pub use IMembershipSet::{MembershipErased, MembershipExpired, MembershipRegistered, RootStored};

/// The implementation an ERC1967 `Upgraded` log names, `None` for any other log; a log with
/// that signature but another shape is an error.
///
/// # Errors
/// A description of what is wrong with the log.
pub fn upgraded(log: &Log) -> Result<Option<alloy::primitives::Address>, LogError> {
    let data = log.data();
    if data.topics().first() != Some(&Upgraded::SIGNATURE_HASH) {
        return Ok(None);
    }
    Upgraded::decode_log_data_validate(data)
        .map(|event| Some(event.implementation))
        .map_err(|e| format!("Upgraded: {e}"))
}

/// How the leaf of a registration is derived from its event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeafRule {
    /// Current WakuRlnV2: the event carries the rate limit, the leaf is
    /// `PoseidonT3(idCommitment, rateLimit)`.
    #[default]
    PoseidonIdAndRateLimit,
    /// An earlier revision: the event's second word is the rate commitment itself.
    RateCommitmentInEvent,
}

/// A membership contract's interface as the follower reads it. Deployments differ; the root
/// check against the contract's `root()` tells whether a profile fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContractProfile {
    /// Depth of the contract's tree.
    pub depth: u8,
    /// How a registration's leaf is computed.
    pub leaf: LeafRule,
    /// Whether the contract emits `MembershipErased`/`MembershipExpired` (erasure; lazy or full).
    pub erasures: bool,
    /// Whether to follow the newest contract's root history (`HISTORY_SIZE()`, `RootStored`,
    /// `getRecentRoots()`) where the contract has one: every stored root is checked and the
    /// history is kept. Contracts without it are detected (`HISTORY_SIZE()` reverts) and
    /// followed as before.
    pub root_history: bool,
    /// Whether to keep members by id (`getMembershipInfo`, `isInMembershipSet`,
    /// `GET /member/{id}`) where the events allow it ([`Self::indexes_members`]).
    pub member_index: bool,
}

impl Default for ContractProfile {
    /// Current WakuRlnV2: depth 20, `PoseidonT3(idCommitment, rateLimit)` leaves, erasures.
    fn default() -> Self {
        Self {
            depth: 20,
            leaf: LeafRule::PoseidonIdAndRateLimit,
            erasures: true,
            root_history: true,
            member_index: true,
        }
    }
}

/// One decoded membership change, in log order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A registration: `leaf` at `index` (a new index, or one freed by an erasure).
    Registered {
        /// The member's index.
        index: u64,
        /// The leaf (rate commitment).
        leaf: Fr,
        /// The member's id commitment.
        id: Fr,
        /// The member's rate limit, where the event carries it
        /// ([`LeafRule::PoseidonIdAndRateLimit`]).
        rate_limit: Option<u32>,
    },
    /// An erasure (or expiry) of the member at `index`: lazy or full, the event does not say.
    Erased {
        /// The member's index.
        index: u64,
        /// The member's id commitment.
        id: Fr,
    },
    /// The contract stored its root at the end of a tree-changing call.
    RootStored {
        /// The root.
        root: Fr,
    },
}

/// Why a log is not a membership event of this profile.
pub type LogError = String;

impl ContractProfile {
    /// Whether members are indexed by id: asked for, registrations carry the rate limit and
    /// erasures are followed.
    #[must_use]
    pub fn indexes_members(&self) -> bool {
        self.member_index && self.leaf == LeafRule::PoseidonIdAndRateLimit && self.erasures
    }

    /// The event signatures (`topic0`) this profile follows; with `root_history`, `RootStored`
    /// and the proxy's `Upgraded` too (whether a contract keeps a root history is a property of
    /// the implementation it runs, which an upgrade changes).
    #[must_use]
    pub fn topics(&self, root_history: bool) -> Vec<alloy::primitives::B256> {
        let mut topics = vec![MembershipRegistered::SIGNATURE_HASH];
        if self.erasures {
            topics.push(MembershipErased::SIGNATURE_HASH);
            topics.push(MembershipExpired::SIGNATURE_HASH);
        }
        if root_history {
            topics.push(RootStored::SIGNATURE_HASH);
            topics.push(Upgraded::SIGNATURE_HASH);
        }
        topics
    }

    /// Decodes one log: exact topics and data length, canonical field elements, an index the
    /// tree can hold.
    ///
    /// # Errors
    /// A description of what is wrong with the log.
    pub fn decode(&self, log: &Log) -> Result<MembershipEvent, LogError> {
        let data = log.data();
        let topic0 = data.topics().first().copied();
        if data.topics().len() != 1 {
            return Err(format!(
                "log has {} topics, membership events have 1",
                data.topics().len()
            ));
        }
        let want = if topic0 == Some(RootStored::SIGNATURE_HASH) {
            32
        } else {
            96
        };
        if data.data.len() != want {
            return Err(format!(
                "log data is {} bytes, this event has {want}",
                data.data.len()
            ));
        }
        let capacity = 1u64 << self.depth;
        let index_ok = |index: u32| -> Result<u64, LogError> {
            let index = u64::from(index);
            if index >= capacity {
                return Err(format!(
                    "index {index} is past the tree's capacity {capacity}"
                ));
            }
            Ok(index)
        };
        match topic0 {
            Some(t) if t == MembershipRegistered::SIGNATURE_HASH => {
                let event = MembershipRegistered::decode_log_data_validate(data)
                    .map_err(|e| format!("MembershipRegistered: {e}"))?;
                let id = canonical(event.idCommitment, "idCommitment")?;
                let word = canonical(event.membershipRateLimit, "second word")?;
                let (leaf, rate_limit) = match self.leaf {
                    // The contract keeps a rate limit as a uint32; a word past it is another
                    // leaf rule, which the root check tells (no member entry is made of it).
                    LeafRule::PoseidonIdAndRateLimit => (
                        PoseidonHasher::hash_pair(&id, &word),
                        u32::try_from(event.membershipRateLimit).ok(),
                    ),
                    LeafRule::RateCommitmentInEvent => (word, None),
                };
                Ok(MembershipEvent::Registered {
                    index: index_ok(event.index)?,
                    leaf,
                    id,
                    rate_limit,
                })
            }
            Some(t) if self.erasures && t == MembershipErased::SIGNATURE_HASH => {
                let event = MembershipErased::decode_log_data_validate(data)
                    .map_err(|e| format!("MembershipErased: {e}"))?;
                Ok(MembershipEvent::Erased {
                    index: index_ok(event.index)?,
                    id: canonical(event.idCommitment, "idCommitment")?,
                })
            }
            Some(t) if self.erasures && t == MembershipExpired::SIGNATURE_HASH => {
                let event = MembershipExpired::decode_log_data_validate(data)
                    .map_err(|e| format!("MembershipExpired: {e}"))?;
                Ok(MembershipEvent::Erased {
                    index: index_ok(event.index)?,
                    id: canonical(event.idCommitment, "idCommitment")?,
                })
            }
            Some(t) if t == RootStored::SIGNATURE_HASH => {
                let event = RootStored::decode_log_data_validate(data)
                    .map_err(|e| format!("RootStored: {e}"))?;
                Ok(MembershipEvent::RootStored {
                    root: canonical(event.newRoot, "stored root")?,
                })
            }
            other => Err(format!("unexpected event topic {other:?}")),
        }
    }
}

/// A `uint256` as a field element, refusing values at or above the BN254 scalar modulus.
///
/// # Errors
/// The value is not canonical.
pub fn canonical(value: U256, what: &str) -> Result<Fr, LogError> {
    fr_from_be_bytes(&value.to_be_bytes::<32>())
        .map_err(|_| format!("{what} {value:#x} is not a canonical field element"))
}

/// A field element as a `uint256`.
#[must_use]
pub fn to_u256(value: &Fr) -> U256 {
    U256::from_be_bytes(hasher::fr_to_be_bytes(value))
}
