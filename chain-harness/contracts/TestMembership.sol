// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity ^0.8.24;

// A membership contract for Canopy's chain tests. Its tree, events and views follow WakuRlnV2
// (waku-org/waku-rlnv2-contract): a zk-kit LazyIMT of depth 20 whose leaves are
// PoseidonT3(idCommitment, rateLimit), built on the same libraries from npm (zk-kit's LazyIMT as
// `@zk-kit/lazy-imt.sol`, with the `merkleProofElements` WakuRlnV2's `getMerkleProof` calls). Deposits, prices and
// expiry timers are left out: they never touch the tree. Erasure, as in WakuRlnV2, is lazy
// (the leaf stays until its index is reused) or full (the leaf is set to 0), and both emit the
// same event; freed indices are reused last-in first-out. The root history is the newest
// contract's (logos-messaging-rlnv2-contract): a root stored at the end of every register and
// of every full-erasure call that erased anything, never for lazy erasures, duplicates kept;
// `getRecentRoots()`, `getRootAt(uint8)`, `getMembershipInfo` and `isInMembershipSet` as there.
// Like WakuRlnV2 it can run behind OpenZeppelin's ERC1967Proxy as a UUPS implementation
// (`initialize()`, `upgradeToAndCall` by the owner), so a test can deploy the proxy on the
// implementation without a root history and upgrade it to the one with: the newest contract's
// storage layout appends the history to the old one's, so an upgrade keeps the tree and starts
// an empty history, as here.

import {InternalLazyIMT, LazyIMTData} from "@zk-kit/lazy-imt.sol/InternalLazyIMT.sol";
import {PoseidonT3} from "poseidon-solidity/PoseidonT3.sol";
import {UUPSUpgradeable} from "@openzeppelin/contracts/proxy/utils/UUPSUpgradeable.sol";
// Compiled with this contract so the harness can deploy the proxy.
import {ERC1967Proxy} from "@openzeppelin/contracts/proxy/ERC1967/ERC1967Proxy.sol";

contract TestMembership is UUPSUpgradeable {
    uint256 public constant Q =
        21888242871839275222246405745257275088548364400416034343698204186575808495617;
    uint8 public constant MERKLE_TREE_DEPTH = 20;
    uint32 public constant MAX_MEMBERSHIP_SET_SIZE = uint32(1 << MERKLE_TREE_DEPTH);

    uint32 public deployedBlockNumber;
    uint32 public nextFreeIndex;
    /// When true the second word of MembershipRegistered is the rate commitment (the older
    /// revision of WakuRlnV2's event), otherwise the rate limit (the current one).
    bool public immutable emitsRateCommitment;
    /// The older revision keeps no root history: its HISTORY_SIZE, getRecentRoots and
    /// getRootAt revert as missing functions would, and it emits no RootStored.
    bool internal immutable storesRoots;
    /// Who may upgrade the proxy (WakuRlnV2: `onlyOwner`).
    address public owner;
    bool private initialized;

    uint8 internal constant ROOTS_KEPT = 5;
    uint256[ROOTS_KEPT] private recentRoots;
    uint8 private rootIndex;
    bool private rootsInitialized;

    struct Membership {
        uint32 rateLimit;
        uint32 index;
    }

    LazyIMTData internal merkleTree;
    mapping(uint256 => Membership) public memberships;
    uint32[] internal indicesOfLazilyErasedMemberships;

    event MembershipRegistered(uint256 idCommitment, uint256 membershipRateLimit, uint32 index);
    event MembershipExpired(uint256 idCommitment, uint32 membershipRateLimit, uint32 index);
    event MembershipErased(uint256 idCommitment, uint32 membershipRateLimit, uint32 index);
    event RootStored(uint256 newRoot);

    error InvalidIdCommitment(uint256 idCommitment);
    error InvalidPaginationQuery(uint256 startIndex, uint256 endIndex);
    error MembershipDoesNotExist(uint256 idCommitment);

    /// Deployed on its own the contract is ready; as an implementation, its proxy's storage
    /// is set up by `initialize()`.
    constructor(bool _emitsRateCommitment, bool _storesRoots) {
        emitsRateCommitment = _emitsRateCommitment;
        storesRoots = _storesRoots;
        _initialize();
    }

    function initialize() external {
        _initialize();
    }

    function _initialize() internal {
        require(!initialized, "already initialized");
        initialized = true;
        owner = msg.sender;
        deployedBlockNumber = uint32(block.number);
        InternalLazyIMT._init(merkleTree, MERKLE_TREE_DEPTH);
    }

    function _authorizeUpgrade(address) internal view override {
        require(msg.sender == owner, "not the owner");
    }

    function register(uint256 idCommitment, uint32 rateLimit) external {
        _register(idCommitment, rateLimit);
    }

    /// Erases some memberships lazily, then registers (WakuRlnV2's three-argument register).
    function register(uint256 idCommitment, uint32 rateLimit, uint256[] calldata idCommitmentsToErase) external {
        _erase(idCommitmentsToErase, false, false);
        _register(idCommitment, rateLimit);
    }

    /// Several registrations in one transaction.
    function registerMany(uint256[] calldata idCommitments, uint32[] calldata rateLimits) external {
        require(idCommitments.length == rateLimits.length, "length mismatch");
        for (uint256 i = 0; i < idCommitments.length; i++) {
            _register(idCommitments[i], rateLimits[i]);
        }
    }

    function eraseMemberships(uint256[] calldata idCommitments) external {
        _erase(idCommitments, false, false);
    }

    function eraseMemberships(uint256[] calldata idCommitments, bool eraseFromMembershipSet) external {
        _erase(idCommitments, eraseFromMembershipSet, false);
    }

    /// Erasure of expired memberships: MembershipExpired, then MembershipErased, as WakuRlnV2.
    function expireMemberships(uint256[] calldata idCommitments, bool eraseFromMembershipSet) external {
        _erase(idCommitments, eraseFromMembershipSet, true);
    }

    function root() public view returns (uint256) {
        return InternalLazyIMT._root(merkleTree, MERKLE_TREE_DEPTH);
    }

    function HISTORY_SIZE() external view returns (uint8) {
        require(storesRoots);
        return ROOTS_KEPT;
    }

    function _storeNewRoot(uint256 newRoot) internal {
        if (!storesRoots) return;
        if (!rootsInitialized) {
            recentRoots[0] = newRoot;
            rootIndex = 1;
            rootsInitialized = true;
        } else {
            recentRoots[rootIndex] = newRoot;
            rootIndex = (rootIndex + 1) % ROOTS_KEPT;
        }
        emit RootStored(newRoot);
    }

    function getRecentRoots() external view returns (uint256[ROOTS_KEPT] memory ordered) {
        require(storesRoots);
        if (!rootsInitialized) {
            return ordered;
        }
        uint8 index = rootIndex;
        for (uint8 i = 0; i < ROOTS_KEPT; i++) {
            uint8 idx = (index + ROOTS_KEPT - 1 - i) % ROOTS_KEPT;
            ordered[i] = recentRoots[idx];
        }
    }

    function getRootAt(uint8 position) external view returns (uint256) {
        require(storesRoots);
        require(position < ROOTS_KEPT, "Out of range");
        require(rootsInitialized, "No roots yet");
        uint8 index = (rootIndex + ROOTS_KEPT - 1 - position) % ROOTS_KEPT;
        return recentRoots[index];
    }

    function isInMembershipSet(uint256 idCommitment) public view returns (bool) {
        (,, uint256 rateCommitment) = getMembershipInfo(idCommitment);
        return rateCommitment != 0;
    }

    /// (rate limit, index, rate commitment), the last read from the tree as the contract does.
    function getMembershipInfo(uint256 idCommitment) public view returns (uint32, uint32, uint256) {
        Membership memory membership = memberships[idCommitment];
        if (membership.rateLimit == 0) {
            return (0, 0, 0);
        }
        return (
            membership.rateLimit,
            membership.index,
            merkleTree.elements[InternalLazyIMT._indexForElement(0, membership.index)]
        );
    }

    function getRateCommitmentsInRangeBoundsInclusive(uint32 startIndex, uint32 endIndex)
        public
        view
        returns (uint256[] memory)
    {
        if (startIndex > endIndex) revert InvalidPaginationQuery(startIndex, endIndex);
        if (endIndex >= nextFreeIndex) revert InvalidPaginationQuery(startIndex, endIndex);
        uint256[] memory rateCommitments = new uint256[](endIndex - startIndex + 1);
        for (uint32 i = startIndex; i <= endIndex; i++) {
            rateCommitments[i - startIndex] = merkleTree.elements[InternalLazyIMT._indexForElement(0, i)];
        }
        return rateCommitments;
    }

    /// The Merkle proof of `index` (siblings from the leaf up), as WakuRlnV2 gives it: zk-kit's
    /// `merkleProofElements`, which reverts "LazyIMT: leaf must exist" from `nextFreeIndex()` on.
    function getMerkleProof(uint40 index) public view returns (uint256[MERKLE_TREE_DEPTH] memory proof) {
        uint256[] memory elements = InternalLazyIMT._merkleProofElements(merkleTree, index, MERKLE_TREE_DEPTH);
        for (uint8 i = 0; i < MERKLE_TREE_DEPTH; i++) {
            proof[i] = elements[i];
        }
    }

    function _register(uint256 idCommitment, uint32 rateLimit) internal {
        if (idCommitment == 0 || idCommitment >= Q) revert InvalidIdCommitment(idCommitment);
        require(rateLimit > 0, "rate limit must be positive");
        require(memberships[idCommitment].rateLimit == 0, "Duplicate idCommitment: membership already exists");
        uint32 index;
        bool indexReused;
        uint256 reusable = indicesOfLazilyErasedMemberships.length;
        if (reusable != 0) {
            index = indicesOfLazilyErasedMemberships[reusable - 1];
            indicesOfLazilyErasedMemberships.pop();
            indexReused = true;
        } else {
            require(nextFreeIndex < MAX_MEMBERSHIP_SET_SIZE, "Membership set is full");
            index = nextFreeIndex;
        }
        memberships[idCommitment] = Membership({rateLimit: rateLimit, index: index});
        uint256 rateCommitment = PoseidonT3.hash([idCommitment, uint256(rateLimit)]);
        if (indexReused) {
            InternalLazyIMT._update(merkleTree, rateCommitment, index);
        } else {
            InternalLazyIMT._insert(merkleTree, rateCommitment);
            nextFreeIndex += 1;
        }
        _storeNewRoot(root());
        emit MembershipRegistered(idCommitment, emitsRateCommitment ? rateCommitment : uint256(rateLimit), index);
    }

    function _erase(uint256[] calldata idCommitments, bool eraseFromMembershipSet, bool expired) internal {
        bool treeModified = false;
        for (uint256 i = 0; i < idCommitments.length; i++) {
            Membership memory membership = memberships[idCommitments[i]];
            if (membership.rateLimit == 0) revert MembershipDoesNotExist(idCommitments[i]);
            indicesOfLazilyErasedMemberships.push(membership.index);
            delete memberships[idCommitments[i]];
            if (expired) emit MembershipExpired(idCommitments[i], membership.rateLimit, membership.index);
            emit MembershipErased(idCommitments[i], membership.rateLimit, membership.index);
            if (eraseFromMembershipSet) {
                InternalLazyIMT._update(merkleTree, 0, membership.index);
                treeModified = true;
            }
        }
        if (treeModified) _storeNewRoot(root());
    }
}
