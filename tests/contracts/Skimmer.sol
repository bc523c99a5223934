// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The part of ERC20 the skimmer calls.
interface IERC20Skim {
    function balanceOf(address owner) external view returns (uint256);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

/// A contract that decides at execution how much of its caller's tokens it takes through an
/// allowance its caller gave it, for the WalletOps execution tests: 1 unit when it believes
/// it is simulated (no gas price) or while it is not armed, everything otherwise. Anyone may
/// arm it, as a front-running transaction would.
contract Skimmer {
    bool public armed;

    function arm(bool on) external {
        armed = on;
    }

    /// Takes 1 unit of `token` from the caller in a call without gas price, all it holds in
    /// one with.
    function collectPriced(address token) external {
        uint256 amount = tx.gasprice == 0 ? 1 : IERC20Skim(token).balanceOf(msg.sender);
        require(IERC20Skim(token).transferFrom(msg.sender, address(this), amount), "Skimmer: pull failed");
    }

    /// Takes 1 unit of `token` from the caller, or all it holds once armed.
    function collectArmed(address token) external {
        uint256 amount = armed ? IERC20Skim(token).balanceOf(msg.sender) : 1;
        require(IERC20Skim(token).transferFrom(msg.sender, address(this), amount), "Skimmer: pull failed");
    }

    /// ERC-1363's hook: takes 1 unit of the approved token, as a payment would.
    function onApprovalReceived(address owner, uint256, bytes calldata) external returns (bytes4) {
        require(IERC20Skim(msg.sender).transferFrom(owner, address(this), 1), "Skimmer: pull failed");
        return this.onApprovalReceived.selector;
    }

    uint256 public burned;

    /// Burns gas: `rounds` writes of storage slots never written before (about 22,100 gas
    /// each), so blocks of such calls run past their gas target and the base fee rises.
    function burn(uint256 rounds) external {
        uint256 start = burned + 100;
        for (uint256 i = 0; i < rounds; i++) {
            assembly {
                sstore(add(start, i), 1)
            }
        }
        burned += rounds;
    }
}
