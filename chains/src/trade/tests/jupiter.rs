//! Tests of the Jupiter client: quote and swap requests as Jupiter names them, the key header,
//! retries, and refusals of untradable tokens, mismatched quotes and undecodable swaps.

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use serde_json::{Value, json};
use solana_hash::Hash;
use solana_message::{VersionedMessage, v0};
use solana_pubkey::Pubkey;
use solana_signature::Signature;
use solana_transaction::versioned::VersionedTransaction;

use super::{Reply, policy, serve};
use crate::trade::{
    Slippage, SolanaAggregator, SolanaQuote, SolanaQuoteRequest, TradeError, WRAPPED_SOL_MINT,
    jupiter::Jupiter,
};
use walletops_domain::secret::Secret;

const USDC: Pubkey = solana_pubkey::pubkey!("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v");
const USER: Pubkey = solana_pubkey::pubkey!("BQ72nSv9f3PRyRKCBnHLVrerrv37CYTHm5h3s9VSGQDV");
const KEY: &str = "test-jupiter-key";

fn client(url: reqwest::Url, key: &str) -> Jupiter {
    Jupiter::new(url, Secret::from(key.to_owned()), 995_000, policy()).expect("client")
}

fn sol_for_usdc() -> SolanaQuoteRequest {
    SolanaQuoteRequest {
        input_mint: WRAPPED_SOL_MINT,
        output_mint: USDC,
        amount: 100_000_000,
        slippage: Slippage::from_bps(100).expect("bps"),
        dexes: vec!["Raydium".into(), "Meteora DLMM".into()],
        exclude_dexes: vec![],
    }
}

/// The reference's example quote (0.1 SOL for USDC).
fn quote_answer() -> Value {
    json!({
        "inputMint": "So11111111111111111111111111111111111111112",
        "inAmount": "100000000",
        "outputMint": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        "outAmount": "17057460",
        "otherAmountThreshold": "16886885",
        "swapMode": "ExactIn",
        "slippageBps": 100,
        "priceImpactPct": "0.0001",
        "platformFee": {"amount": "0", "feeBps": 0},
        "routePlan": [{
            "swapInfo": {
                "ammKey": "HXpGFJGCEEFdV31tDmjDBaJMEB1fKLiAoKoWr3Fnonid",
                "label": "Meteora DLMM",
                "inputMint": "So11111111111111111111111111111111111111112",
                "outputMint": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
                "inAmount": "100000000",
                "outAmount": "17057460",
                "feeAmount": "1285",
                "feeMint": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
            },
            "percent": 100
        }],
        "contextSlot": 324307186,
        "timeTaken": 0.012
    })
}

fn quote() -> SolanaQuote {
    SolanaQuote {
        input_mint: WRAPPED_SOL_MINT,
        output_mint: USDC,
        in_amount: 100_000_000,
        out_amount: 17_057_460,
        other_amount_threshold: 16_886_885,
        raw: quote_answer(),
    }
}

/// An unsigned v0 transaction paying `USER`'s SOL to itself: something that decodes.
fn unsigned_transaction() -> VersionedTransaction {
    let ix = solana_system_interface::instruction::transfer(&USER, &USER, 1);
    let message = v0::Message::try_compile(&USER, &[ix], &[], Hash::new_unique()).expect("message");
    VersionedTransaction {
        signatures: vec![Signature::default()],
        message: VersionedMessage::V0(message),
    }
}

#[tokio::test]
async fn a_quote_sends_jupiters_names_and_the_key() {
    let (url, script) = serve("/swap/v1", vec![Reply::Json(200, quote_answer())]).await;
    let got = client(url, KEY)
        .quote(&sol_for_usdc())
        .await
        .expect("quote");
    assert_eq!(got, quote());

    let seen = script.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/swap/v1/quote");
    assert_eq!(seen[0].headers["x-api-key"], KEY);
    let q = &seen[0].query;
    assert_eq!(q["inputMint"], WRAPPED_SOL_MINT.to_string());
    assert_eq!(q["outputMint"], USDC.to_string());
    assert_eq!(q["amount"], "100000000");
    assert_eq!(q["slippageBps"], "100");
    assert_eq!(q["dexes"], "Raydium,Meteora DLMM");
    assert!(!q.contains_key("excludeDexes"), "{q:?}");
}

#[tokio::test]
async fn a_keyless_host_gets_no_key_header() {
    let (url, script) = serve("/", vec![Reply::Json(200, quote_answer())]).await;
    client(url, "").quote(&sol_for_usdc()).await.expect("quote");
    let seen = script.seen();
    assert_eq!(seen[0].path, "/quote");
    assert!(!seen[0].headers.contains_key("x-api-key"));
}

#[tokio::test]
async fn a_swap_posts_the_quote_unmodified_and_decodes_the_transaction() {
    let tx = unsigned_transaction();
    let encoded = BASE64.encode(wincode::serialize(&tx).expect("serialize"));
    let answer = json!({
        "swapTransaction": encoded,
        "lastValidBlockHeight": 324307300u64,
        "prioritizationFeeLamports": 254600,
        "computeUnitLimit": 200000,
        "prioritizationType": null,
        "dynamicSlippageReport": null,
        "simulationError": null
    });
    let (url, script) = serve("/swap/v1", vec![Reply::Json(200, answer.clone())]).await;
    let swap = client(url, KEY)
        .build_swap(&quote(), &USER)
        .await
        .expect("swap");
    assert_eq!(swap.transaction, tx);
    assert_eq!(swap.last_valid_block_height, 324_307_300);
    assert_eq!(swap.prioritization_fee_lamports, 254_600);
    assert_eq!(swap.compute_unit_limit, 200_000);
    assert_eq!(swap.raw, answer);

    let seen = script.seen();
    assert_eq!(seen[0].method, axum::http::Method::POST);
    assert_eq!(seen[0].path, "/swap/v1/swap");
    assert_eq!(seen[0].headers["x-api-key"], KEY);
    let body = seen[0].body.as_ref().expect("a JSON body");
    assert_eq!(body["userPublicKey"], USER.to_string());
    assert_eq!(body["quoteResponse"], quote_answer());
    assert_eq!(body["wrapAndUnwrapSol"], true);
    assert_eq!(
        body["prioritizationFeeLamports"]["priorityLevelWithMaxLamports"]["maxLamports"],
        995_000
    );
}

#[tokio::test]
async fn an_untradable_token_is_rejected_with_jupiters_words() {
    let body = json!({
        "error": "The token GkpRhRXqVYUJS2gMPLyjefAcwLMCLwoxaBKRr1ghnu1k is not tradable",
        "errorCode": "TOKEN_NOT_TRADABLE"
    });
    let (url, script) = serve("", vec![Reply::Json(400, body)]).await;
    let err = client(url, KEY)
        .quote(&sol_for_usdc())
        .await
        .expect_err("400");
    assert_eq!(script.seen().len(), 1, "a refusal is not retried");
    let TradeError::Rejected {
        status,
        code,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (*status, code.as_deref()),
        (400, Some("TOKEN_NOT_TRADABLE"))
    );
    assert!(message.ends_with("is not tradable"), "{message}");
    let text = err.to_string();
    assert!(
        text.contains("Jupiter") && text.contains("is not tradable"),
        "{text}"
    );
}

#[tokio::test]
async fn a_500_on_swap_is_not_retried_but_on_quote_it_is() {
    let (url, script) = serve("", vec![Reply::Json(500, json!({"error": "internal"}))]).await;
    let client = client(url, KEY);
    let err = client.build_swap(&quote(), &USER).await.expect_err("500");
    assert_eq!(script.seen().len(), 1);
    assert!(
        matches!(&err, TradeError::Failed { message } if message.contains("Jupiter")),
        "{err}"
    );
    assert!(!format!("{err:?}").contains(KEY));
    client.quote(&sol_for_usdc()).await.expect_err("500");
    assert_eq!(script.seen().len(), 4);
}

#[tokio::test]
async fn a_quote_for_another_trade_is_refused() {
    let mut answer = quote_answer();
    answer["inAmount"] = json!("1");
    let (url, _) = serve("", vec![Reply::Json(200, answer)]).await;
    let err = client(url, KEY)
        .quote(&sol_for_usdc())
        .await
        .expect_err("mismatch");
    assert!(matches!(err, TradeError::Failed { .. }), "{err:?}");
}

#[tokio::test]
async fn a_swap_that_does_not_decode_or_failed_simulation_is_refused() {
    let (url, _) = serve(
        "",
        vec![Reply::Json(
            200,
            json!({"swapTransaction": "bm90IGEgdHJhbnNhY3Rpb24=", "lastValidBlockHeight": 1}),
        )],
    )
    .await;
    let err = client(url, KEY)
        .build_swap(&quote(), &USER)
        .await
        .expect_err("garbage");
    assert!(matches!(err, TradeError::Failed { .. }), "{err:?}");

    let tx = BASE64.encode(wincode::serialize(&unsigned_transaction()).expect("serialize"));
    let (url, _) = serve(
        "",
        vec![Reply::Json(200, json!({
            "swapTransaction": tx, "lastValidBlockHeight": 1,
            "simulationError": {"errorCode": "INSUFFICIENT_FUNDS", "error": "Insufficient funds"}
        }))],
    )
    .await;
    let err = client(url, KEY)
        .build_swap(&quote(), &USER)
        .await
        .expect_err("simulation");
    let TradeError::Rejected { code, message, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (code.as_deref(), message.as_str()),
        (Some("INSUFFICIENT_FUNDS"), "Insufficient funds")
    );
}

#[test]
fn slippage_reads_percent_and_writes_both_forms() {
    assert_eq!(Slippage::DEFAULT.percent(), "1");
    assert_eq!(Slippage::from_percent(0.5).map(Slippage::bps), Ok(50));
    assert_eq!(
        Slippage::from_percent(0.05).map(|s| s.percent()),
        Ok("0.05".to_owned())
    );
    assert_eq!(
        Slippage::from_bps(1_250).map(|s| s.percent()),
        Ok("12.5".to_owned())
    );
    assert_eq!(Slippage::from_percent(0.29).map(Slippage::bps), Ok(29));
    assert!(Slippage::from_percent(50.5).is_err());
    assert!(Slippage::from_percent(0.001).is_err());
    assert!(Slippage::from_percent(f64::NAN).is_err());
    assert!(Slippage::from_bps(5_001).is_err());
}
