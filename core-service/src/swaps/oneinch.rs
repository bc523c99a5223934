//! 1inch Aggregation Router v6 call data, read before an EVM swap is signed: whatever the
//! aggregator answers as `dstAmount`, the router itself enforces only what its call data
//! says, so the receiver, the executor and the minimum are read there and held to the
//! swap's terms and its independent bound. Selectors and argument layouts are 1inch's
//! (its SDK's `aggregationRouterV6.abi.json`; `Address` arguments are `uint256` whose low
//! 160 bits are the address).
//!
//! **Invariant:** only `swap`, the `unoswap*` and `ethUnoswap*` families and `clipperSwap*`
//! pass; a limit-order fill or any other function is refused.

use alloy::{
    primitives::{Address, U256},
    sol,
    sol_types::SolInterface as _,
};

use super::guard::Refusal;
use walletops_chains::trade::NATIVE_TOKEN;

sol! {
    /// The router's swap functions, as its ABI declares them.
    interface AggregationRouterV6 {
        struct SwapDescription {
            address srcToken;
            address dstToken;
            address srcReceiver;
            address dstReceiver;
            uint256 amount;
            uint256 minReturnAmount;
            uint256 flags;
        }
        function swap(address executor, SwapDescription desc, bytes data) external payable returns (uint256 returnAmount, uint256 spentAmount);
        function unoswap(uint256 token, uint256 amount, uint256 minReturn, uint256 dex) external returns (uint256);
        function unoswap2(uint256 token, uint256 amount, uint256 minReturn, uint256 dex, uint256 dex2) external returns (uint256);
        function unoswap3(uint256 token, uint256 amount, uint256 minReturn, uint256 dex, uint256 dex2, uint256 dex3) external returns (uint256);
        function unoswapTo(uint256 to, uint256 token, uint256 amount, uint256 minReturn, uint256 dex) external returns (uint256);
        function unoswapTo2(uint256 to, uint256 token, uint256 amount, uint256 minReturn, uint256 dex, uint256 dex2) external returns (uint256);
        function unoswapTo3(uint256 to, uint256 token, uint256 amount, uint256 minReturn, uint256 dex, uint256 dex2, uint256 dex3) external returns (uint256);
        function ethUnoswap(uint256 minReturn, uint256 dex) external payable returns (uint256);
        function ethUnoswap2(uint256 minReturn, uint256 dex, uint256 dex2) external payable returns (uint256);
        function ethUnoswap3(uint256 minReturn, uint256 dex, uint256 dex2, uint256 dex3) external payable returns (uint256);
        function ethUnoswapTo(uint256 to, uint256 minReturn, uint256 dex) external payable returns (uint256);
        function ethUnoswapTo2(uint256 to, uint256 minReturn, uint256 dex, uint256 dex2) external payable returns (uint256);
        function ethUnoswapTo3(uint256 to, uint256 minReturn, uint256 dex, uint256 dex2, uint256 dex3) external payable returns (uint256);
        function clipperSwap(address clipperExchange, uint256 srcToken, address dstToken, uint256 inputAmount, uint256 outputAmount, uint256 goodUntil, bytes32 r, bytes32 vs) external payable returns (uint256);
        function clipperSwapTo(address clipperExchange, address recipient, uint256 srcToken, address dstToken, uint256 inputAmount, uint256 outputAmount, uint256 goodUntil, bytes32 r, bytes32 vs) external payable returns (uint256);
    }
}

use AggregationRouterV6::AggregationRouterV6Calls as Call;

/// The limit-order functions of the router: a fill trades at a maker's price, not a quote's.
const LIMIT_ORDER_FILLS: [([u8; 4], &str); 4] = [
    ([0x9f, 0xda, 0x64, 0xbd], "fillOrder"),
    ([0xf4, 0x97, 0xdf, 0x75], "fillOrderArgs"),
    ([0xcc, 0x71, 0x3a, 0x04], "fillContractOrder"),
    ([0x56, 0xa7, 0x58, 0x68], "fillContractOrderArgs"),
];

/// What the router call must do.
#[derive(Debug, Clone, Copy)]
pub(super) struct RouterTerms<'a> {
    /// The wallet: the only receiver of what is bought.
    pub wallet: Address,
    /// The token sold and bought (`NATIVE_TOKEN` for the coin).
    pub src: Address,
    /// See `src`.
    pub dst: Address,
    /// How much is sold.
    pub amount: U256,
    /// The least the call must guarantee to pay (the swap's independent bound).
    pub bound: U256,
    /// The executors a `swap` may hand the input to (`TradeConfig::evm_executors`).
    pub executors: &'a [Address],
}

/// The address in the low 160 bits of a 1inch v6 `Address` argument.
fn low_address(word: U256) -> Address {
    Address::from_word(word.to_be_bytes::<32>().into())
}

fn refuse(check: &'static str, why: String) -> Refusal {
    Refusal::new(check, why)
}

/// Checks `data`, the call data of a swap to a 1inch v6 router, against `terms`.
pub(super) fn check_call(data: &[u8], terms: &RouterTerms<'_>) -> Result<(), Refusal> {
    if let Some((_, name)) = LIMIT_ORDER_FILLS
        .iter()
        .find(|(selector, _)| data.get(..4) == Some(selector.as_slice()))
    {
        return Err(refuse(
            "calldata",
            format!(
                "it calls the router's {name}, a limit-order fill: a swap trades only at a quote's price"
            ),
        ));
    }
    let call = Call::abi_decode(data).map_err(|_| {
        refuse(
            "calldata",
            format!(
                "it calls {}, which is not one of the router's swap functions (swap, unoswap, ethUnoswap, clipperSwap)",
                data.get(..4).map_or("nothing".to_owned(), |s| format!("0x{}", alloy::hex::encode(s)))
            ),
        )
    })?;
    let terms = *terms;
    match call {
        Call::swap(c) => {
            let d = &c.desc;
            same("srcToken", d.srcToken, terms.src)?;
            same("dstToken", d.dstToken, terms.dst)?;
            amount(d.amount, terms.amount)?;
            // The router pays the caller when dstReceiver is zero.
            if d.dstReceiver != terms.wallet && d.dstReceiver != Address::ZERO {
                return Err(receiver(d.dstReceiver, terms.wallet));
            }
            executor("executor", c.executor, terms.executors)?;
            // 1inch's router moves nothing to srcReceiver on a coin sale, but a router that
            // is not 1inch's may: it is held to the list whatever is sold.
            executor("srcReceiver", d.srcReceiver, terms.executors)?;
            minimum(d.minReturnAmount, terms.bound)
        }
        Call::unoswap(c) => unoswap(None, (c.token, c.amount, c.minReturn), terms),
        Call::unoswap2(c) => unoswap(None, (c.token, c.amount, c.minReturn), terms),
        Call::unoswap3(c) => unoswap(None, (c.token, c.amount, c.minReturn), terms),
        Call::unoswapTo(c) => unoswap(Some(c.to), (c.token, c.amount, c.minReturn), terms),
        Call::unoswapTo2(c) => unoswap(Some(c.to), (c.token, c.amount, c.minReturn), terms),
        Call::unoswapTo3(c) => unoswap(Some(c.to), (c.token, c.amount, c.minReturn), terms),
        Call::ethUnoswap(c) => eth_unoswap(None, c.minReturn, terms),
        Call::ethUnoswap2(c) => eth_unoswap(None, c.minReturn, terms),
        Call::ethUnoswap3(c) => eth_unoswap(None, c.minReturn, terms),
        Call::ethUnoswapTo(c) => eth_unoswap(Some(c.to), c.minReturn, terms),
        Call::ethUnoswapTo2(c) => eth_unoswap(Some(c.to), c.minReturn, terms),
        Call::ethUnoswapTo3(c) => eth_unoswap(Some(c.to), c.minReturn, terms),
        Call::clipperSwap(c) => clipper(
            None,
            (c.srcToken, c.dstToken, c.inputAmount, c.outputAmount),
            terms,
        ),
        Call::clipperSwapTo(c) => clipper(
            Some(c.recipient),
            (c.srcToken, c.dstToken, c.inputAmount, c.outputAmount),
            terms,
        ),
    }
}

fn same(field: &str, named: Address, expected: Address) -> Result<(), Refusal> {
    if named == expected {
        return Ok(());
    }
    Err(refuse(
        "calldata",
        format!("its {field} is {named}, not the swap's {expected}"),
    ))
}

fn amount(named: U256, expected: U256) -> Result<(), Refusal> {
    if named == expected {
        return Ok(());
    }
    Err(refuse(
        "calldata",
        format!("it sells {named}, not the swap's amount {expected}"),
    ))
}

fn receiver(named: Address, wallet: Address) -> Refusal {
    refuse(
        "receiver",
        format!("it pays what it buys to {named}, not to the wallet {wallet}"),
    )
}

fn executor(field: &str, named: Address, executors: &[Address]) -> Result<(), Refusal> {
    if executors.contains(&named) {
        return Ok(());
    }
    Err(refuse(
        "executor",
        format!(
            "its {field} is {named}, which is neither a built-in 1inch executor nor on trade.evm.allowed_executors: the input would be handed to it"
        ),
    ))
}

fn minimum(named: U256, bound: U256) -> Result<(), Refusal> {
    if named >= bound {
        return Ok(());
    }
    Err(refuse(
        "minimum",
        format!(
            "it guarantees only {named} of the token bought, less than the {bound} the quote, minDstAmount and slippage require"
        ),
    ))
}

fn recipient(to: Option<U256>, wallet: Address) -> Result<(), Refusal> {
    match to.map(low_address) {
        Some(to) if to != wallet => Err(receiver(to, wallet)),
        _ => Ok(()),
    }
}

fn unoswap(
    to: Option<U256>,
    (token, sold, min_return): (U256, U256, U256),
    terms: RouterTerms<'_>,
) -> Result<(), Refusal> {
    same("token", low_address(token), terms.src)?;
    amount(sold, terms.amount)?;
    recipient(to, terms.wallet)?;
    minimum(min_return, terms.bound)
}

fn eth_unoswap(to: Option<U256>, min_return: U256, terms: RouterTerms<'_>) -> Result<(), Refusal> {
    // The amount sold is the call's value, which `check_evm` holds to the swap's amount.
    same("token", NATIVE_TOKEN, terms.src)?;
    recipient(to, terms.wallet)?;
    minimum(min_return, terms.bound)
}

fn clipper(
    to: Option<Address>,
    (src, dst, input, output): (U256, Address, U256, U256),
    terms: RouterTerms<'_>,
) -> Result<(), Refusal> {
    same("srcToken", low_address(src), terms.src)?;
    same("dstToken", dst, terms.dst)?;
    amount(input, terms.amount)?;
    recipient(
        to.map(|a| U256::from_be_bytes(a.into_word().0)),
        terms.wallet,
    )?;
    minimum(output, terms.bound)
}

#[cfg(test)]
#[path = "oneinch_tests.rs"]
mod tests;
