// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The part of ERC20 the guard reads.
interface IERC20Read {
    function balanceOf(address owner) external view returns (uint256);
    function allowance(address owner, address spender) external view returns (uint256);
}

/// WalletOps' guard: the code a custodial wallet delegates to by EIP-7702 (`walletops wallets
/// guard enable`). It runs in the wallet's own context and keeps no storage. The wallet calls
/// itself with `execute` (ERC-7821's batch mode, its op data holding the checks); the calls
/// run, then the checks: the transaction reverts if any checked balance fell by more than it
/// allows, or any checked allowance rose above both what it was and what it allows. What a
/// called contract decides at execution can then take no more than the simulation showed.
contract WalletGuard {
    /// One call the wallet makes.
    struct Call {
        address target;
        uint256 value;
        bytes data;
    }

    /// One condition the calls must leave true. `spender` zero: the wallet's balance of
    /// `token` (zero: the native coin) may fall by at most `max`. Otherwise: the wallet's
    /// allowance of `token` for `spender` may end above what it was only up to `max`.
    struct Check {
        address token;
        address spender;
        uint256 max;
    }

    /// ERC-7821: single batch, no op data.
    bytes32 internal constant BATCH = 0x0100000000000000000000000000000000000000000000000000000000000000;
    /// ERC-7821: single batch with op data (here: the checks).
    bytes32 internal constant BATCH_OP_DATA =
        0x0100000000007821000100000000000000000000000000000000000000000000;

    /// Only the wallet itself executes.
    error Unauthorized();
    /// `execute` was given a mode this guard does not run.
    error UnsupportedExecutionMode();
    /// A balance fell by more than its check allows.
    error Overspent(address token, uint256 spent, uint256 max);
    /// An allowance rose above what its check allows.
    error OverGranted(address token, address spender, uint256 allowance, uint256 max);

    /// ERC-7821: whether `mode` is run.
    function supportsExecutionMode(bytes32 mode) external pure returns (bool) {
        return mode == BATCH || mode == BATCH_OP_DATA;
    }

    /// ERC-7821: runs `executionData`'s calls, then its checks; any failure reverts all.
    function execute(bytes32 mode, bytes calldata executionData) external payable {
        if (msg.sender != address(this)) revert Unauthorized();
        Call[] memory calls;
        Check[] memory checks;
        if (mode == BATCH) {
            calls = abi.decode(executionData, (Call[]));
        } else if (mode == BATCH_OP_DATA) {
            bytes memory opData;
            (calls, opData) = abi.decode(executionData, (Call[], bytes));
            checks = abi.decode(opData, (Check[]));
        } else {
            revert UnsupportedExecutionMode();
        }
        uint256[] memory before = new uint256[](checks.length);
        for (uint256 i = 0; i < checks.length; i++) {
            before[i] = _read(checks[i]);
        }
        for (uint256 i = 0; i < calls.length; i++) {
            (bool ok, bytes memory returned) = calls[i].target.call{value: calls[i].value}(calls[i].data);
            if (!ok) {
                assembly {
                    revert(add(returned, 0x20), mload(returned))
                }
            }
        }
        for (uint256 i = 0; i < checks.length; i++) {
            Check memory check = checks[i];
            uint256 now_ = _read(check);
            if (check.spender == address(0)) {
                if (now_ < before[i] && before[i] - now_ > check.max) {
                    revert Overspent(check.token, before[i] - now_, check.max);
                }
            } else if (now_ > before[i] && now_ > check.max) {
                revert OverGranted(check.token, check.spender, now_, check.max);
            }
        }
    }

    /// What `check` watches, now.
    function _read(Check memory check) private view returns (uint256) {
        if (check.spender != address(0)) {
            return IERC20Read(check.token).allowance(address(this), check.spender);
        }
        if (check.token == address(0)) {
            return address(this).balance;
        }
        return IERC20Read(check.token).balanceOf(address(this));
    }

    /// The wallet still takes the native coin.
    receive() external payable {}

    /// The wallet still takes ERC-721 tokens sent with `safeTransferFrom`.
    function onERC721Received(address, address, uint256, bytes calldata) external pure returns (bytes4) {
        return this.onERC721Received.selector;
    }

    /// The wallet still takes ERC-1155 tokens.
    function onERC1155Received(address, address, uint256, uint256, bytes calldata) external pure returns (bytes4) {
        return this.onERC1155Received.selector;
    }

    /// The wallet still takes ERC-1155 batches.
    function onERC1155BatchReceived(address, address, uint256[] calldata, uint256[] calldata, bytes calldata)
        external
        pure
        returns (bytes4)
    {
        return this.onERC1155BatchReceived.selector;
    }
}
