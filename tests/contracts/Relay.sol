// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The part of ERC20 the relay calls.
interface IERC20Pull {
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

/// A contract that moves a caller's assets in ways its request does not show, for the
/// WalletOps effects tests: value forwarded from an internal call, tokens pulled through an
/// allowance given earlier, and any batch of calls.
contract Relay {
    /// Forwards the coin sent to `to` from an internal call.
    function forward(address payable to) external payable {
        (bool ok, ) = to.call{value: msg.value}("");
        require(ok, "Relay: forward failed");
    }

    /// Pulls `amount` of `token` from `from` to `to` through an allowance `from` gave it.
    function pull(address token, address from, address to, uint256 amount) external {
        require(IERC20Pull(token).transferFrom(from, to, amount), "Relay: pull failed");
    }

    /// Makes each call in turn, failing all if one fails.
    function batch(address[] calldata targets, bytes[] calldata data) external payable {
        require(targets.length == data.length, "Relay: lengths differ");
        for (uint256 i = 0; i < targets.length; i++) {
            (bool ok, ) = targets[i].call(data[i]);
            require(ok, "Relay: a call failed");
        }
    }
}
