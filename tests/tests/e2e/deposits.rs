//! Deposits found on the chains, against a real anvil and the Solana test node: native coin
//! and tokens sent to the wallets from outside are recorded once, announced (webhooks, the
//! stream) as they become pending and confirmed, spam tokens and dust are recorded as ignored
//! and never announced, a reorganization reverts a deposit and its re-inclusion brings it
//! back, and a restart announces nothing twice.

use std::str::FromStr;

use alloy::primitives::{Address, Bytes, U256};
use anyhow::Context as _;
use serde_json::{Value, json};
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_signer::Signer as _;
use walletops_tests::{
    Backend, Options, Rest, Service,
    anvil::{Anvil, DEV_ACCOUNT},
    on_both_backends, poll_until,
    solana_node::{self as sol, SolanaNode},
    webhooks::{Received, Receiver},
};

/// The deposit events a receiver took, as (deposit id, type), each delivery once: a delivery
/// may come again under its `webhook-id` (at least once), as a receiver deduplicates it.
fn deposit_events(received: &[Received]) -> Vec<(String, String)> {
    let mut seen = std::collections::HashSet::new();
    received
        .iter()
        .filter(|r| r.taken() && r.event_type().starts_with("deposit."))
        .filter(|r| seen.insert(r.id.clone()))
        .map(|r| (r.transaction().to_owned(), r.event_type()))
        .collect()
}

/// Fails unless every event of `events` is told once.
fn assert_told_once(events: &[(String, String)]) {
    let mut unique = events.to_vec();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        events.len(),
        "an event told twice: {events:?}"
    );
}

/// The caller's deposits (every page).
async fn deposits(api: &Rest, query: &str) -> anyhow::Result<Vec<Value>> {
    let reply = api.get(&format!("/deposits?{query}")).await?;
    anyhow::ensure!(reply.status == 200, "GET /deposits: {}", reply.text);
    Ok(reply.body["deposits"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// Waits until the deposit of `hash` to the caller's wallets in `asset` is in `state`.
async fn wait_for_deposit(
    api: &Rest,
    hash: &str,
    asset: &str,
    state: &str,
) -> anyhow::Result<Value> {
    poll_until(
        &format!("the {asset} deposit of {hash} to be {state}"),
        || async {
            Ok(deposits(api, "limit=500").await?.into_iter().find(|d| {
                d["hash"]
                    .as_str()
                    .is_some_and(|h| h.eq_ignore_ascii_case(hash))
                    && d["asset"] == asset
                    && d["state"] == state
            }))
        },
    )
    .await
}

fn evm_toml(good: Address) -> String {
    format!(
        "[chains.anvil.deposits]\npoll_interval_ms = 100\ntokens = [\"{good}\"]\nmin_amount = {{ native = \"1000\" }}\n"
    )
}

async fn evm_deposits_are_found_once_announced_and_confirmed(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let good = anvil.deploy_token("GOOD", 6).await?;
    let spam = anvil.deploy_token("SPAM", 18).await?;
    let options = anvil.service_options(
        &evm_toml(good),
        &[("WALLETOPS_CHAINS__ANVIL__CONFIRMATIONS", "2")],
    );
    let mut svc = Service::start_with(b, options.clone()).await?;
    let api = svc.rest(&svc.api_key);
    let receiver = Receiver::start().await?;
    receiver
        .register(
            &api,
            &["deposit.pending", "deposit.confirmed", "deposit.reverted"],
        )
        .await?;
    let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
    let native = anvil
        .send_as(
            DEV_ACCOUNT,
            Some(wallet),
            Bytes::new(),
            U256::from(5_000u64),
        )
        .await?;
    let dust = anvil
        .send_as(DEV_ACCOUNT, Some(wallet), Bytes::new(), U256::from(10u64))
        .await?;
    anvil.mint(good, wallet, U256::from(2_500_000u64)).await?;
    anvil
        .mint(spam, wallet, U256::from(10u64).pow(U256::from(21u64)))
        .await?;
    let hash = |r: &alloy::rpc::types::TransactionReceipt| format!("{:#x}", r.transaction_hash);
    // Each mint is a block of its own; one more block makes the last two deep.
    anvil.mine().await?;
    let first = wait_for_deposit(&api, &hash(&native), "native", "CONFIRMED").await?;
    assert_eq!(first["amount"], "5000");
    assert_eq!(first["chain"], "anvil");
    assert_eq!(first["symbol"], "ETH");
    assert_eq!(first["from"], DEV_ACCOUNT.to_checksum(None));
    let token = format!("{good:#x}");
    let minted = poll_until("the token deposit to be confirmed", || async {
        Ok(deposits(&api, "state=confirmed")
            .await?
            .into_iter()
            .find(|d| d["asset"] == token))
    })
    .await?;
    assert_eq!(minted["amount"], "2500000");
    assert_eq!(minted["from"], Address::ZERO.to_checksum(None));
    // Dust and the spam token are recorded, never announced.
    let ignored = poll_until("the dust and the spam token to be ignored", || async {
        let ignored = deposits(&api, "state=ignored").await?;
        Ok((ignored.len() == 2).then_some(ignored))
    })
    .await?;
    assert!(
        ignored
            .iter()
            .any(|d| d["hash"] == hash(&dust) && d["asset"] == "native")
    );
    assert!(ignored.iter().any(|d| d["asset"] == format!("{spam:#x}")));
    assert!(
        ignored.iter().all(|d| d["ignoredReason"].is_string()),
        "{ignored:?}"
    );
    // One page of two, then the rest, by cursor.
    let page = api.get("/deposits?limit=2").await?;
    assert_eq!(
        page.body["deposits"].as_array().map(Vec::len),
        Some(2),
        "{}",
        page.text
    );
    let cursor = page.body["nextCursor"].as_str().context("a next cursor")?;
    let rest = api
        .get(&format!("/deposits?limit=2&cursor={cursor}"))
        .await?;
    assert_eq!(
        rest.body["deposits"].as_array().map(Vec::len),
        Some(2),
        "{}",
        rest.text
    );
    assert!(rest.body["nextCursor"].is_null(), "{}", rest.text);
    assert_eq!(api.get("/deposits?limit=0").await?.status, 400);
    // One by one, and not another user's.
    let one = api
        .get(&format!(
            "/deposits/{}",
            first["id"].as_str().unwrap_or_default()
        ))
        .await?;
    assert_eq!(one.status, 200, "{}", one.text);
    assert_eq!(one.body["state"], "CONFIRMED");
    assert_eq!(
        api.get(&format!("/deposits/{}", uuid::Uuid::new_v4()))
            .await?
            .status,
        404
    );
    // Announced: pending then confirmed, once each, for the two announced deposits.
    let want = |id: &Value| {
        let id = id.as_str().unwrap_or_default().to_owned();
        [
            (id.clone(), "deposit.pending".to_owned()),
            (id, "deposit.confirmed".to_owned()),
        ]
    };
    let mut expected: Vec<_> = want(&first["id"])
        .into_iter()
        .chain(want(&minted["id"]))
        .collect();
    expected.sort();
    let received = receiver
        .wait_until("the deposits' four events", |r| {
            deposit_events(r).len() >= 4
        })
        .await?;
    let mut got = deposit_events(&received);
    got.sort();
    assert_eq!(got, expected);
    // Each delivery verifies with the Standard Webhooks reference library, the deposit in
    // the state its event tells.
    let secret = receiver.secret().context("registered")?;
    for d in received
        .iter()
        .filter(|r| r.event_type().starts_with("deposit."))
    {
        let event = d.verified_by_standardwebhooks(&secret).await?;
        let state = event["type"]
            .as_str()
            .unwrap_or_default()
            .trim_start_matches("deposit.");
        assert_eq!(
            event["data"]["state"],
            state.to_ascii_uppercase(),
            "{event}"
        );
    }
    // A crash and a restart announce nothing again and record nothing twice.
    svc.kill().await?;
    svc.relaunch(options).await?;
    let api = svc.rest(&svc.api_key);
    anvil.mine().await?;
    let later = anvil
        .send_as(
            DEV_ACCOUNT,
            Some(wallet),
            Bytes::new(),
            U256::from(7_000u64),
        )
        .await?;
    anvil.mine().await?;
    wait_for_deposit(&api, &hash(&later), "native", "CONFIRMED").await?;
    let received = receiver
        .wait_until("the new deposit's events", |r| deposit_events(r).len() >= 6)
        .await?;
    assert_told_once(&deposit_events(&received));
    assert_eq!(deposits(&api, "limit=500").await?.len(), 5);
    Ok(())
}

async fn a_reorganization_reverts_a_deposit_and_reinclusion_brings_it_back(
    b: Backend,
) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let options = anvil.service_options(
        "[chains.anvil.deposits]\npoll_interval_ms = 100\n",
        &[("WALLETOPS_CHAINS__ANVIL__CONFIRMATIONS", "4")],
    );
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let receiver = Receiver::start().await?;
    receiver.register(&api, &[]).await?;
    let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
    let sent = anvil
        .send_as(
            DEV_ACCOUNT,
            Some(wallet),
            Bytes::new(),
            U256::from(123_456u64),
        )
        .await?;
    let hash = format!("{:#x}", sent.transaction_hash);
    let raw = anvil
        .rpc("eth_getRawTransactionByHash", json!([hash]))
        .await?;
    let pending = wait_for_deposit(&api, &hash, "native", "PENDING").await?;
    // Its block replaced by an empty one: the deposit is reverted, and told so.
    anvil.reorg(1).await?;
    anvil.mine().await?;
    wait_for_deposit(&api, &hash, "native", "REVERTED").await?;
    let id = pending["id"].as_str().unwrap_or_default().to_owned();
    receiver.wait_for_event(&id, "deposit.reverted").await?;
    // The same transaction included again: the same deposit, pending again, then confirmed.
    anvil.rpc("eth_sendRawTransaction", json!([raw])).await?;
    let back = wait_for_deposit(&api, &hash, "native", "PENDING").await?;
    assert_eq!(back["id"], pending["id"]);
    for _ in 0..4 {
        anvil.mine().await?;
    }
    let confirmed = wait_for_deposit(&api, &hash, "native", "CONFIRMED").await?;
    assert_eq!(confirmed["id"], pending["id"]);
    receiver.wait_for_event(&id, "deposit.confirmed").await?;
    let told: Vec<String> = deposit_events(&receiver.taken())
        .into_iter()
        .filter(|(d, _)| *d == id)
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        told,
        [
            "deposit.pending",
            "deposit.reverted",
            "deposit.pending",
            "deposit.confirmed"
        ],
        "in the order they happened"
    );
    assert_eq!(deposits(&api, "").await?.len(), 1, "one deposit, not two");
    Ok(())
}

alloy::sol! {
    /// The relay's forwarding call (tests/contracts/Relay.sol).
    function forward(address to);
}

/// anvil serves `trace_block`, so the scan reads traces without being told to.
async fn value_forwarded_by_a_contract_is_a_deposit_where_traces_are_served(
    b: Backend,
) -> anyhow::Result<()> {
    use alloy::sol_types::SolCall as _;
    let anvil = Anvil::start().await?;
    let relay = anvil.deploy_relay().await?;
    let options = anvil.service_options("[chains.anvil.deposits]\npoll_interval_ms = 100\n", &[]);
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
    let call = forwardCall { to: wallet }.abi_encode();
    let sent = anvil
        .send_as(DEV_ACCOUNT, Some(relay), call.into(), U256::from(9_000u64))
        .await?;
    let hash = format!("{:#x}", sent.transaction_hash);
    let found = wait_for_deposit(&api, &hash, "native", "CONFIRMED").await?;
    assert_eq!(found["amount"], "9000");
    assert_eq!(
        found["from"],
        relay.to_checksum(None),
        "the contract that forwarded it"
    );
    Ok(())
}

async fn two_cores_announce_each_deposit_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let options = anvil.service_options("[chains.anvil.deposits]\npoll_interval_ms = 100\n", &[]);
    let mut svc = Service::start_with(b, options).await?;
    let other = svc.sibling().await?;
    let api = svc.rest(&svc.api_key);
    let receiver = Receiver::start().await?;
    receiver.register(&api, &[]).await?;
    let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
    let pay = |wei: u64| anvil.send_as(DEV_ACCOUNT, Some(wallet), Bytes::new(), U256::from(wei));
    for wei in [1_001u64, 1_002, 1_003] {
        let sent = pay(wei).await?;
        wait_for_deposit(
            &api,
            &format!("{:#x}", sent.transaction_hash),
            "native",
            "CONFIRMED",
        )
        .await?;
    }
    // The first core stops; the other scans on from where it was.
    svc.terminate().await?;
    let api = Rest::new(&other.http()?, &svc.api_key);
    for wei in [2_001u64, 2_002, 2_003] {
        let sent = pay(wei).await?;
        wait_for_deposit(
            &api,
            &format!("{:#x}", sent.transaction_hash),
            "native",
            "CONFIRMED",
        )
        .await?;
    }
    let received = receiver
        .wait_until("twelve deposit events", |r| deposit_events(r).len() >= 12)
        .await?;
    let events = deposit_events(&received);
    assert_eq!(events.len(), 12, "{events:?}");
    assert_told_once(&events);
    assert_eq!(deposits(&api, "").await?.len(), 6);
    Ok(())
}

async fn deposit_events_stream_over_grpc_and_sse(b: Backend) -> anyhow::Result<()> {
    use walletops_proto::v1::{WatchDepositsRequest, deposit_service_client::DepositServiceClient};
    let anvil = Anvil::start().await?;
    let options = anvil.service_options("[chains.anvil.deposits]\npoll_interval_ms = 100\n", &[]);
    let svc = Service::start_with(b, options).await?;
    let api = svc.rest(&svc.api_key);
    let wallet: Address = api.default_wallet("ethereum").await?.parse()?;
    let mut watching = DepositServiceClient::new(svc.channel().await?)
        .watch_deposits(walletops_tests::with_key(
            WatchDepositsRequest::default(),
            &svc.api_key,
        )?)
        .await?
        .into_inner();
    let sent = anvil
        .send_as(
            DEV_ACCOUNT,
            Some(wallet),
            Bytes::new(),
            U256::from(10u64).pow(U256::from(18u64)),
        )
        .await?;
    let hash = format!("{:#x}", sent.transaction_hash);
    wait_for_deposit(&api, &hash, "native", "CONFIRMED").await?;
    // A payment of the wallet's own: transaction events, which no deposit watcher sees.
    let paid = crate::webhooks::send(&api).await?;
    api.wait_for_status(&paid, "CONFIRMED").await?;
    let mut told = Vec::new();
    walletops_tests::within("the deposit's two events over gRPC", async {
        while told.len() < 2 {
            let event = watching.message().await?.expect("the stream goes on");
            let deposit = event.deposit.unwrap_or_default();
            told.push((event.event_id, event.r#type, deposit.state, deposit.hash));
        }
        anyhow::Ok(())
    })
    .await??;
    assert_eq!(told[0].1, "deposit.pending");
    assert_eq!(told[1].1, "deposit.confirmed");
    assert!(told[0].0 < told[1].0, "in commit order: {told:?}");
    assert_eq!(
        told[0].2,
        i32::from(walletops_proto::v1::DepositState::Pending)
    );
    assert_eq!(
        told[1].2,
        i32::from(walletops_proto::v1::DepositState::Confirmed)
    );
    assert!(told.iter().all(|t| t.3 == hash), "{told:?}");
    // Over SSE from the oldest: the same two, each in its own state, and nothing else.
    let url = format!("{}/api/v1/deposits/events", svc.http);
    let events = |last: String| {
        walletops_tests::http::client()
            .get(&url)
            .header("x-api-key", &svc.api_key)
            .header("last-event-id", last)
            .send()
    };
    let all =
        crate::events::read_events(events("0".to_owned()).await?, "deposit.confirmed").await?;
    let kinds: Vec<&str> = all.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["deposit.pending", "deposit.confirmed"]);
    assert_eq!(all[0].2["state"], "PENDING");
    assert_eq!(all[1].2["state"], "CONFIRMED");
    assert_eq!(
        all[0].0,
        told[0].0.to_string(),
        "one numbering over both surfaces"
    );
    let rest =
        crate::events::read_events(events(all[0].0.clone()).await?, "deposit.confirmed").await?;
    assert_eq!(rest.len(), 1, "{rest:?}");
    Ok(())
}

const SOL: u64 = 1_000_000_000;

async fn solana_deposits_of_sol_and_tokens_are_found_once(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let svc = Service::start_with(
        b,
        Options {
            log_file: None,
            config_toml: Some(format!(
                "[chains.solana-devnet]\nrpc_url = \"{}\"\n[chains.solana-devnet.deposits]\npoll_interval_ms = 100\n[rate_limits]\nreads_per_minute = 100000\n",
                node.url()
            )),
            env: Vec::new(),
        },
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    let wallet = Pubkey::from_str(&api.default_wallet("solana").await?)?;
    let rpc = RpcClient::new(node.url());
    let payer = Keypair::new();
    node.airdrop(&payer.pubkey(), 10 * SOL)?;
    let airdrop = node.airdrop(&wallet, 2 * SOL)?.to_string();
    let sol_deposit = wait_for_deposit(&api, &airdrop, "native", "CONFIRMED").await?;
    assert_eq!(sol_deposit["amount"], (2 * SOL).to_string());
    assert_eq!(sol_deposit["symbol"], "SOL");
    // A token minted to the wallet (its account made in the same transaction), then more
    // into that account alone: the owner is not among the second one's accounts.
    let mint = sol::create_mint(&rpc, &payer, &spl_token_interface::ID, 6).await?;
    let first = sol::mint_to(&rpc, &payer, &mint, &wallet, 1_500_000)
        .await?
        .to_string();
    let minted = wait_for_deposit(&api, &first, &mint.to_string(), "CONFIRMED").await?;
    assert_eq!(minted["amount"], "1500000");
    let second = sol::mint_to_existing(&rpc, &payer, &mint, &wallet, 700)
        .await?
        .to_string();
    let more = wait_for_deposit(&api, &second, &mint.to_string(), "CONFIRMED").await?;
    assert_eq!(more["amount"], "700");
    // Once a later credit is found, the earlier ones have been scanned over again: still
    // one deposit each.
    let last = node.airdrop(&wallet, SOL)?.to_string();
    wait_for_deposit(&api, &last, "native", "CONFIRMED").await?;
    let all = deposits(&api, "chain=solana-devnet").await?;
    assert_eq!(all.len(), 4, "{all:?}");
    Ok(())
}

on_both_backends!(
    evm_deposits_are_found_once_announced_and_confirmed,
    a_reorganization_reverts_a_deposit_and_reinclusion_brings_it_back,
    two_cores_announce_each_deposit_once,
    deposit_events_stream_over_grpc_and_sse,
    value_forwarded_by_a_contract_is_a_deposit_where_traces_are_served,
    solana_deposits_of_sol_and_tokens_are_found_once,
);
