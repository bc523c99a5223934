//! Solana sends priced to land, against the test node: each carries a compute-unit limit
//! from its simulation plus the margin and a compute-unit price at the configured percentile
//! of the fees the node reports for what it writes, capped, and its history says which. Read
//! from the transaction that landed, not from what the service says it asked.

use std::str::FromStr;

use anyhow::Context as _;
use serde_json::json;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_transaction_status_client_types::option_serializer::OptionSerializer;
use walletops_tests::{
    Backend, Service,
    metrics::{scrape_text, sum},
    on_both_backends, poll_until,
    solana_node::{self as sol, SolanaNode},
};

const SOL: u64 = 1_000_000_000;

/// The compute-unit limit and price the landed transaction `signature` asked for, and the
/// units it consumed.
async fn budget_landed(rpc: &RpcClient, signature: &str) -> anyhow::Result<(u32, u64, u64)> {
    let (tx, meta) = sol::landed(rpc, signature).await?;
    let keys = tx.message.static_account_keys();
    let (mut limit, mut price) = (None, None);
    for ix in tx.message.instructions() {
        if keys[usize::from(ix.program_id_index)] != solana_compute_budget_interface::ID {
            continue;
        }
        match ix.data.split_first() {
            Some((2, rest)) => limit = Some(u32::from_le_bytes(rest.try_into()?)),
            Some((3, rest)) => price = Some(u64::from_le_bytes(rest.try_into()?)),
            other => anyhow::bail!("an unexpected compute budget instruction {other:?}"),
        }
    }
    let consumed = match meta.context("meta")?.compute_units_consumed {
        OptionSerializer::Some(units) => units,
        _ => anyhow::bail!("no compute units consumed"),
    };
    Ok((
        limit.context("no compute unit limit")?,
        price.context("no compute unit price")?,
        consumed,
    ))
}

async fn sends_pay_the_reported_price_and_ask_what_they_use(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let options = node.service_options("max_priority_fee_micro_lamports = 500", "");
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&api.default_wallet("solana").await?)?;
    node.airdrop(&wallet, 2 * SOL)?;
    let rpc = RpcClient::new(node.url());
    let send = async |lamports: u64| -> anyhow::Result<(String, String)> {
        let reply = api
            .post(
                "/send",
                &json!({"chain": "solana-devnet", "to": Pubkey::new_unique().to_string(), "asset": "native", "amount": lamports.to_string()}),
            )
            .await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        let id = reply.body["id"].as_str().context("an id")?.to_owned();
        let done = api.wait_for_status(&id, "CONFIRMED").await?;
        let hash = done["hash"].as_str().context("a signature")?.to_owned();
        Ok((id, hash))
    };
    // p75 of ten reported prices is the eighth, 800: above the cap of 500.
    sol::set_recent_fees(&rpc, &(1..=10).map(|k| k * 100).collect::<Vec<_>>()).await?;
    let (id, hash) = send(SOL / 100).await?;
    let (limit, price, consumed) = budget_landed(&rpc, &hash).await?;
    assert_eq!(price, 500, "the cap holds");
    assert!(
        u64::from(limit) >= consumed && u64::from(limit) <= consumed * 11 / 10 + 1,
        "limit {limit} for {consumed} consumed"
    );
    api.wait_for_note(
        &id,
        "price 500 micro-lamports (p75 of recent fees, capped at 500)",
    )
    .await?;
    // Quieter blocks: p75 of 10, 20, 30, 40 is 30.
    sol::set_recent_fees(&rpc, &[40, 10, 30, 20]).await?;
    let (id, hash) = send(SOL / 100).await?;
    let (_, price, _) = budget_landed(&rpc, &hash).await?;
    assert_eq!(price, 30);
    api.wait_for_note(&id, &format!("compute unit limit {limit}"))
        .await?;
    // Lost, every send of it, until its blockhash expired unseen: signed again at the
    // price blocks take now.
    sol::drop_transactions(&rpc, 1_000_000).await?;
    let reply = api
        .post(
            "/send",
            &json!({"chain": "solana-devnet", "to": Pubkey::new_unique().to_string(), "asset": "native", "amount": (SOL / 100).to_string()}),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    let id = reply.body["id"].as_str().context("an id")?.to_owned();
    sol::set_recent_fees(&rpc, &[100, 200]).await?;
    sol::expire_blockhash(&rpc).await?;
    api.wait_for_note(&id, "re-signed").await?;
    sol::drop_transactions(&rpc, 0).await?;
    let done = api.wait_for_status(&id, "CONFIRMED").await?;
    let (_, price, _) = budget_landed(&rpc, done["hash"].as_str().context("a signature")?).await?;
    assert_eq!(price, 200, "re-signed at the price of now");
    assert!(
        done["statusHistory"].to_string().contains("re-signed"),
        "{done}"
    );
    api.wait_for_note(&id, "price 200 micro-lamports").await?;
    Ok(())
}

/// A service over a fresh node, its cap `max_price`, resending every 200 ms; its API, its
/// wallet (funded) and an RPC client of the node.
async fn busy_cluster(
    b: Backend,
    max_price: u64,
) -> anyhow::Result<(SolanaNode, Service, RpcClient)> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let chain = format!("max_priority_fee_micro_lamports = {max_price}\nresend_interval_ms = 200");
    let mut options = node.service_options(&chain, "");
    options
        .env
        .push(("WALLETOPS_METRICS_ADDR".into(), "127.0.0.1:0".into()));
    let svc = Service::start_with(b, options).await?;
    let wallet = Pubkey::from_str(&svc.rest(&svc.api_key).default_wallet("solana").await?)?;
    node.airdrop(&wallet, 2 * SOL)?;
    let rpc = RpcClient::new(node.url());
    Ok((node, svc, rpc))
}

/// Sends `lamports` to `to` through `api`; the record's id.
/// The service's metrics text once `ready` holds of it.
async fn metrics_once(svc: &Service, ready: impl Fn(&str) -> bool) -> anyhow::Result<String> {
    let url = svc.metrics_url.clone().context("a metrics listener")?;
    poll_until("the metrics to count the transfers", || async {
        let text = scrape_text(&url).await?;
        Ok(ready(&text).then_some(text))
    })
    .await
}

async fn pay(api: &walletops_tests::Rest, to: &Pubkey, lamports: u64) -> anyhow::Result<String> {
    let reply = api
        .post(
            "/send",
            &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": lamports.to_string()}),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    Ok(reply.body["id"].as_str().context("an id")?.to_owned())
}

async fn a_busy_leader_takes_sends_priced_at_what_blocks_take(b: Backend) -> anyhow::Result<()> {
    let (_node, svc, rpc) = busy_cluster(b, 1_000_000).await?;
    let api = svc.rest(&svc.api_key);
    sol::set_congestion(&rpc, 5_000, 0).await?;
    let to = Pubkey::new_unique();
    let done = api
        .wait_for_status(&pay(&api, &to, SOL / 100).await?, "CONFIRMED")
        .await?;
    let (_, price, _) = budget_landed(&rpc, done["hash"].as_str().context("a signature")?).await?;
    assert_eq!(price, 5_000, "the price follows what the node reports");
    assert_eq!(rpc.get_balance(&to).await?, SOL / 100);
    // Its landing time, by chain and route, and the price it offered.
    let landing = "walletops_landing_duration_seconds_count";
    let text = metrics_once(&svc, |text| {
        sum(text, landing, Some("route=\"rpc\"")) == 1.0
    })
    .await?;
    assert_eq!(
        sum(
            &text,
            "walletops_priority_fee_paid_sum",
            Some("unit=\"micro_lamports_per_cu\"")
        ),
        5_000.0
    );
    Ok(())
}

async fn a_send_capped_under_the_going_price_waits_until_it_falls(
    b: Backend,
) -> anyhow::Result<()> {
    let (_node, svc, rpc) = busy_cluster(b, 1_000).await?;
    let api = svc.rest(&svc.api_key);
    sol::set_congestion(&rpc, 5_000, 0).await?;
    let to = Pubkey::new_unique();
    let id = pay(&api, &to, SOL / 100).await?;
    // Skipped by the busy leader until its blockhash expires; signed again, still capped.
    sol::expire_blockhash(&rpc).await?;
    let waiting = api.wait_for_note(&id, "re-signed").await?;
    assert_eq!(waiting["status"], "SUBMITTED", "{waiting}");
    assert!(
        waiting["statusHistory"]
            .to_string()
            .contains("capped at 1000"),
        "its history says why it waits: {waiting}"
    );
    assert_eq!(rpc.get_balance(&to).await?, 0);
    // The cluster quiets down: the resent transfer lands, once.
    sol::set_congestion(&rpc, 0, 0).await?;
    api.wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(rpc.get_balance(&to).await?, SOL / 100);
    Ok(())
}

async fn with_a_third_of_sends_lost_every_transfer_lands_once(b: Backend) -> anyhow::Result<()> {
    let (_node, svc, rpc) = busy_cluster(b, 1_000_000).await?;
    let api = svc.rest(&svc.api_key);
    sol::set_congestion(&rpc, 0, 30).await?;
    let recipients: Vec<Pubkey> = (0..10).map(|_| Pubkey::new_unique()).collect();
    let mut ids = Vec::new();
    for (k, to) in recipients.iter().enumerate() {
        ids.push(pay(&api, to, SOL / 100 + k as u64).await?);
    }
    for id in &ids {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    for (k, to) in recipients.iter().enumerate() {
        assert_eq!(
            rpc.get_balance(to).await?,
            SOL / 100 + k as u64,
            "recipient {k} paid once"
        );
    }
    Ok(())
}

async fn an_unseen_transfer_is_sent_again_to_every_route(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let (second, engine) = (
        walletops_tests::gateway::Gateway::start(&node.url()).await?,
        walletops_tests::gateway::Gateway::start(&node.url()).await?,
    );
    // Two RPC URLs of the node and a send route (a block engine, say).
    let chain = format!(
        "resend_interval_ms = 200\nsend_urls = [\"{}\"]",
        engine.url()
    );
    let mut options = node.service_options(&chain, "");
    options
        .env
        .push(("WALLETOPS_METRICS_ADDR".into(), "127.0.0.1:0".into()));
    let toml = options.config_toml.take().unwrap_or_default().replace(
        &format!("rpc_url = \"{}\"", node.url()),
        &format!("rpc_urls = [\"{}\", \"{}\"]", node.url(), second.url()),
    );
    options.config_toml = Some(toml);
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&api.default_wallet("solana").await?)?;
    node.airdrop(&wallet, SOL)?;
    let rpc = RpcClient::new(node.url());
    // The first five sends reaching the node are lost on the way to the leader.
    sol::drop_transactions(&rpc, 5).await?;
    let to = Pubkey::new_unique();
    let id = pay(&api, &to, SOL / 100).await?;
    api.wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(rpc.get_balance(&to).await?, SOL / 100, "paid once");
    // The first send is checked (preflight) by one node; every other send skips it, and
    // no node retries on its own.
    let mut checked = 0;
    for (route, gateway) in [("the second RPC URL", &second), ("the send route", &engine)] {
        let sends = gateway.solana_sends();
        let skipped = sends
            .iter()
            .filter(|p| p[1]["skipPreflight"] == true)
            .count();
        assert!(skipped >= 1, "{route} was sent nothing again: {sends:?}");
        checked += sends.len() - skipped;
        assert!(
            sends.iter().all(|p| p[1]["maxRetries"] == 0),
            "{route}: {sends:?}"
        );
    }
    assert!(checked <= 1, "only the first send is checked");
    assert!(
        engine
            .solana_sends()
            .iter()
            .all(|p| p[1]["skipPreflight"] == true),
        "the send route gets a transfer only after a node checked it"
    );
    // Its resends are counted as it ends: the lost sends were sent again.
    let resends = "walletops_resends_per_transaction";
    let text = metrics_once(&svc, |text| {
        sum(text, &format!("{resends}_count"), None) == 1.0
    })
    .await?;
    assert!(sum(&text, &format!("{resends}_sum"), None) >= 1.0, "{text}");
    Ok(())
}

on_both_backends!(
    an_unseen_transfer_is_sent_again_to_every_route,
    sends_pay_the_reported_price_and_ask_what_they_use,
    a_busy_leader_takes_sends_priced_at_what_blocks_take,
    a_send_capped_under_the_going_price_waits_until_it_falls,
    with_a_third_of_sends_lost_every_transfer_lands_once,
);
