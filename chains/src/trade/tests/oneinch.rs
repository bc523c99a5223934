//! Tests of the 1inch client: v6 request names and the bearer key, retries after 429s and
//! server errors, timeouts, and errors that tell the refusal without leaking the key.

use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256, address};
use axum::http::Method;
use serde_json::json;

use super::{Reply, dead_url, policy, serve};
use crate::trade::{
    Aggregators, EvmAggregator, EvmChainId, EvmQuoteRequest, EvmSwapRequest, LocalEvmAggregator,
    NATIVE_TOKEN, Slippage, TradeConfig, TradeError, oneinch::OneInch,
};
use walletops_domain::secret::Secret;

const KEY: &str = "test-1inch-key";
const USDC: Address = address!("833589fcd6edb6e08f4c7c32d4f71b54bda02913");
const WALLET: Address = address!("4d2a422db44144996e855ce15fb581a477dbb947");
const ROUTER: Address = address!("111111125421ca6dc452d289314280a0f8842a65");
const BASE: EvmChainId = EvmChainId::new(8453);

fn client(url: reqwest::Url) -> OneInch {
    OneInch::new(url, Secret::from(KEY.to_owned()), policy()).expect("client")
}

fn usdc_for_eth() -> EvmQuoteRequest {
    EvmQuoteRequest {
        src: USDC,
        dst: NATIVE_TOKEN,
        amount: U256::from(100_000u64),
        include_gas: true,
        protocols: vec!["UNISWAP_V3".into(), "CURVE".into()],
        excluded_protocols: vec!["PMM1".into()],
    }
}

fn swap_request() -> EvmSwapRequest {
    EvmSwapRequest {
        trade: usdc_for_eth(),
        from: WALLET,
        slippage: Slippage::from_bps(50).expect("bps"),
        disable_estimate: false,
    }
}

/// Secrets and addresses of the server never appear in what a caller or the log is told.
fn assert_discreet(err: &TradeError) {
    let text = format!("{err} {err:?}");
    assert!(!text.contains(KEY) && !text.contains("127.0.0.1"), "{text}");
}

#[tokio::test]
async fn a_quote_sends_v6_names_and_the_bearer_key() {
    let answer = json!({
        "dstAmount": "32749774604489",
        "protocols": [[[{"name": "UNISWAP_V3", "part": 100,
                         "fromTokenAddress": "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
                         "toTokenAddress": "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"}]]],
        "gas": 183866
    });
    let (url, script) = serve("/proxy/", vec![Reply::Json(200, answer.clone())]).await;
    let quote = client(url)
        .quote(BASE, &usdc_for_eth())
        .await
        .expect("quote");
    assert_eq!(quote.dst_amount, U256::from(32_749_774_604_489u64));
    assert_eq!(quote.gas, Some(183_866));
    assert_eq!(quote.raw, answer);

    let seen = script.seen();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(request.method, Method::GET);
    assert_eq!(request.path, "/proxy/swap/v6.0/8453/quote");
    assert_eq!(request.headers["authorization"], format!("Bearer {KEY}"));
    let q = &request.query;
    assert_eq!(
        q["src"].to_lowercase(),
        "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"
    );
    assert_eq!(
        q["dst"].to_lowercase(),
        "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
    );
    assert_eq!(q["amount"], "100000");
    assert_eq!(q["protocols"], "UNISWAP_V3,CURVE");
    assert_eq!(q["excludedProtocols"], "PMM1");
    assert_eq!(q["includeGas"], "true");
    assert_eq!(q.len(), 6, "{q:?}");
}

#[tokio::test]
async fn a_plain_quote_sends_no_optional_names_and_reads_a_bare_answer() {
    let (url, script) = serve("", vec![Reply::Json(200, json!({"dstAmount": "7"}))]).await;
    let mut request = usdc_for_eth();
    request.include_gas = false;
    request.protocols.clear();
    request.excluded_protocols.clear();
    let quote = client(url).quote(BASE, &request).await.expect("quote");
    assert_eq!((quote.dst_amount, quote.gas), (U256::from(7), None));
    let seen = script.seen();
    assert_eq!(seen[0].path, "/swap/v6.0/8453/quote");
    let mut names: Vec<_> = seen[0].query.keys().cloned().collect();
    names.sort();
    assert_eq!(names, ["amount", "dst", "src"]);
}

#[tokio::test]
async fn a_swap_sends_from_origin_slippage_and_reads_tx() {
    let answer = json!({
        "dstAmount": "32749774604489",
        "tx": {
            "from": "0x4d2a422db44144996e855ce15fb581a477dbb947",
            "to": "0x111111125421ca6dc452d289314280a0f8842a65",
            "data": "0x12aa3caf0000",
            "value": "0",
            "gas": 188297,
            "gasPrice": "5890000"
        }
    });
    let (url, script) = serve("", vec![Reply::Json(200, answer.clone())]).await;
    let swap = client(url)
        .build_swap(BASE, &swap_request())
        .await
        .expect("swap");
    assert_eq!(swap.dst_amount, U256::from(32_749_774_604_489u64));
    assert_eq!(swap.tx.from, WALLET);
    assert_eq!(swap.tx.to, ROUTER);
    assert_eq!(swap.tx.data.to_string(), "0x12aa3caf0000");
    assert_eq!(swap.tx.value, U256::ZERO);
    assert_eq!(swap.tx.gas, 188_297);
    assert_eq!(swap.tx.gas_price, U256::from(5_890_000));
    assert_eq!(swap.raw, answer);

    let seen = script.seen();
    assert_eq!(seen[0].path, "/swap/v6.0/8453/swap");
    let q = &seen[0].query;
    assert_eq!(q["from"].to_lowercase(), format!("{WALLET:#x}"));
    assert_eq!(q["origin"], q["from"]);
    assert_eq!(q["slippage"], "0.5");
    assert_eq!(q["amount"], "100000");
    assert!(!q.contains_key("disableEstimate"), "{q:?}");
}

#[tokio::test]
async fn approval_reads_spender_and_allowance() {
    let (url, script) = serve(
        "",
        vec![
            Reply::Json(
                200,
                json!({"address": "0x111111125421ca6dc452d289314280a0f8842a65"}),
            ),
            Reply::Json(200, json!({"allowance": "99999"})),
        ],
    )
    .await;
    let client = client(url);
    let approval = client
        .approval(BASE, USDC, WALLET, U256::from(100_000))
        .await
        .expect("approval");
    assert_eq!(approval.spender, ROUTER);
    assert_eq!(approval.allowance, U256::from(99_999));
    assert!(approval.needed);
    let seen = script.seen();
    let allowance = seen
        .iter()
        .find(|s| s.path == "/swap/v6.0/8453/approve/allowance")
        .expect("an allowance request");
    assert_eq!(
        allowance.query["tokenAddress"].to_lowercase(),
        format!("{USDC:#x}")
    );
    assert_eq!(
        allowance.query["walletAddress"].to_lowercase(),
        format!("{WALLET:#x}")
    );
    assert!(
        seen.iter()
            .any(|s| s.path == "/swap/v6.0/8453/approve/spender")
    );
    assert!(
        seen.iter()
            .all(|s| s.headers["authorization"] == format!("Bearer {KEY}"))
    );
}

#[tokio::test]
async fn a_429_is_retried_after_the_time_it_asks() {
    let (url, script) = serve(
        "",
        vec![
            Reply::RetryAfter(
                429,
                "1",
                json!({"statusCode": 429, "description": "slow down"}),
            ),
            Reply::Json(200, json!({"dstAmount": "5"})),
        ],
    )
    .await;
    let started = Instant::now();
    let quote = client(url)
        .quote(BASE, &usdc_for_eth())
        .await
        .expect("quote");
    assert_eq!(quote.dst_amount, U256::from(5));
    assert_eq!(script.seen().len(), 2);
    // The backoff alone would have waited at most 40 ms.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_retry_after_longer_than_the_caller_can_wait_fails_at_once() {
    let (url, script) = serve(
        "",
        vec![Reply::RetryAfter(
            429,
            "120",
            json!({"description": "slow down"}),
        )],
    )
    .await;
    let err = client(url)
        .quote(BASE, &usdc_for_eth())
        .await
        .expect_err("429");
    assert_eq!(script.seen().len(), 1);
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("120 s")),
        "{err}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_for_quotes_until_attempts_run_out() {
    let (url, script) = serve("", vec![Reply::Json(502, json!({"error": "Bad Gateway"}))]).await;
    let err = client(url)
        .quote(BASE, &usdc_for_eth())
        .await
        .expect_err("502");
    assert_eq!(script.seen().len(), 3);
    let TradeError::Failed { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("1inch")
            && message.contains("502")
            && message.contains("retrying may help")
    );
    assert_discreet(&err);
}

#[tokio::test]
async fn a_500_on_swap_is_not_retried() {
    let (url, script) = serve(
        "",
        vec![
            Reply::Json(
                500,
                json!({"statusCode": 500, "error": "Internal Server Error", "description": "boom"}),
            ),
            Reply::Json(200, json!({"dstAmount": "1"})),
        ],
    )
    .await;
    let err = client(url)
        .build_swap(BASE, &swap_request())
        .await
        .expect_err("500");
    assert_eq!(script.seen().len(), 1);
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("500")),
        "{err}"
    );
    assert_discreet(&err);
}

#[tokio::test]
async fn a_stalled_server_times_out() {
    let (url, script) = serve("", vec![Reply::Stall]).await;
    let client = client(url);
    let started = Instant::now();
    let err = client
        .quote(BASE, &usdc_for_eth())
        .await
        .expect_err("stall");
    // Three attempts of 300 ms and two short backoffs, not the server's ten seconds.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(script.seen().len(), 3);
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("did not answer")),
        "{err}"
    );
    assert_discreet(&err);

    // A swap build that timed out after it was sent is not sent again.
    client
        .build_swap(BASE, &swap_request())
        .await
        .expect_err("stall");
    assert_eq!(script.seen().len(), 4);
}

#[tokio::test]
async fn an_unreachable_aggregator_is_upstream() {
    let err = client(dead_url().await)
        .build_swap(BASE, &swap_request())
        .await
        .expect_err("nothing listens");
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("could not be reached")),
        "{err}"
    );
    assert_discreet(&err);
}

#[tokio::test]
async fn a_refusal_carries_the_aggregators_description() {
    let body = json!({
        "statusCode": 400, "error": "Bad Request",
        "description": "Not enough allowance. Amount: 100000. Allowance: 0. Spender: 0x111111125421ca6dc452d289314280a0f8842a65",
        "requestId": "2ba5f7dd-9064-4824-abda-cbece14595ae",
        "meta": [{"type": "amount", "value": "100000"}, {"type": "allowance", "value": "0"}]
    });
    let (url, script) = serve("", vec![Reply::Json(400, body)]).await;
    let err = client(url)
        .build_swap(BASE, &swap_request())
        .await
        .expect_err("400");
    assert_eq!(script.seen().len(), 1);
    let TradeError::Rejected {
        status,
        code,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!((*status, code.as_deref()), (400, None));
    assert!(message.starts_with("Not enough allowance."), "{message}");
    let text = err.to_string();
    assert!(
        text.contains("1inch") && text.contains("Not enough allowance"),
        "{text}"
    );
}

#[tokio::test]
async fn a_refused_key_names_the_option_without_the_key() {
    let (url, script) = serve(
        "",
        vec![Reply::Json(401, json!({"message": "Unauthorized"}))],
    )
    .await;
    let err = client(url)
        .quote(BASE, &usdc_for_eth())
        .await
        .expect_err("401");
    assert_eq!(script.seen().len(), 1);
    assert!(
        matches!(
            &err,
            TradeError::Unavailable {
                option: "trade.evm.api_key",
                ..
            }
        ),
        "{err:?}"
    );
    assert_discreet(&err);
}

#[tokio::test]
async fn an_answer_without_dst_amount_is_unreadable() {
    let (url, _) = serve("", vec![Reply::Json(200, json!({"toAmount": "5"}))]).await;
    let err = client(url)
        .quote(BASE, &usdc_for_eth())
        .await
        .expect_err("v5 shape");
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("cannot read")),
        "{err}"
    );
}

#[test]
fn without_a_key_there_is_no_evm_aggregator() {
    let aggregators = Aggregators::from_config(&TradeConfig::default()).expect("aggregators");
    let err = aggregators.evm(BASE).err().expect("no key, no client");
    let TradeError::Unavailable { .. } = err else {
        panic!("not unavailable: {err:?}")
    };
    let text = err.to_string();
    assert!(text.contains("trade.evm.api_key"), "{text}");

    let mut config = TradeConfig::default();
    config.evm.api_key = Secret::from(KEY.to_owned());
    let aggregators = Aggregators::from_config(&config).expect("aggregators");
    assert!(aggregators.evm(BASE).is_ok());
    assert!(!format!("{aggregators:?}").contains(KEY));
}

#[test]
fn a_local_aggregator_serves_its_chain_without_a_key() {
    let config = TradeConfig {
        local_evm: vec![LocalEvmAggregator {
            chain_id: 31337,
            base_url: "http://127.0.0.1:9".parse().expect("a URL"),
            router: alloy::primitives::Address::repeat_byte(7),
        }],
        ..TradeConfig::default()
    };
    let aggregators = Aggregators::from_config(&config).expect("aggregators");
    assert!(aggregators.evm(EvmChainId::new(31337)).is_ok());
    assert!(
        aggregators.evm(BASE).is_err(),
        "other chains still need the key"
    );
}
