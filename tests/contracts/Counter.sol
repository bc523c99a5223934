// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// A contract for WalletOps contract-call tests: state changes, payable calls, and a revert
/// with a reason.
contract Counter {
    uint256 public count;
    uint256 public received;
    address public lastCaller;

    function add(uint256 amount) external {
        count += amount;
        lastCaller = msg.sender;
    }

    function deposit() external payable {
        received += msg.value;
        lastCaller = msg.sender;
    }

    function fail() external pure {
        revert("Counter: told to fail");
    }
}
