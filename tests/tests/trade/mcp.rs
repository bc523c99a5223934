//! The agent's trade tools: `quote_swap` and `swap` over MCP against the 1inch-compatible
//! aggregator and its pool on anvil answer as `POST /trade/quote` and `POST /trade/swap`
//! do, and the swap lands on the node.

use alloy::primitives::utils::parse_ether;
use serde_json::{Value, json};
use walletops_tests::{
    Backend,
    mcp::{connect, ok},
    on_both_backends,
};

use super::desk::{API_KEY, Desk};

async fn an_agent_quotes_and_swaps(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let amount = parse_ether("1")?;
    let expected = desk.pool_out(true, amount).await?;
    let agent = connect(&desk.svc, &desk.svc.api_key, true).await?;
    let trade = json!({"chain": "anvil", "fromToken": "NATIVE",
                       "toToken": desk.token.to_string(), "amount": amount.to_string()});
    let quote = ok(&agent, "quote_swap", trade.clone()).await?;
    assert_eq!(quote["quote"]["dstAmount"], expected.to_string(), "{quote}");
    let rest = desk.api().post("/trade/quote", &trade).await?;
    // Each quote has an id of its own.
    let (mut quote, mut rest) = (quote, rest.body);
    let mut ids = Vec::new();
    for body in [&mut quote, &mut rest] {
        let id = body["quote"]
            .as_object_mut()
            .and_then(|q| q.remove("quoteId"));
        assert!(id.as_ref().is_some_and(Value::is_string), "{body}");
        ids.extend(id);
    }
    assert_eq!(quote, rest, "the same JSON as REST");
    let held = desk.anvil.token_balance(desk.token, desk.wallet).await?;
    let mut swap = trade.clone();
    swap["slippage"] = json!(2);
    // Held to the agent's own quote.
    swap["quoteId"] = ids[0].clone();
    let submitted = ok(&agent, "swap", swap).await?;
    let id = submitted["id"].as_str().unwrap_or_default().to_owned();
    let record = desk.api().wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(record["type"], "swap", "{record}");
    assert_eq!(
        desk.anvil.token_balance(desk.token, desk.wallet).await? - held,
        expected,
        "the pool's output arrived"
    );
    Ok(())
}

on_both_backends!(an_agent_quotes_and_swaps);
