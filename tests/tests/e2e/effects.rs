//! Limits judged on effects: what a write of a limited key does to its wallet, read from its
//! simulation on the node, is what its limits hold, whatever the request says it moves. Each
//! bypass that passed when only the request's own fields were checked is refused here with
//! 403 FORBIDDEN before anything is signed (the wallet's nonce does not move), and balances
//! are read on the node.

use alloy::{
    primitives::{Address, U256},
    sol,
    sol_types::SolCall,
};
use serde_json::json;
use walletops_tests::{
    Backend, Service,
    anvil::{Anvil, KeyedWallet, call_body},
    gateway::{Gateway, Limits},
    on_both_backends,
};

const STRANGER: &str = "0x5555555555555555555555555555555555555555";

sol! {
    function transfer(address to, uint256 amount) returns (bool);
    function approve(address spender, uint256 amount) returns (bool);
    function transferFrom(address from, address to, uint256 amount) returns (bool);
    function forward(address to);
    function pull(address token, address from, address to, uint256 amount);
    function batch(address[] targets, bytes[] data);
}

/// A service on a new anvil whose default wallet holds 1 ETH and 10,000 of a token, and a
/// key limited to 1,000 of that token per write and per day.
struct Setup {
    anvil: Anvil,
    svc: Service,
    wallet: Address,
    token: Address,
    relay: Address,
    key: String,
    prefix: String,
}

async fn setup(b: Backend) -> anyhow::Result<Setup> {
    let keyed = KeyedWallet::start(b).await?;
    let token = keyed.token().await?;
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = keyed;
    let relay = anvil.deploy_relay().await?;
    let token_text = token.to_string();
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            "anvil",
            "--asset",
            &token_text,
            "--max-per-tx",
            "1000",
            "--daily",
            "1000",
        ],
    )
    .await?;
    Ok(Setup {
        anvil,
        svc,
        wallet,
        token,
        relay,
        key,
        prefix,
    })
}

fn stranger() -> Address {
    STRANGER.parse().expect("an address")
}

/// The bypasses of a request-only check: a `transfer` through /contracts/send past the token
/// limit, `approve` of the maximum to a stranger, a native coin the key has no limit on
/// (sent plainly or forwarded by a contract's internal call). An honest contract `transfer`
/// within the limit passes and is counted against the day's budget.
async fn contract_calls_are_held_to_what_they_move(b: Backend) -> anyhow::Result<()> {
    let s = setup(b).await?;
    let api = s.svc.rest(&s.key);
    let token = s.token.to_string().to_lowercase();
    let over = transferCall {
        to: stranger(),
        amount: U256::from(5_000),
    }
    .abi_encode();
    s.anvil
        .assert_forbidden(
            s.wallet,
            &api,
            ("/contracts/send", &call_body(s.token, over, 0)),
            &["at most 1000", "5000", &token],
        )
        .await?;
    let unlimited = approveCall {
        spender: stranger(),
        amount: U256::MAX,
    }
    .abi_encode();
    s.anvil
        .assert_forbidden(
            s.wallet,
            &api,
            ("/contracts/send", &call_body(s.token, unlimited, 0)),
            &["unlimited", STRANGER],
        )
        .await?;
    s.anvil
        .assert_forbidden(
            s.wallet,
            &api,
            (
                "/send",
                &json!({"chain": "anvil", "to": STRANGER, "asset": "native", "amount": "1"}),
            ),
            &["native", "has none"],
        )
        .await?;
    let forwarded = forwardCall { to: stranger() }.abi_encode();
    s.anvil
        .assert_forbidden(
            s.wallet,
            &api,
            ("/contracts/send", &call_body(s.relay, forwarded, 5)),
            &["native", "has none"],
        )
        .await?;
    assert_eq!(
        s.anvil.token_balance(s.token, stranger()).await?,
        U256::ZERO
    );

    let honest = transferCall {
        to: stranger(),
        amount: U256::from(600),
    }
    .abi_encode();
    let reply = api
        .post("/contracts/send", &call_body(s.token, honest.clone(), 0))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    assert_eq!(
        s.anvil.token_balance(s.token, stranger()).await?,
        U256::from(600)
    );
    // 600 of the day's 1000 are spent: another 600 passes the budget.
    let reply = api
        .post("/contracts/send", &call_body(s.token, honest, 0))
        .await?;
    reply.assert_error(403, "FORBIDDEN")?;
    assert!(reply.text.contains("has 400 left"), "{}", reply.text);
    let shown = s.svc.cli(&["keys", "limits", &s.prefix]).await?;
    assert!(shown.stdout.contains("spent 600"), "{}", shown.stdout);

    // A refusal by the key's limits claims no Idempotency-Key: once the owner raises them,
    // the same request under the same key is made.
    let idempotency_key = uuid::Uuid::new_v4().to_string();
    let over = transferCall {
        to: stranger(),
        amount: U256::from(2_000),
    }
    .abi_encode();
    let body = call_body(s.token, over, 0).to_string();
    api.post_with_key("/contracts/send", &idempotency_key, &body)
        .await?
        .assert_error(403, "FORBIDDEN")?;
    s.svc
        .limit_key(
            &s.prefix,
            &[
                "--chain",
                "anvil",
                "--asset",
                &token,
                "--max-per-tx",
                "5000",
                "--daily",
                "5000",
            ],
        )
        .await?;
    let reply = api
        .post_with_key("/contracts/send", &idempotency_key, &body)
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    Ok(())
}

/// Tokens pulled out of the wallet by a contract it approved earlier (directly, and inside
/// a batch) count as the wallet's outflow: a limited key cannot move past its limit that way.
async fn pulls_through_an_earlier_allowance_are_outflows(b: Backend) -> anyhow::Result<()> {
    let s = setup(b).await?;
    // The owner's own key (no limits) lets the relay spend the wallet's tokens.
    let owner = s.svc.rest(&s.svc.api_key);
    let reply = owner
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": s.token.to_string(),
                    "spender": s.relay.to_string(), "amount": "10000"}),
        )
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    owner
        .wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let signed = s.anvil.nonce(s.wallet).await?;
    let api = s.svc.rest(&s.key);
    let amount = U256::from(5_000);
    let pull = pullCall {
        token: s.token,
        from: s.wallet,
        to: stranger(),
        amount,
    }
    .abi_encode();
    let pulled_in_batch = batchCall {
        targets: vec![s.token],
        data: vec![
            transferFromCall {
                from: s.wallet,
                to: stranger(),
                amount,
            }
            .abi_encode()
            .into(),
        ],
    }
    .abi_encode();
    for body in [
        call_body(s.relay, pull, 0),
        call_body(s.relay, pulled_in_batch, 0),
    ] {
        let reply = api.post("/contracts/send", &body).await?;
        reply.assert_error(403, "FORBIDDEN")?;
        assert!(
            reply.text.contains("at most 1000") && reply.text.contains("5000"),
            "{}",
            reply.text
        );
    }
    assert_eq!(s.anvil.nonce(s.wallet).await?, signed, "nothing was signed");
    assert_eq!(
        s.anvil.token_balance(s.token, stranger()).await?,
        U256::ZERO
    );

    // A contract call whose effects pass the key's approval threshold waits for a person,
    // who sees what it would do. (The relay holds an allowance: the key calls it only
    // through a function its owner named.)
    s.svc
        .allow_key(
            &s.prefix,
            &[
                "--chain",
                "anvil",
                "--contract",
                &s.relay.to_string(),
                "--function",
                "pull(address,address,address,uint256)",
            ],
        )
        .await?;
    let token = s.token.to_string();
    s.svc
        .limit_key(
            &s.prefix,
            &[
                "--chain",
                "anvil",
                "--asset",
                &token,
                "--max-per-tx",
                "1000",
                "--daily",
                "1000",
                "--approve-above",
                "500",
            ],
        )
        .await?;
    let pull = pullCall {
        token: s.token,
        from: s.wallet,
        to: stranger(),
        amount: U256::from(800),
    };
    let held = api
        .post("/contracts/send", &call_body(s.relay, pull.abi_encode(), 0))
        .await?;
    assert_eq!(held.status, 202, "{}", held.text);
    let summary = held.body["approval"]["summary"]
        .as_str()
        .unwrap_or_default();
    assert!(
        summary.contains(&format!(
            "simulated: sends 800 of {} to {STRANGER}",
            token.to_lowercase()
        )),
        "{summary}"
    );
    assert_eq!(held.body["approval"]["amount"], "800");
    assert_eq!(s.anvil.nonce(s.wallet).await?, signed, "nothing was signed");
    Ok(())
}

/// Twenty contract `transfer`s of 100 at once under a budget of 1000 (per write 1000): the
/// simulated outflows are reserved one after the other, and exactly ten are signed.
async fn parallel_effects_cannot_overspend_a_budget(b: Backend) -> anyhow::Result<()> {
    let s = setup(b).await?;
    let api = s.svc.rest(&s.key);
    let data = transferCall {
        to: stranger(),
        amount: U256::from(100),
    }
    .abi_encode();
    let body = call_body(s.token, data, 0);
    let replies =
        futures::future::join_all((0..20).map(|_| api.post("/contracts/send", &body))).await;
    let mut paid = Vec::new();
    for reply in replies {
        let reply = reply?;
        if reply.status == 200 {
            paid.push(reply.body["id"].as_str().unwrap_or_default().to_owned());
        } else {
            reply.assert_error(403, "FORBIDDEN")?;
        }
    }
    assert_eq!(paid.len(), 10, "exactly the budget's worth was signed");
    for id in &paid {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    assert_eq!(s.anvil.nonce(s.wallet).await?, 10);
    assert_eq!(
        s.anvil.token_balance(s.token, stranger()).await?,
        U256::from(1_000)
    );
    Ok(())
}

/// A node without `eth_simulateV1` is asked `debug_traceCall`, whose call frames show the
/// same outflows; one with neither leaves a limited key's writes refused 503 naming the chain
/// and the methods, while a key without limits writes as before.
async fn nodes_without_simulate_fall_back_then_refuse_limited_keys(
    b: Backend,
) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let gateway = Gateway::start(anvil.url()).await?;
    gateway.limit(Limits {
        without: vec!["eth_simulateV1"],
        ..Limits::default()
    });
    let keyed = KeyedWallet::on(anvil, b, Some(gateway.url())).await?;
    let token = keyed.token().await?;
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = keyed;
    let owner = svc.rest(&svc.api_key);
    let lower = token.to_string().to_lowercase();
    svc.limit_key(
        &prefix,
        &[
            "--chain",
            "anvil",
            "--asset",
            &lower,
            "--max-per-tx",
            "1000",
        ],
    )
    .await?;
    let api = svc.rest(&key);
    let over = transferCall {
        to: stranger(),
        amount: U256::from(5_000),
    }
    .abi_encode();
    let reply = api
        .post("/contracts/send", &call_body(token, over.clone(), 0))
        .await?;
    reply.assert_error(403, "FORBIDDEN")?;
    assert!(reply.text.contains("at most 1000"), "{}", reply.text);
    let within = transferCall {
        to: stranger(),
        amount: U256::from(600),
    }
    .abi_encode();
    let reply = api
        .post("/contracts/send", &call_body(token, within.clone(), 0))
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;

    gateway.limit(Limits {
        without: vec!["eth_simulateV1", "debug_traceCall"],
        ..Limits::default()
    });
    let signed = anvil.nonce(wallet).await?;
    let reply = api
        .post("/contracts/send", &call_body(token, within.clone(), 0))
        .await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    assert!(
        reply.text.contains("anvil") && reply.text.contains("debug_traceCall"),
        "{}",
        reply.text
    );
    assert_eq!(anvil.nonce(wallet).await?, signed, "nothing was signed");
    let reply = owner
        .post("/contracts/send", &call_body(token, over, 0))
        .await?;
    assert_eq!(
        reply.status, 200,
        "a key without limits writes: {}",
        reply.text
    );
    Ok(())
}

on_both_backends!(
    contract_calls_are_held_to_what_they_move,
    pulls_through_an_earlier_allowance_are_outflows,
    parallel_effects_cannot_overspend_a_budget,
    nodes_without_simulate_fall_back_then_refuse_limited_keys,
);
