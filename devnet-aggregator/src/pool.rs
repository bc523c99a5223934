//! The SwapPool contract on the node: its bindings, its pricing (the contract's own formula,
//! so a quote is exactly what the swap pays), and deploying and funding one.

use std::time::Duration;

use alloy::{
    network::TransactionBuilder as _,
    primitives::{Address, Bytes, U256},
    providers::{Provider, RootProvider},
    rpc::types::TransactionRequest,
    sol,
    sol_types::{SolCall, SolConstructor as _},
};
use anyhow::Context as _;

sol! {
    /// 1inch Aggregation Router v6's swap terms.
    struct SwapDescription {
        address srcToken;
        address dstToken;
        address srcReceiver;
        address dstReceiver;
        uint256 amount;
        uint256 minReturnAmount;
        uint256 flags;
    }

    /// The pool (tests/contracts/SwapPool.sol).
    contract SwapPool {
        constructor(address token_);
        function token() external view returns (address);
        function reserveNative() external view returns (uint256);
        function reserveToken() external view returns (uint256);
        function addLiquidity(uint256 tokenAmount) external payable;
        function getAmountOut(bool nativeIn, uint256 amountIn) external view returns (uint256);
        function swapNativeForToken(uint256 minOut) external payable returns (uint256 amountOut);
        function swapTokenForNative(uint256 amountIn, uint256 minOut) external returns (uint256 amountOut);
        function swap(address executor, SwapDescription desc, bytes data) external payable returns (uint256 returnAmount, uint256 spentAmount);
    }

    /// The parts of ERC20 the aggregator reads and calls.
    interface IERC20 {
        function name() external view returns (string);
        function symbol() external view returns (string);
        function decimals() external view returns (uint8);
        function balanceOf(address owner) external view returns (uint256);
        function allowance(address owner, address spender) external view returns (uint256);
        function approve(address spender, uint256 amount) external returns (bool);
    }
}

/// The pool's solcjs artifact, committed beside its source.
const SWAP_POOL_ARTIFACT: &str = include_str!("../../tests/contracts/build/SwapPool.json");

/// The input fee, in thousandths: 3 = 0.3%.
const FEE_PER_MILLE: u64 = 3;

/// What selling `amount_in` into a pool with these reserves pays out, exactly as
/// `SwapPool.getAmountOut` computes it (Uniswap v2's formula, rounded down). `None` where
/// the contract reverts: no liquidity, or an amount so large the arithmetic overflows.
pub fn amount_out(amount_in: U256, reserve_in: U256, reserve_out: U256) -> Option<U256> {
    if reserve_in.is_zero() || reserve_out.is_zero() {
        return None;
    }
    let in_with_fee = amount_in.checked_mul(U256::from(1000 - FEE_PER_MILLE))?;
    let numerator = in_with_fee.checked_mul(reserve_out)?;
    let denominator = reserve_in
        .checked_mul(U256::from(1000))?
        .checked_add(in_with_fee)?;
    Some(numerator / denominator)
}

/// The least output a swap accepts at `slippage_bps` below the quote, rounded down.
pub fn min_out(quoted: U256, slippage_bps: u16) -> U256 {
    let keep = U256::from(10_000 - u64::from(slippage_bps.min(10_000)));
    // `quoted` comes from reserves that exist, far below 2^256 / 10^4.
    quoted.saturating_mul(keep) / U256::from(10_000)
}

/// Calls a view function.
pub(crate) async fn view<C: SolCall>(
    node: &RootProvider,
    to: Address,
    call: C,
) -> anyhow::Result<C::Return> {
    let tx = TransactionRequest::default()
        .to(to)
        .input(Bytes::from(call.abi_encode()).into());
    let out = node.call(tx).await?;
    Ok(C::abi_decode_returns(&out)?)
}

/// The pool's reserves: (native, token).
pub(crate) async fn reserves(node: &RootProvider, pool: Address) -> anyhow::Result<(U256, U256)> {
    let native = view(node, pool, SwapPool::reserveNativeCall {}).await?;
    let token = view(node, pool, SwapPool::reserveTokenCall {}).await?;
    Ok((native, token))
}

/// Sends a transaction from `from`, an account the node holds the key of (anvil's dev
/// accounts), and waits for it to succeed.
async fn send(
    node: &RootProvider,
    from: Address,
    to: Option<Address>,
    input: Bytes,
    value: U256,
) -> anyhow::Result<alloy::rpc::types::TransactionReceipt> {
    let mut tx = TransactionRequest::default()
        .from(from)
        .input(input.into())
        .value(value);
    tx = match to {
        Some(to) => tx.to(to),
        None => tx.into_create(),
    };
    let receipt = node
        .send_transaction(tx)
        .await?
        .with_timeout(Some(Duration::from_secs(30)))
        .get_receipt()
        .await?;
    anyhow::ensure!(
        receipt.status(),
        "transaction {} reverted",
        receipt.transaction_hash
    );
    Ok(receipt)
}

/// Deploys a SwapPool for `token` from `deployer`, an account the node at `node_url` holds
/// the key of (anvil's dev accounts), and returns its address.
pub async fn deploy_pool(
    node_url: &str,
    deployer: Address,
    token: Address,
) -> anyhow::Result<Address> {
    let node = RootProvider::new_http(node_url.parse().context("node URL")?);
    let artifact: serde_json::Value = serde_json::from_str(SWAP_POOL_ARTIFACT)?;
    let mut code: Vec<u8> = artifact["bytecode"]
        .as_str()
        .context("the SwapPool artifact has no bytecode")?
        .parse::<Bytes>()
        .context("the SwapPool artifact's bytecode")?
        .to_vec();
    code.extend(SwapPool::constructorCall { token_: token }.abi_encode());
    let receipt = send(&node, deployer, None, code.into(), U256::ZERO)
        .await
        .context("deploying SwapPool")?;
    receipt.contract_address.context("no SwapPool address")
}

/// Adds `native` wei and `tokens` of the pool's token to `pool`'s reserves, from `provider`,
/// an account the node holds the key of, which must hold the tokens: approves the pool for
/// them, then calls `addLiquidity`.
pub async fn add_liquidity(
    node_url: &str,
    provider: Address,
    pool: Address,
    native: U256,
    tokens: U256,
) -> anyhow::Result<()> {
    let node = RootProvider::new_http(node_url.parse().context("node URL")?);
    let token = view(&node, pool, SwapPool::tokenCall {}).await?;
    let approve = IERC20::approveCall {
        spender: pool,
        amount: tokens,
    };
    send(
        &node,
        provider,
        Some(token),
        approve.abi_encode().into(),
        U256::ZERO,
    )
    .await
    .context("approving the pool")?;
    let add = SwapPool::addLiquidityCall {
        tokenAmount: tokens,
    };
    send(&node, provider, Some(pool), add.abi_encode().into(), native)
        .await
        .context("adding liquidity")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pricing_is_uniswap_v2s() {
        let out = amount_out(U256::from(1_000), U256::from(10_000), U256::from(20_000));
        // 997_000 * 20_000 / (10_000_000 + 997_000) = 1813.22...
        assert_eq!(out, Some(U256::from(1813)));
        assert_eq!(amount_out(U256::from(1), U256::ZERO, U256::from(5)), None);
        assert_eq!(amount_out(U256::MAX, U256::from(1), U256::from(1)), None);
        assert_eq!(min_out(U256::from(1813), 100), U256::from(1794));
        assert_eq!(min_out(U256::from(1813), 0), U256::from(1813));
    }
}
