// SPDX-License-Identifier: MIT
pragma solidity ^0.8.19;

/// Several calls to one contract in one transaction, as a multicall or a smart account sends
/// them: the calls run in order with this contract as their sender, and one call's revert
/// reverts the whole transaction with that call's reason. The membership contract lets anyone
/// erase an expired membership, so batches like "erase x1 lazily, erase x2 fully" reach it in
/// one transaction this way.
contract Multicall {
    function aggregate(address target, bytes[] calldata calls) external {
        for (uint256 i = 0; i < calls.length; i++) {
            (bool ok, bytes memory answer) = target.call(calls[i]);
            if (!ok) {
                assembly {
                    revert(add(answer, 32), mload(answer))
                }
            }
        }
    }
}
