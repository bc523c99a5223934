// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The part of ERC20 the pool calls.
interface IERC20Like {
    function transfer(address to, uint256 amount) external returns (bool);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

/// 1inch Aggregation Router v6's `SwapDescription`, which `SwapPool.swap` takes as 1inch's
/// router does.
struct SwapDescription {
    address srcToken;
    address dstToken;
    address payable srcReceiver;
    address payable dstReceiver;
    uint256 amount;
    uint256 minReturnAmount;
    uint256 flags;
}

/// A constant-product pool (x * y = k) between the native coin and one ERC20, with a 0.3%
/// fee on the input, for the WalletOps dev playground and tests: the local 1inch-compatible
/// aggregator quotes against it and routes swaps through it. The reserves are kept in storage
/// rather than read from balances, so a coin or token sent to the pool outside `addLiquidity`
/// cannot move the price, and `getAmountOut` is exactly what the next swap pays.
contract SwapPool {
    /// How 1inch names the native coin.
    address public constant NATIVE = 0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE;

    IERC20Like public immutable token;
    uint256 public reserveNative;
    uint256 public reserveToken;

    event LiquidityAdded(address indexed provider, uint256 nativeAmount, uint256 tokenAmount);
    event Swapped(address indexed trader, bool nativeIn, uint256 amountIn, uint256 amountOut);

    constructor(address token_) {
        token = IERC20Like(token_);
    }

    /// Adds the coin sent and `tokenAmount` of the token (pulled with transferFrom, so the
    /// caller approves the pool first) to the reserves. No shares: liquidity is a gift.
    function addLiquidity(uint256 tokenAmount) external payable {
        require(msg.value > 0 && tokenAmount > 0, "SwapPool: zero liquidity");
        require(token.transferFrom(msg.sender, address(this), tokenAmount), "SwapPool: token transfer failed");
        reserveNative += msg.value;
        reserveToken += tokenAmount;
        emit LiquidityAdded(msg.sender, msg.value, tokenAmount);
    }

    /// What a swap of `amountIn` pays out at the current reserves: the input less 0.3%,
    /// priced on the curve, rounded down (Uniswap v2's formula).
    function getAmountOut(bool nativeIn, uint256 amountIn) public view returns (uint256) {
        (uint256 reserveIn, uint256 reserveOut) =
            nativeIn ? (reserveNative, reserveToken) : (reserveToken, reserveNative);
        require(reserveIn > 0 && reserveOut > 0, "SwapPool: no liquidity");
        uint256 inWithFee = amountIn * 997;
        return (inWithFee * reserveOut) / (reserveIn * 1000 + inWithFee);
    }

    /// Sells the coin sent for at least `minOut` of the token.
    function swapNativeForToken(uint256 minOut) external payable returns (uint256 amountOut) {
        require(msg.value > 0, "SwapPool: zero input");
        amountOut = getAmountOut(true, msg.value);
        require(amountOut >= minOut, "SwapPool: output below minOut");
        reserveNative += msg.value;
        reserveToken -= amountOut;
        require(token.transfer(msg.sender, amountOut), "SwapPool: token transfer failed");
        emit Swapped(msg.sender, true, msg.value, amountOut);
    }

    /// Sells `amountIn` of the token (pulled with transferFrom: the caller approves the
    /// pool first) for at least `minOut` of the coin.
    function swapTokenForNative(uint256 amountIn, uint256 minOut) external returns (uint256 amountOut) {
        require(amountIn > 0, "SwapPool: zero input");
        amountOut = getAmountOut(false, amountIn);
        require(amountOut >= minOut, "SwapPool: output below minOut");
        require(token.transferFrom(msg.sender, address(this), amountIn), "SwapPool: token transfer failed");
        reserveToken += amountIn;
        reserveNative -= amountOut;
        (bool sent,) = msg.sender.call{value: amountOut}("");
        require(sent, "SwapPool: coin transfer failed");
        emit Swapped(msg.sender, false, amountIn, amountOut);
    }

    /// 1inch v6's `swap`, with the pool as its own executor: the input goes from the caller
    /// to `srcReceiver` as 1inch's router sends it; when that is the pool, the pool swaps it
    /// and pays `dstReceiver` (the caller when zero), reverting below `minReturnAmount`.
    /// An input sent anywhere else buys nothing, as it would through a hostile executor.
    function swap(address executor, SwapDescription calldata desc, bytes calldata)
        external
        payable
        returns (uint256 returnAmount, uint256 spentAmount)
    {
        require(executor == address(this), "SwapPool: unknown executor");
        require(desc.amount > 0, "SwapPool: zero input");
        bool nativeIn = desc.srcToken == NATIVE;
        require(nativeIn ? desc.dstToken == address(token) : desc.dstToken == NATIVE, "SwapPool: pair");
        address payable receiver = desc.dstReceiver == address(0) ? payable(msg.sender) : desc.dstReceiver;
        if (nativeIn) {
            require(msg.value == desc.amount, "SwapPool: value is not the amount");
            if (desc.srcReceiver != address(this)) {
                (bool forwarded,) = desc.srcReceiver.call{value: msg.value}("");
                require(forwarded, "SwapPool: coin transfer failed");
            }
        } else {
            require(msg.value == 0, "SwapPool: value with a token input");
            require(token.transferFrom(msg.sender, desc.srcReceiver, desc.amount), "SwapPool: token transfer failed");
        }
        if (desc.srcReceiver == address(this)) {
            returnAmount = getAmountOut(nativeIn, desc.amount);
            if (nativeIn) {
                reserveNative += desc.amount;
                reserveToken -= returnAmount;
                require(token.transfer(receiver, returnAmount), "SwapPool: token transfer failed");
            } else {
                reserveToken += desc.amount;
                reserveNative -= returnAmount;
                (bool sent,) = receiver.call{value: returnAmount}("");
                require(sent, "SwapPool: coin transfer failed");
            }
            emit Swapped(msg.sender, nativeIn, desc.amount, returnAmount);
        }
        require(returnAmount >= desc.minReturnAmount, "SwapPool: return amount is not enough");
        spentAmount = desc.amount;
    }
}
