//! EVM swaps held to a bound no aggregator sets alone: the router's call data is read, its
//! receiver must be the wallet, its executor a known one, and its minimum at least the
//! caller's quote (`quoteId`) or `minDstAmount` less the slippage, or a quote asked apart
//! from the swap. The aggregator here lies in its answers; what left the wallet is read
//! from the node.

use alloy::primitives::{Address, U256, utils::parse_ether};
use sea_orm::ConnectionTrait as _;
use serde_json::{Value, json};
use walletops_tests::{Backend, on_both_backends};

use super::desk::{API_KEY, Desk};

/// Selling 1 ETH for the pool's token.
fn buy(desk: &Desk) -> Value {
    json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
        "amount": parse_ether("1").expect("1 ETH").to_string(),
    })
}

/// `body` with `field` set to `value`.
fn with(mut body: Value, field: &str, value: Value) -> Value {
    body[field] = value;
    body
}

/// The `quoteId` of a fresh quote of `body`'s trade.
async fn quote_id(desk: &Desk, body: &Value) -> anyhow::Result<Value> {
    let mut trade = body.clone();
    if let Some(fields) = trade.as_object_mut() {
        fields.remove("quoteId");
        fields.remove("minDstAmount");
    }
    let quote = desk.api().post("/trade/quote", &trade).await?;
    let id = quote.body["quote"]["quoteId"].clone();
    anyhow::ensure!(id.is_string(), "no quoteId: {}", quote.text);
    Ok(id)
}

/// A 1inch answering `dstAmount: 1` with a stranger as `srcReceiver` is refused on the
/// executor; the same lie on the swap call is refused against the caller's quote, and a
/// `minDstAmount` above what the pool pays is refused too. The honest swap of the same
/// quote then goes through. Only that swap leaves the wallet.
async fn a_hostile_1inch_is_held_to_the_wallet_and_an_independent_bound(
    b: Backend,
) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let stranger = Address::repeat_byte(0x66);
    let faults = desk.aggregator.faults();
    faults.answer_dst_amount(U256::from(1));
    faults.send_input_to(stranger);
    let reply = desk.api().post("/trade/swap", &buy(&desk)).await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert!(
        reply.text.contains("executor check") && reply.text.contains(&stranger.to_string()),
        "{}",
        reply.text
    );
    faults.clear();

    let id = quote_id(&desk, &buy(&desk)).await?;
    faults.answer_dst_amount(U256::from(1));
    let named = with(buy(&desk), "quoteId", id.clone());
    let reply = desk.api().post("/trade/swap", &named).await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert!(reply.text.contains("minimum check"), "{}", reply.text);
    faults.clear();

    let expected = desk.pool_out(true, parse_ether("1")?).await?;
    let greedy = with(
        buy(&desk),
        "minDstAmount",
        json!((expected + U256::from(1)).to_string()),
    );
    let reply = desk.api().post("/trade/swap", &greedy).await?;
    reply.assert_error(502, "SEND_FAILED")?;
    assert!(reply.text.contains("minimum check"), "{}", reply.text);
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 0, "nothing signed");
    assert_eq!(desk.anvil.balance(stranger).await?, U256::ZERO);

    let held = desk.anvil.token_balance(desk.token, desk.wallet).await?;
    let reply = desk.api().post("/trade/swap", &named).await?;
    let swap = reply.body["id"].as_str().unwrap_or_default().to_owned();
    anyhow::ensure!(!swap.is_empty(), "{}", reply.text);
    let record = desk.api().wait_for_status(&swap, "CONFIRMED").await?;
    assert_eq!(
        desk.anvil.token_balance(desk.token, desk.wallet).await? - held,
        expected,
        "{record}"
    );
    Ok(())
}

/// A `quoteId` is the caller's key's, for its own trade, for a minute: any other names the
/// field, and nothing is signed.
async fn a_quote_id_binds_its_key_trade_and_minute(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let id = quote_id(&desk, &buy(&desk)).await?;
    for bad in [json!("not-a-uuid"), json!(uuid::Uuid::now_v7().to_string())] {
        desk.api()
            .post("/trade/swap", &with(buy(&desk), "quoteId", bad))
            .await?
            .assert_invalid("quoteId")?;
    }
    let mut other_amount = with(buy(&desk), "quoteId", id.clone());
    other_amount["amount"] = json!(parse_ether("2")?.to_string());
    let reply = desk.api().post("/trade/swap", &other_amount).await?;
    reply.assert_invalid("quoteId")?;
    assert!(reply.text.contains("not this swap's"), "{}", reply.text);

    let other_key = desk.svc.create_key("another bot").await?;
    let reply = desk
        .svc
        .rest(&other_key)
        .post("/trade/swap", &with(buy(&desk), "quoteId", id.clone()))
        .await?;
    reply.assert_invalid("quoteId")?;
    assert!(reply.text.contains("another API key"), "{}", reply.text);

    // Every quote this service gave moved past its minute, as the clock would.
    desk.svc
        .database()
        .await?
        .execute_unprepared("UPDATE quotes SET expires_at = '2020-01-01T00:00:00Z'")
        .await?;
    let reply = desk
        .api()
        .post("/trade/swap", &with(buy(&desk), "quoteId", id))
        .await?;
    reply.assert_invalid("quoteId")?;
    assert!(reply.text.contains("expired"), "{}", reply.text);
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 0, "nothing signed");
    Ok(())
}

/// A key held to its recipients could pay anyone by buying a token they control: it buys
/// only the tokens its token rules list (`keys allow --token`).
async fn a_key_held_to_recipients_buys_only_listed_tokens(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let key = desk.svc.create_key("recipient bot").await?;
    let prefix = key.split('_').nth(1).unwrap_or_default().to_owned();
    let friend = Address::repeat_byte(0x77).to_string();
    desk.svc
        .allow_key(&prefix, &["--chain", "anvil", "--recipient", &friend])
        .await?;
    let bot = desk.svc.rest(&key);
    let reply = bot.post("/trade/swap", &buy(&desk)).await?;
    reply.assert_error(403, "FORBIDDEN")?;
    assert!(
        reply.text.contains("allowed tokens") && reply.text.contains(&desk.token.to_string()),
        "{}",
        reply.text
    );
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 0, "nothing signed");
    let token = desk.token.to_string();
    let policy = desk
        .svc
        .allow_key(&prefix, &["--chain", "anvil", "--token", &token])
        .await?;
    assert!(policy.contains("token"), "{policy}");
    let reply = bot.post("/trade/swap", &buy(&desk)).await?;
    let swap = reply.body["id"].as_str().unwrap_or_default().to_owned();
    anyhow::ensure!(!swap.is_empty(), "{}", reply.text);
    desk.api().wait_for_status(&swap, "CONFIRMED").await?;
    Ok(())
}

on_both_backends!(
    a_hostile_1inch_is_held_to_the_wallet_and_an_independent_bound,
    a_quote_id_binds_its_key_trade_and_minute,
    a_key_held_to_recipients_buys_only_listed_tokens,
);
