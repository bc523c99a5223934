//! POST /trade/quote against the service, with the 1inch-compatible aggregator over a real
//! pool on anvil: shapes, NATIVE, the allowance check, validation before any aggregator is
//! asked, the aggregator's refusals and failures, Solana clusters other than mainnet, and the
//! write budget. On SQLite and PostgreSQL.

use super::{
    desk::{API_KEY, Desk},
    tokens,
};
use alloy::primitives::utils::parse_ether;
use serde_json::json;
use walletops_devnet_aggregator::NATIVE;
use walletops_tests::{Backend, on_both_backends};

async fn a_quote_resolves_native_and_prices_as_the_pool_does(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let amount = parse_ether("1")?;
    for native in ["NATIVE", "native", "Native"] {
        let reply = desk
            .quote(json!({
                "chain": "anvil", "fromToken": native, "toToken": desk.token.to_string(),
                "amount": amount.to_string(),
            }))
            .await?;
        anyhow::ensure!(reply.status == 200, "{native}: {reply:?}");
        let quote = &reply.body["quote"];
        assert_eq!(quote["fromToken"], NATIVE.to_checksum(None));
        assert_eq!(quote["toToken"], desk.token.to_checksum(None));
        assert_eq!(quote["srcAmount"], amount.to_string());
        let expected = desk.pool_out(true, amount).await?;
        assert_eq!(quote["dstAmount"], expected.to_string());
        assert!(quote["raw"].is_object(), "{quote}");
        assert!(
            quote.get("approvalNeeded").is_none(),
            "native needs no approval"
        );
    }
    // The other way, in 0x-hex, NATIVE as the destination.
    let reply = desk
        .quote(json!({
            "chain": "anvil", "fromToken": desk.token.to_string(), "toToken": "native",
            "amount": format!("{:#x}", tokens(10)),
        }))
        .await?;
    anyhow::ensure!(reply.status == 200, "{reply:?}");
    assert_eq!(reply.body["quote"]["toToken"], NATIVE.to_checksum(None));
    assert_eq!(
        reply.body["quote"]["dstAmount"],
        desk.pool_out(false, tokens(10)).await?.to_string()
    );
    Ok(())
}

async fn approval_is_needed_until_the_router_is_approved(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let body = json!({
        "chain": "anvil", "fromToken": desk.token.to_string(), "toToken": "NATIVE",
        "amount": tokens(5).to_string(), "from": desk.wallet.to_string(),
    });
    let reply = desk.quote(body.clone()).await?;
    anyhow::ensure!(reply.status == 200, "{reply:?}");
    let quote = &reply.body["quote"];
    assert_eq!(quote["approvalNeeded"], true);
    assert_eq!(quote["spender"], desk.pool.to_checksum(None));
    assert_eq!(quote["allowanceTarget"], desk.pool.to_checksum(None));
    let approved = desk
        .api()
        .post_with_key(
            "/token/approve",
            &uuid::Uuid::new_v4().to_string(),
            &json!({
                "chain": "anvil", "token": desk.token.to_string(),
                "spender": desk.pool.to_string(), "amount": tokens(5).to_string(),
            })
            .to_string(),
        )
        .await?;
    anyhow::ensure!(approved.status == 200, "{approved:?}");
    let id = approved.body["id"].as_str().unwrap_or_default().to_owned();
    desk.api().wait_for_status(&id, "CONFIRMED").await?;
    let reply = desk.quote(body).await?;
    assert_eq!(reply.body["quote"]["approvalNeeded"], false, "{reply:?}");
    Ok(())
}

async fn bad_fields_are_refused_before_any_aggregator(b: Backend) -> anyhow::Result<()> {
    // No API key: no EVM aggregator at all. Bad fields are still named.
    let desk = Desk::open(b, &[], None).await?;
    let reply = desk
        .quote(json!({
            "chain": "anvil", "fromToken": "ETH", "toToken": "0x12", "amount": "-1",
        }))
        .await?;
    reply.assert_invalid("fromToken")?;
    reply.assert_invalid("toToken")?;
    reply.assert_invalid("amount")?;
    for cluster in ["solana-devnet", "solana-testnet"] {
        let reply = desk
            .quote(json!({
                "chain": cluster, "fromToken": "NATIVE",
                "toToken": "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", "amount": "1000",
            }))
            .await?;
        reply.assert_invalid("chain")?;
        assert!(
            reply.body["error"]
                .as_str()
                .unwrap_or_default()
                .contains("mainnet only")
        );
    }
    let reply = desk
        .quote(json!({
            "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
            "amount": "1000",
        }))
        .await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    assert!(
        reply.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("trade.evm.api_key"),
        "{reply:?}"
    );
    // A swap answers alike, and its key stays free for when the option is set.
    let key = uuid::Uuid::new_v4().to_string();
    let swap = json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
        "amount": "1000",
    })
    .to_string();
    for _ in 0..2 {
        let reply = desk.api().post_with_key("/trade/swap", &key, &swap).await?;
        reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
        assert!(reply.text.contains("trade.evm.api_key"), "{reply:?}");
    }
    assert_eq!(desk.aggregator.faults().requests(), 0, "nothing was asked");
    Ok(())
}

async fn aggregator_refusals_and_failures_are_quote_failed(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let body = json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
        "amount": "1000000",
    });
    desk.aggregator.faults().refuse_token(desk.token);
    let reply = desk.quote(body.clone()).await?;
    reply.assert_error(400, "QUOTE_FAILED")?;
    assert!(
        reply.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not valid token")
    );
    desk.aggregator.faults().clear();
    desk.aggregator.faults().fail_next(10);
    let reply = desk.quote(body.clone()).await?;
    reply.assert_error(400, "QUOTE_FAILED")?;
    assert!(
        reply.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("retry")
    );
    desk.aggregator.faults().clear();
    let reply = desk.quote(body).await?;
    anyhow::ensure!(reply.status == 200, "{reply:?}");
    Ok(())
}

async fn quotes_spend_the_write_budget(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(
        b,
        &[("WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE", "2")],
        Some(API_KEY),
    )
    .await?;
    let body = json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
        "amount": "1000000",
    });
    for _ in 0..2 {
        let reply = desk.quote(body.clone()).await?;
        anyhow::ensure!(reply.status == 200, "{reply:?}");
    }
    desk.quote(body).await?.assert_error(429, "RATE_LIMITED")?;
    Ok(())
}

on_both_backends!(
    a_quote_resolves_native_and_prices_as_the_pool_does,
    approval_is_needed_until_the_router_is_approved,
    bad_fields_are_refused_before_any_aggregator,
    aggregator_refusals_and_failures_are_quote_failed,
    quotes_spend_the_write_budget,
);
