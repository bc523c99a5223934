//! Quote latency: `POST /api/v1/trade/quote` through WalletOps against the same quote asked
//! of the 1inch-compatible aggregator directly, taken in turn, so that the difference of the
//! medians is what the service adds (parsing, authentication, the rate limit, the edge's
//! hop to the core, the client's call).

use std::time::{Duration, Instant};

use anyhow::ensure;
use reqwest::Method;
use walletops_devnet_aggregator::NATIVE;
use walletops_tests::{Rest, venue::Venue};

use crate::report::Latency;

/// The API key the service sends the aggregator (it takes any).
pub(crate) const AGGREGATOR_KEY: &str = "bench-key";

/// Untimed quotes of each kind before measuring.
const WARMUP_QUOTES: u64 = 5;

/// What is quoted: 1 ETH for the pool's token.
const AMOUNT: u128 = 1_000_000_000_000_000_000;

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
    let client = walletops_tests::http::client();
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
