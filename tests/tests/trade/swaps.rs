//! POST /trade/swap on an EVM chain, against the service with the 1inch-compatible
//! aggregator over a real pool on anvil: the swap pays what the pool computes, one key gives
//! one swap, an ERC20 sale needs the approval its refusal names, the guard refuses a
//! tampered transaction before anything is signed, a route that reverts ends REVERTED, and
//! another user's wallet is forbidden. On SQLite and PostgreSQL.

use std::collections::BTreeSet;

use alloy::{
    primitives::{Address, B256, U256, utils::parse_ether},
    providers::Provider,
    sol,
    sol_types::SolCall,
};
use serde_json::{Value, json};
use walletops_devnet_aggregator::NATIVE;
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Backend, Reply, on_both_backends, with_key, write_request};

use super::{
    desk::{API_KEY, Desk},
    tokens,
};

sol! {
    interface Pool {
        function swapNativeForToken(uint256 minOut) external payable returns (uint256);
    }

    /// tests/contracts/Relay.sol.
    interface Relay {
        function forward(address to) external payable;
    }
}

/// Selling 1 ETH for the pool's token.
fn buy(desk: &Desk) -> Value {
    json!({
        "chain": "anvil", "fromToken": "NATIVE", "toToken": desk.token.to_string(),
        "amount": parse_ether("1").expect("1 ETH").to_string(),
    })
}

/// The id of a submission, which must have been accepted.
fn accepted(reply: &Reply) -> anyhow::Result<String> {
    anyhow::ensure!(
        reply.status == 200 && reply.body["status"] == "SUBMITTED",
        "{reply:?}"
    );
    Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
}

async fn a_swap_pays_what_the_pool_computes_and_replays_without_sending(
    b: Backend,
) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let amount = parse_ether("1")?;
    let expected = desk.pool_out(true, amount).await?;
    let (eth, held) = (
        desk.anvil.balance(desk.wallet).await?,
        desk.anvil.token_balance(desk.token, desk.wallet).await?,
    );
    let key = uuid::Uuid::new_v4().to_string();
    let body = buy(&desk).to_string();
    let reply = desk.api().post_with_key("/trade/swap", &key, &body).await?;
    let id = accepted(&reply)?;
    let record = desk.api().wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(record["type"], "swap", "{record}");
    assert_eq!(record["to"], desk.pool.to_checksum(None), "{record}");
    assert_eq!(record["fromToken"], NATIVE.to_checksum(None), "{record}");
    assert_eq!(record["toToken"], desk.token.to_checksum(None), "{record}");
    assert_eq!(record["srcAmount"], amount.to_string(), "{record}");
    assert_eq!(record["dstAmount"], expected.to_string(), "{record}");
    let minimum = expected * U256::from(99) / U256::from(100);
    assert_eq!(record["minDstAmount"], minimum.to_string(), "{record}");
    // Exactly the pool's output arrived, and exactly the amount and the fee left.
    assert_eq!(
        desk.anvil.token_balance(desk.token, desk.wallet).await? - held,
        expected
    );
    let hash: B256 = record["hash"].as_str().unwrap_or_default().parse()?;
    let receipt = desk
        .anvil
        .provider()
        .get_transaction_receipt(hash)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no receipt for {hash}"))?;
    let fee = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    assert_eq!(desk.anvil.balance(desk.wallet).await?, eth - amount - fee);
    // The replay answers the same body and sends nothing.
    let asked = desk.aggregator.faults().requests();
    let replay = desk.api().post_with_key("/trade/swap", &key, &body).await?;
    assert_eq!(replay.body, reply.body);
    assert_eq!(desk.aggregator.faults().requests(), asked, "nothing built");
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 1, "one transaction");
    Ok(())
}

async fn twenty_identical_swaps_give_one_swap_on_chain(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = buy(&desk).to_string();
    let api = desk.api();
    let replies = futures::future::join_all((0..20).map(|_| {
        let (api, key, body) = (api.clone(), key.clone(), body.clone());
        async move { api.post_with_key("/trade/swap", &key, &body).await }
    }))
    .await;
    let mut bodies = BTreeSet::new();
    for reply in replies {
        let reply = reply?;
        accepted(&reply)?;
        bodies.insert(reply.body.to_string());
    }
    assert_eq!(bodies.len(), 1, "every twin answers alike: {bodies:?}");
    let reply: Value = serde_json::from_str(bodies.first().expect("one"))?;
    let id = reply["id"].as_str().unwrap_or_default();
    desk.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 1, "one swap on chain");
    Ok(())
}

async fn an_erc20_sale_needs_the_approval_it_names(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let amount = tokens(100);
    let sell = json!({
        "chain": "anvil", "fromToken": desk.token.to_string(), "toToken": "native",
        "amount": format!("{amount:#x}"), "slippage": 0.5,
    });
    let key = uuid::Uuid::new_v4().to_string();
    let refused = desk
        .api()
        .post_with_key("/trade/swap", &key, &sell.to_string())
        .await?;
    refused.assert_error(400, "QUOTE_FAILED")?;
    let said = refused.body["error"].as_str().unwrap_or_default();
    for named in [
        desk.token.to_checksum(None),
        desk.pool.to_checksum(None),
        "POST /token/approve".to_owned(),
    ] {
        assert!(said.contains(&named), "{named} in {said}");
    }
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 0, "nothing was sent");
    let approve = desk
        .api()
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": desk.token.to_string(),
                    "spender": desk.pool.to_string(), "amount": amount.to_string()}),
        )
        .await?;
    desk.api()
        .wait_for_status(&accepted(&approve)?, "CONFIRMED")
        .await?;
    let expected = desk.pool_out(false, amount).await?;
    let eth = desk.anvil.balance(desk.wallet).await?;
    // A QUOTE_FAILED claims no key: the same request succeeds under it once approved.
    let sold = desk
        .api()
        .post_with_key("/trade/swap", &key, &sell.to_string())
        .await?;
    let record = desk
        .api()
        .wait_for_status(&accepted(&sold)?, "CONFIRMED")
        .await?;
    assert_eq!(record["token"], desk.token.to_checksum(None), "{record}");
    assert_eq!(record["dstAmount"], expected.to_string(), "{record}");
    // The pool's output arrived, less the swap's fee (far below 0.01 ETH on anvil).
    let after = desk.anvil.balance(desk.wallet).await?;
    assert!(
        after < eth + expected && after + parse_ether("0.01")? > eth + expected,
        "{eth} + {expected} vs {after}"
    );
    Ok(())
}

async fn the_guard_refuses_a_tampered_swap_before_signing(b: Backend) -> anyhow::Result<()> {
    let mut desk = Desk::open(b, &[], Some(API_KEY)).await?;
    // A second pool like the first: a router the aggregator does not name as spender.
    let other = walletops_devnet_aggregator::deploy_pool(
        desk.anvil.url(),
        walletops_tests::anvil::DEV_ACCOUNT,
        desk.token,
    )
    .await?;
    walletops_devnet_aggregator::add_liquidity(
        desk.anvil.url(),
        walletops_tests::anvil::DEV_ACCOUNT,
        other,
        parse_ether("100")?,
        tokens(200_000),
    )
    .await?;
    let faults = desk.aggregator.faults();
    let key = uuid::Uuid::new_v4().to_string();
    let body = buy(&desk).to_string();
    faults.route_swaps_to(other);
    let refused = desk.api().post_with_key("/trade/swap", &key, &body).await?;
    refused.assert_error(502, "SEND_FAILED")?;
    assert!(refused.text.contains("router check"), "{}", refused.text);
    faults.clear();
    faults.overpay_swaps(U256::from(1));
    let refused = desk.api().post("/trade/swap", &buy(&desk)).await?;
    refused.assert_error(502, "SEND_FAILED")?;
    assert!(refused.text.contains("value check"), "{}", refused.text);
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 0, "nothing signed");
    // The refused key keeps its refusal, as every failed write's does; a new key swaps
    // once the aggregator behaves.
    faults.clear();
    desk.api()
        .post_with_key("/trade/swap", &key, &body)
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    let reply = desk.api().post("/trade/swap", &buy(&desk)).await?;
    let first = accepted(&reply)?;
    desk.api().wait_for_status(&first, "CONFIRMED").await?;

    // A router on the operator's allow list passes.
    let relay = desk.anvil.deploy_relay().await?;
    let allowed = format!("[\"{other}\", \"{relay}\", \"{}\"]", desk.pool);
    let options = desk.anvil.service_options(
        "",
        &[
            ("WALLETOPS_TRADE__EVM__BASE_URL", desk.url.as_str()),
            ("WALLETOPS_TRADE__EVM__API_KEY", API_KEY),
            (super::desk::ALLOWED_ROUTERS, allowed.as_str()),
        ],
    );
    desk.svc.kill().await?;
    desk.svc.relaunch(options).await?;
    faults.route_swaps_to(other);
    let reply = desk.api().post("/trade/swap", &buy(&desk)).await?;
    let record = desk
        .api()
        .wait_for_status(&accepted(&reply)?, "CONFIRMED")
        .await?;
    assert_eq!(record["to"], other.to_checksum(None), "{record}");

    // An allowed router whose call data passes the coin on to someone else: router and
    // value checks pass, its call data is no 1inch v6 swap.
    let signed = desk.anvil.nonce(desk.wallet).await?;
    faults.route_swaps_to(relay);
    faults.replace_swap_data(
        Relay::forwardCall {
            to: Address::repeat_byte(0x66),
        }
        .abi_encode()
        .into(),
    );
    let refused = desk.api().post("/trade/swap", &buy(&desk)).await?;
    refused.assert_error(502, "SEND_FAILED")?;
    assert!(
        refused.text.contains("calldata check") && refused.text.contains("swap functions"),
        "{}",
        refused.text
    );
    assert_eq!(
        desk.anvil.nonce(desk.wallet).await?,
        signed,
        "nothing signed"
    );
    assert_eq!(
        desk.anvil.balance(Address::repeat_byte(0x66)).await?,
        U256::ZERO
    );
    Ok(())
}

async fn a_route_that_reverts_on_chain_ends_reverted(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    desk.anvil.rpc("evm_setAutomine", json!([false])).await?;
    let reply = desk.api().post("/trade/swap", &buy(&desk)).await?;
    let id = accepted(&reply)?;
    // A large trade lands first, in the same block, and moves the price below the swap's
    // minimum: simulated alone the swap passed, on chain it reverts.
    let front_run = Pool::swapNativeForTokenCall { minOut: U256::ZERO };
    desk.anvil
        .rpc(
            "eth_sendTransaction",
            json!([{
                "from": walletops_tests::anvil::DEV_ACCOUNT,
                "to": desk.pool,
                "value": format!("{:#x}", parse_ether("50")?),
                "data": format!("0x{}", alloy::hex::encode(front_run.abi_encode())),
                "maxPriorityFeePerGas": "0x174876e800",
                "maxFeePerGas": "0x2540be4000",
            }]),
        )
        .await?;
    desk.anvil.rpc("evm_mine", json!([])).await?;
    desk.anvil.rpc("evm_setAutomine", json!([true])).await?;
    let record = desk.api().wait_for_status(&id, "REVERTED").await?;
    assert_eq!(record["type"], "swap", "{record}");
    Ok(())
}

async fn another_users_wallet_is_forbidden_and_bad_fields_named(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let bob = desk.svc.create_user("bob").await?;
    let bobs: Address = desk
        .svc
        .rest(&bob)
        .default_wallet("ethereum")
        .await?
        .parse()?;
    let mut body = buy(&desk);
    body["from"] = json!(bobs.to_string());
    desk.api()
        .post("/trade/swap", &body)
        .await?
        .assert_error_on(403, "FORBIDDEN", "from")?;
    desk.quote(body.clone())
        .await?
        .assert_error_on(403, "FORBIDDEN", "from")?;
    for slippage in [0.0, 50.5, -1.0] {
        let mut bad = buy(&desk);
        bad["slippage"] = json!(slippage);
        desk.api()
            .post("/trade/swap", &bad)
            .await?
            .assert_invalid("slippage")?;
    }
    let unkeyed = desk
        .api()
        .request(
            reqwest::Method::POST,
            "/trade/swap",
            &[],
            Some(&buy(&desk).to_string()),
        )
        .await?;
    unkeyed.assert_error(400, "INVALID_INPUT")?;
    assert_eq!(desk.aggregator.faults().requests(), 0, "nothing was asked");
    Ok(())
}

async fn grpc_quotes_and_swaps_as_rest_does(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[], Some(API_KEY)).await?;
    let amount = parse_ether("1")?;
    let expected = desk.pool_out(true, amount).await?;
    let mut core = WalletOpsServiceClient::new(desk.svc.channel().await?);
    let quote = core
        .get_quote(with_key(
            pb::GetQuoteRequest {
                chain: "anvil".to_owned(),
                from_token: "Native".to_owned(),
                to_token: desk.token.to_string(),
                amount: amount.to_string(),
                ..Default::default()
            },
            &desk.svc.api_key,
        )?)
        .await?
        .into_inner()
        .quote
        .ok_or_else(|| anyhow::anyhow!("no quote"))?;
    assert_eq!(quote.from_token, NATIVE.to_checksum(None));
    assert_eq!(quote.dst_amount, expected.to_string());
    let request = pb::SwapRequest {
        chain: "anvil".to_owned(),
        from_token: "NATIVE".to_owned(),
        to_token: desk.token.to_string(),
        amount: amount.to_string(),
        slippage: Some(2.0),
        ..Default::default()
    };
    let key = uuid::Uuid::new_v4().to_string();
    let submission = core
        .swap(write_request(request.clone(), &desk.svc.api_key, &key)?)
        .await?
        .into_inner()
        .submission
        .ok_or_else(|| anyhow::anyhow!("no submission"))?;
    desk.api()
        .wait_for_status(&submission.id, "CONFIRMED")
        .await?;
    let record = core
        .get_transaction(with_key(
            pb::GetTransactionRequest {
                id: submission.id.clone(),
            },
            &desk.svc.api_key,
        )?)
        .await?
        .into_inner()
        .transaction
        .ok_or_else(|| anyhow::anyhow!("no record"))?;
    assert_eq!(record.kind, i32::from(pb::TransactionKind::Swap));
    assert_eq!(record.dst_amount, Some(expected.to_string()));
    let minimum = expected * U256::from(98) / U256::from(100);
    assert_eq!(record.min_dst_amount, Some(minimum.to_string()));
    // The replay over gRPC answers the same submission.
    let replay = core
        .swap(write_request(request, &desk.svc.api_key, &key)?)
        .await?
        .into_inner()
        .submission;
    assert_eq!(replay.map(|s| s.id), Some(submission.id));
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 1);
    Ok(())
}

/// A router the aggregator names is no permission: a pool neither built in nor on
/// `trade.evm.allowed_routers` is not shown as a spender to approve, and no swap of it is
/// signed. The quote's 100 token units buy nothing from the pool, so the aggregator refuses
/// it too: the router's refusal is still the answer, every time.
async fn a_spender_not_on_the_router_list_is_refused(b: Backend) -> anyhow::Result<()> {
    let desk = Desk::open(b, &[(super::desk::ALLOWED_ROUTERS, "[]")], Some(API_KEY)).await?;
    let quote = desk
        .api()
        .post(
            "/trade/quote",
            &json!({"chain": "anvil", "fromToken": desk.token.to_string(), "toToken": "NATIVE",
                    "amount": "100", "from": desk.wallet.to_string()}),
        )
        .await?;
    quote.assert_error(400, "QUOTE_FAILED")?;
    assert!(
        quote.text.contains(&desk.pool.to_checksum(None)) && quote.text.contains("allowed_routers"),
        "{}",
        quote.text
    );
    let refused = desk.api().post("/trade/swap", &buy(&desk)).await?;
    refused.assert_error(502, "SEND_FAILED")?;
    assert!(refused.text.contains("spender check"), "{}", refused.text);
    assert_eq!(desk.anvil.nonce(desk.wallet).await?, 0, "nothing signed");
    Ok(())
}

on_both_backends!(
    a_spender_not_on_the_router_list_is_refused,
    grpc_quotes_and_swaps_as_rest_does,
    a_swap_pays_what_the_pool_computes_and_replays_without_sending,
    twenty_identical_swaps_give_one_swap_on_chain,
    an_erc20_sale_needs_the_approval_it_names,
    the_guard_refuses_a_tampered_swap_before_signing,
    a_route_that_reverts_on_chain_ends_reverted,
    another_users_wallet_is_forbidden_and_bad_fields_named,
);
