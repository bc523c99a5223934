// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The hook an ERC-1363 spender implements.
interface IERC1363Spender {
    function onApprovalReceived(address owner, uint256 value, bytes calldata data) external returns (bytes4);
}

/// A token whose holds and moves are easy to miss, for the WalletOps effects tests: its
/// `Transfer` has no indexed field, it grants ERC-777-style operators (who move any amount)
/// and it has ERC-1363's `approveAndCall`. Anyone may mint.
contract QuietToken {
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    mapping(address => mapping(address => bool)) public isOperatorFor;

    event Transfer(address from, address to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);
    event AuthorizedOperator(address indexed operator, address indexed tokenHolder);

    function decimals() external pure returns (uint8) {
        return 18;
    }

    function mint(address to, uint256 amount) external {
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        _move(msg.sender, to, amount);
        return true;
    }

    function approve(address spender, uint256 amount) public returns (bool) {
        allowance[msg.sender][spender] = amount;
        emit Approval(msg.sender, spender, amount);
        return true;
    }

    /// ERC-1363: approves, then tells the spender, which may take its payment at once.
    function approveAndCall(address spender, uint256 amount, bytes calldata data) external returns (bool) {
        approve(spender, amount);
        require(
            IERC1363Spender(spender).onApprovalReceived(msg.sender, amount, data)
                == IERC1363Spender.onApprovalReceived.selector,
            "QuietToken: spender refused"
        );
        return true;
    }

    /// ERC-777: `operator` may move any of the caller's tokens.
    function authorizeOperator(address operator) external {
        isOperatorFor[operator][msg.sender] = true;
        emit AuthorizedOperator(operator, msg.sender);
    }

    /// ERC-777's `operatorSend`, without hooks.
    function operatorSend(address from, address to, uint256 amount) external {
        require(isOperatorFor[msg.sender][from], "QuietToken: not an operator");
        _move(from, to, amount);
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= amount, "QuietToken: allowance too low");
        if (allowed != type(uint256).max) {
            allowance[from][msg.sender] = allowed - amount;
        }
        _move(from, to, amount);
        return true;
    }

    function _move(address from, address to, uint256 amount) private {
        require(balanceOf[from] >= amount, "QuietToken: balance too low");
        balanceOf[from] -= amount;
        balanceOf[to] += amount;
        emit Transfer(from, to, amount);
    }
}
