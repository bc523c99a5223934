//! The SwapPool and the 1inch-compatible aggregator over it, on anvil.

use super::tokens;
use alloy::{
    network::EthereumWallet,
    primitives::{Address, Bytes, U256, utils::parse_ether},
    providers::{Provider, ProviderBuilder},
    rpc::types::TransactionRequest,
    signers::local::PrivateKeySigner,
    sol,
    sol_types::SolCall,
};
use serde_json::Value;
use tokio::task::JoinHandle;
use walletops_chains::trade::{
    EvmAggregator, EvmChainId, EvmQuoteRequest, EvmSwapRequest, EvmSwapTx, NATIVE_TOKEN, Slippage,
    TradeError, oneinch::OneInch,
};
use walletops_core::{WalletOpsError, config::Secret};
use walletops_devnet_aggregator::DevAggregator;
use walletops_tests::anvil::Anvil;

sol! {
    /// What the test asks of the pool and the token directly.
    interface Venue {
        function getAmountOut(bool nativeIn, uint256 amountIn) external view returns (uint256);
        function approve(address spender, uint256 amount) external returns (bool);
    }
}

/// anvil's second dev account (index 1 of its mnemonic): 10,000 ETH, a key the test signs
/// with itself.
const TRADER_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const API_KEY: &str = "dev-aggregator-key";

/// A node with a token and a funded pool, the aggregator serving it, a client of it, and a
/// trader holding 1,000 tokens.
struct Market {
    anvil: Anvil,
    token: Address,
    pool: Address,
    aggregator: DevAggregator,
    client: OneInch,
    chain: EvmChainId,
    trader: PrivateKeySigner,
    /// Where the aggregator listens.
    url: String,
    _server: JoinHandle<std::io::Result<()>>,
}

impl Market {
    async fn open() -> anyhow::Result<Self> {
        let anvil = Anvil::start().await?;
        let (token, pool) = super::funded_pool(&anvil).await?;
        let trader: PrivateKeySigner = TRADER_KEY.parse()?;
        anvil.mint(token, trader.address(), tokens(1_000)).await?;

        let aggregator = DevAggregator::connect(anvil.url(), pool).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(aggregator.clone().serve(listener));
        let client = OneInch::new(
            url.parse()?,
            Secret::from(API_KEY.to_owned()),
            super::policy(),
        )?;
        let chain = EvmChainId::new(aggregator.chain_id());
        Ok(Self {
            anvil,
            token,
            pool,
            aggregator,
            client,
            chain,
            trader,
            url,
            _server: server,
        })
    }

    fn trade(&self, src: Address, dst: Address, amount: U256) -> EvmQuoteRequest {
        EvmQuoteRequest {
            src,
            dst,
            amount,
            include_gas: true,
            protocols: vec![],
            excluded_protocols: vec![],
        }
    }

    fn swap(&self, trade: EvmQuoteRequest) -> EvmSwapRequest {
        EvmSwapRequest {
            trade,
            from: self.trader.address(),
            slippage: Slippage::DEFAULT,
            disable_estimate: false,
        }
    }

    /// What the contract itself says the swap pays now.
    async fn contract_amount_out(&self, native_in: bool, amount: U256) -> anyhow::Result<U256> {
        let call = Venue::getAmountOutCall {
            nativeIn: native_in,
            amountIn: amount,
        };
        let request = TransactionRequest::default()
            .to(self.pool)
            .input(Bytes::from(call.abi_encode()).into());
        let out = self.anvil.provider().call(request).await?;
        Ok(Venue::getAmountOutCall::abi_decode_returns(&out)?)
    }

    /// Signs `tx` with the trader's key and sends it; returns whether it succeeded and the
    /// fee it paid, in wei.
    async fn send(&self, tx: &EvmSwapTx) -> anyhow::Result<(bool, U256)> {
        anyhow::ensure!(tx.from == self.trader.address(), "built for {}", tx.from);
        let provider = ProviderBuilder::new()
            .wallet(EthereumWallet::from(self.trader.clone()))
            .connect_http(self.anvil.url().parse()?);
        let request = TransactionRequest::default()
            .from(tx.from)
            .to(tx.to)
            .input(tx.data.clone().into())
            .value(tx.value)
            // A swap built without an estimate says 0: room enough for the pool.
            .gas_limit(if tx.gas == 0 { 200_000 } else { tx.gas });
        let receipt = provider
            .send_transaction(request)
            .await?
            .get_receipt()
            .await?;
        let fee = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
        Ok((receipt.status(), fee))
    }

    async fn balances(&self) -> anyhow::Result<(U256, U256)> {
        let who = self.trader.address();
        Ok((
            self.anvil.balance(who).await?,
            self.anvil.token_balance(self.token, who).await?,
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_for_token_moves_exactly_the_quoted_amount() -> anyhow::Result<()> {
    let m = Market::open().await?;
    let amount = parse_ether("1")?;
    let trade = m.trade(NATIVE_TOKEN, m.token, amount);

    let quote = m.client.quote(m.chain, &trade).await?;
    assert_eq!(quote.dst_amount, m.contract_amount_out(true, amount).await?);
    assert!(quote.gas.is_some_and(|g| g > 0));
    assert_eq!(quote.raw["dstAmount"], quote.dst_amount.to_string());

    let swap = m.client.build_swap(m.chain, &m.swap(trade)).await?;
    assert_eq!(swap.dst_amount, quote.dst_amount);
    assert_eq!((swap.tx.to, swap.tx.value), (m.pool, amount));
    assert!(swap.tx.gas > 0);
    let (eth_before, tokens_before) = m.balances().await?;
    let (succeeded, fee) = m.send(&swap.tx).await?;
    assert!(succeeded, "the swap reverted");
    let (eth_after, tokens_after) = m.balances().await?;
    assert_eq!(tokens_after - tokens_before, quote.dst_amount);
    assert_eq!(eth_before - eth_after, amount + fee);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_for_native_fails_until_approved() -> anyhow::Result<()> {
    let m = Market::open().await?;
    let amount = tokens(500);
    let trade = m.trade(m.token, NATIVE_TOKEN, amount);
    let quote = m.client.quote(m.chain, &trade).await?;
    assert_eq!(
        quote.dst_amount,
        m.contract_amount_out(false, amount).await?
    );

    let approval = m
        .client
        .approval(m.chain, m.token, m.trader.address(), amount)
        .await?;
    assert_eq!(
        (approval.spender, approval.allowance, approval.needed),
        (m.pool, U256::ZERO, true)
    );
    let err = m
        .client
        .build_swap(m.chain, &m.swap(trade.clone()))
        .await
        .expect_err("no allowance yet");
    let TradeError::Rejected {
        status: 400,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(message.starts_with("Not enough allowance."), "{message}");
    assert!(
        message.to_lowercase().contains(&format!("{:#x}", m.pool)),
        "{message}"
    );
    assert!(matches!(
        WalletOpsError::from(err),
        WalletOpsError::QuoteFailed(_)
    ));

    // Built without the aggregator's checks, the swap reverts on chain: the pool cannot pull.
    let mut unchecked = m.swap(trade.clone());
    unchecked.disable_estimate = true;
    let blind = m.client.build_swap(m.chain, &unchecked).await?;
    assert_eq!(blind.tx.gas, 0);
    let (succeeded, _) = m.send(&blind.tx).await?;
    assert!(!succeeded, "a swap without allowance went through");

    let approve = Venue::approveCall {
        spender: approval.spender,
        amount,
    };
    let (approved, _) = m
        .send(&EvmSwapTx {
            from: m.trader.address(),
            to: m.token,
            data: approve.abi_encode().into(),
            value: U256::ZERO,
            gas: 100_000,
            gas_price: U256::ZERO,
        })
        .await?;
    assert!(approved);
    let approval = m
        .client
        .approval(m.chain, m.token, m.trader.address(), amount)
        .await?;
    assert_eq!((approval.allowance, approval.needed), (amount, false));

    let swap = m.client.build_swap(m.chain, &m.swap(trade)).await?;
    assert_eq!((swap.tx.to, swap.tx.value), (m.pool, U256::ZERO));
    let (eth_before, tokens_before) = m.balances().await?;
    let (succeeded, fee) = m.send(&swap.tx).await?;
    assert!(succeeded, "the approved swap reverted");
    let (eth_after, tokens_after) = m.balances().await?;
    assert_eq!(tokens_before - tokens_after, amount);
    assert_eq!(eth_after + fee - eth_before, swap.dst_amount);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aggregator_speaks_1inch_and_shows_faults() -> anyhow::Result<()> {
    let m = Market::open().await?;
    let trade = m.trade(NATIVE_TOKEN, m.token, parse_ether("1")?);
    let faults = m.aggregator.faults();

    // The wire, as the reference gives it: include flags, lowercase addresses, 401 and 404.
    let http = walletops_tests::http::client();
    let url = format!(
        "{}/swap/v6.0/{}/quote?src={NATIVE_TOKEN}&dst={}&amount=1000&includeTokensInfo=true&includeProtocols=true",
        m.url,
        m.chain.get(),
        m.token
    );
    let body: Value = http
        .get(&url)
        .bearer_auth(API_KEY)
        .send()
        .await?
        .json()
        .await?;
    assert!(body["dstAmount"].is_string(), "{body}");
    assert_eq!(
        body["srcToken"]["address"],
        "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
    );
    assert_eq!(body["dstToken"]["symbol"], "WDT");
    assert_eq!(body["protocols"][0][0][0]["part"], 100);
    assert!(body.get("gas").is_none(), "{body}");
    let anonymous = http.get(&url).send().await?;
    assert_eq!(anonymous.status(), 401);
    let old = http
        .get(url.replace("v6.0", "v5.2"))
        .bearer_auth(API_KEY)
        .send()
        .await?;
    assert_eq!(old.status(), 404);

    // An unsupported token: 1inch's 400, QUOTE_FAILED for the caller.
    faults.refuse_token(m.token);
    let err = m.client.quote(m.chain, &trade).await.expect_err("refused");
    assert!(
        matches!(&err, TradeError::Rejected { message, .. } if message == "not valid token"),
        "{err:?}"
    );
    let WalletOpsError::QuoteFailed(text) = WalletOpsError::from(err) else {
        panic!()
    };
    assert!(text.contains("not valid token"), "{text}");
    faults.clear();
    let same = m.trade(m.token, m.token, U256::from(1));
    let err = m
        .client
        .quote(m.chain, &same)
        .await
        .expect_err("same token");
    assert!(
        matches!(&err, TradeError::Rejected { message, .. } if message.contains("should be different")),
        "{err:?}"
    );
    let err = m
        .client
        .quote(EvmChainId::new(1), &trade)
        .await
        .expect_err("another chain");
    assert!(matches!(err, TradeError::Rejected { .. }), "{err:?}");

    // A 500 is retried for a quote, not for a swap build.
    let before = faults.requests();
    faults.fail_next(1);
    m.client.quote(m.chain, &trade).await?;
    assert_eq!(faults.requests() - before, 2);
    let before = faults.requests();
    faults.fail_next(1);
    let err = m
        .client
        .build_swap(m.chain, &m.swap(trade.clone()))
        .await
        .expect_err("500");
    assert!(matches!(err, TradeError::Failed { .. }), "{err:?}");
    assert_eq!(faults.requests() - before, 1);

    // A stall runs into the client's timeout: a quote tries again, a swap build does not.
    faults.stall_next(1);
    m.client.quote(m.chain, &trade).await?;
    faults.stall_next(1);
    let err = m
        .client
        .build_swap(m.chain, &m.swap(trade))
        .await
        .expect_err("stall");
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("did not answer")),
        "{err:?}"
    );
    Ok(())
}
