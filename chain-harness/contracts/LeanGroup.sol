// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity ^0.8.4;

import {InternalLeanIMT, LeanIMTData} from "@zk-kit/lean-imt.sol/InternalLeanIMT.sol";

/// A group kept in zk-kit's LeanIMT (npm package lean-imt.sol, PoseidonT3), as Semaphore v4 keeps
/// its groups: Canopy's LeanIMT is tested against it on a local chain. Every function is the
/// library's own; this contract only exposes them.
contract LeanGroup {
    using InternalLeanIMT for LeanIMTData;

    LeanIMTData internal tree;

    function insert(uint256 leaf) external {
        tree._insert(leaf);
    }

    function insertMany(uint256[] calldata leaves) external {
        tree._insertMany(leaves);
    }

    function update(uint256 oldLeaf, uint256 newLeaf, uint256[] calldata siblingNodes) external {
        tree._update(oldLeaf, newLeaf, siblingNodes);
    }

    function remove(uint256 oldLeaf, uint256[] calldata siblingNodes) external {
        tree._remove(oldLeaf, siblingNodes);
    }

    function root() external view returns (uint256) {
        return tree._root();
    }

    function size() external view returns (uint256) {
        return tree.size;
    }

    function depth() external view returns (uint256) {
        return tree.depth;
    }
}
