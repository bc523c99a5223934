//! Quote latency: `POST /api/v1/trade/quote` through WalletOps against the same quote asked
//! of the 1inch-compatible aggregator directly, taken in turn, so that the difference of the
//! medians is what the service adds (parsing, authentication, the rate limit, the edge's
//! hop to the core, the client's call).

use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use anyhow::ensure;
use reqwest::Method;
use tokio::task::JoinHandle;
use walletops_devnet_aggregator::{DevAggregator, NATIVE, add_liquidity, deploy_pool};
use walletops_tests::{
    Rest,
    anvil::{Anvil, DEV_ACCOUNT},
};

use crate::report::Latency;

/// The API key the service sends the aggregator (it takes any).
pub(crate) const AGGREGATOR_KEY: &str = "bench-key";

/// Untimed quotes of each kind before measuring.
const WARMUP_QUOTES: u64 = 5;

/// What is quoted: 1 ETH for the pool's token.
const AMOUNT: u128 = 1_000_000_000_000_000_000;

/// A pool of ETH and a token on the node and its aggregator, serving until dropped.
pub(crate) struct Venue {
    token: Address,
    chain_id: u64,
    /// Where the aggregator listens: the service's `trade.evm.base_url`.
    pub(crate) url: String,
    server: JoinHandle<std::io::Result<()>>,
}

impl Drop for Venue {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Deploys a token and a pool of 100 ETH against 200,000 of it on `anvil`, and serves its
/// aggregator on a loopback port.
pub(crate) async fn open_venue(anvil: &Anvil) -> anyhow::Result<Venue> {
    let whole = U256::from(10u64).pow(U256::from(18));
    let token = anvil.deploy_token("BQT", 18).await?;
    anvil
        .mint(token, DEV_ACCOUNT, U256::from(200_000) * whole)
        .await?;
    let pool = deploy_pool(anvil.url(), DEV_ACCOUNT, token).await?;
    add_liquidity(
        anvil.url(),
        DEV_ACCOUNT,
        pool,
        U256::from(100) * whole,
        U256::from(200_000) * whole,
    )
    .await?;
    let aggregator = DevAggregator::connect(anvil.url(), pool).await?;
    let chain_id = aggregator.chain_id();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(aggregator.serve(listener));
    Ok(Venue {
        token,
        chain_id,
        url,
        server,
    })
}

/// `quotes` timings each of a quote through WalletOps' REST edge and of the same quote asked
/// of the aggregator directly, in turn.
pub(crate) async fn quote_latency(
    api: &Rest,
    venue: &Venue,
    quotes: u64,
) -> anyhow::Result<(Latency, Latency)> {
    let body = serde_json::json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": venue.token.to_string(),
        "amount": AMOUNT.to_string(),
    })
    .to_string();
    let through = async || {
        let start = Instant::now();
        let reply = api
            .request(Method::POST, "/trade/quote", &[], Some(&body))
            .await?;
        let took = start.elapsed();
        ensure!(reply.status == 200, "POST /trade/quote: {}", reply.text);
        Ok::<_, anyhow::Error>(took)
    };
    let client = reqwest::Client::new();
    let direct_url = format!(
        "{}/swap/v6.0/{}/quote?src={NATIVE}&dst={}&amount={AMOUNT}",
        venue.url, venue.chain_id, venue.token
    );
    let direct = async || {
        let start = Instant::now();
        let reply = client
            .get(&direct_url)
            .bearer_auth(AGGREGATOR_KEY)
            .send()
            .await?;
        let ok = reply.status().is_success();
        reply.bytes().await?;
        let took = start.elapsed();
        ensure!(ok, "the aggregator refused the quote");
        Ok::<_, anyhow::Error>(took)
    };
    for _ in 0..WARMUP_QUOTES {
        through().await?;
        direct().await?;
    }
    let (mut service, mut alone): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for _ in 0..quotes {
        service.push(through().await?);
        alone.push(direct().await?);
    }
    Ok((Latency::of(service), Latency::of(alone)))
}
