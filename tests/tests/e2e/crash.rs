//! Exactly once across crashes: the service killed with SIGKILL between signing and
//! broadcasting (the retry reaching it restarted, or a second core over the same database),
//! killed at random moments of a run of keyed sends while the client retries each key (alone,
//! or beside a second core that gets every key at the same time), and the chain node stopped
//! in the middle of a send. Each must leave exactly one transaction per idempotency key.

use alloy::primitives::{Address, U256};
use serde_json::json;
use walletops_tests::{
    Backend, Options, Reply, Rest, Service,
    anvil::{Anvil, MIXED_MINING},
    on_both_backends, poll_until,
};

const TO: &str = "0x1111111111111111111111111111111111111111";

fn options(anvil: &Anvil, failpoints: Option<&str>) -> Options {
    // A record a killed request held is followed once its hold (the request timeout and
    // 10 s) runs out: well inside the tests' waits.
    let mut env = vec![("WALLETOPS_REQUEST_TIMEOUT_SECS", "10")];
    env.extend(failpoints.map(|f| ("FAILPOINTS", f)));
    anvil.service_options("[monitor]\npoll_interval_ms = 100\n", &env)
}

async fn funded_wallet(svc: &Service, anvil: &Anvil) -> anyhow::Result<Address> {
    anvil
        .fund_default_wallet(&svc.rest(&svc.api_key), U256::from(10u128.pow(20)))
        .await
}

/// The body of a native send of `amount` wei to `TO`.
fn send_body(amount: u64) -> String {
    json!({"chain": "anvil", "to": TO, "asset": "native", "amount": amount.to_string()}).to_string()
}

/// Starts a send with `key` in the background (the service may be killed under it).
fn spawn_send(
    svc: &Service,
    key: &str,
    amount: u64,
) -> tokio::task::JoinHandle<anyhow::Result<Reply>> {
    spawn_send_to(svc.rest(&svc.api_key), key, amount)
}

/// `spawn_send` through `api`.
fn spawn_send_to(
    api: Rest,
    key: &str,
    amount: u64,
) -> tokio::task::JoinHandle<anyhow::Result<Reply>> {
    let (key, body) = (key.to_owned(), send_body(amount));
    tokio::spawn(async move { api.post_with_key("/send", &key, &body).await })
}

/// Sends with `key` until the service answers 200, retrying across restarts; returns the id.
async fn send_until_accepted(svc: &Service, key: &str, amount: u64) -> anyhow::Result<String> {
    send_until_accepted_on(&svc.rest(&svc.api_key), key, amount).await
}

/// `send_until_accepted` through `api`.
async fn send_until_accepted_on(api: &Rest, key: &str, amount: u64) -> anyhow::Result<String> {
    let body = send_body(amount);
    poll_until(
        &format!("the send with key {key} to be accepted"),
        || async {
            let reply = api.post_with_key("/send", key, &body).await;
            match reply {
                Ok(r) if r.status == 200 => {
                    Ok(Some(r.body["id"].as_str().unwrap_or_default().to_owned()))
                }
                Ok(r) if r.status.is_server_error() => Ok(None),
                Ok(r) => anyhow::bail!("key {key}: {} {}", r.status, r.text),
                Err(_) => Ok(None),
            }
        },
    )
    .await
}

async fn killed_between_signing_and_broadcast(b: Backend) -> anyhow::Result<()> {
    killed_before_broadcast(b, false).await
}

async fn killed_between_signing_and_broadcast_another_core_sends_it(
    b: Backend,
) -> anyhow::Result<()> {
    killed_before_broadcast(b, true).await
}

/// The core is killed with a transaction signed and stored, not broadcast; the retry goes
/// to the same core restarted, or with `other_core` to a second core over the same
/// database, whose monitor takes the record up once the dead request's hold runs out.
async fn killed_before_broadcast(b: Backend, other_core: bool) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let mut svc =
        Service::start_with(b, options(&anvil, Some("evm-before-broadcast=pause"))).await?;
    let wallet = funded_wallet(&svc, &anvil).await?;
    let second = if other_core {
        Some(svc.sibling_with(&options(&anvil, None)).await?)
    } else {
        None
    };
    let key = uuid::Uuid::new_v4().to_string();
    let hung = spawn_send(&svc, &key, 777);
    svc.wait_for_stored_transactions(1).await?;
    assert_eq!(anvil.nonce(wallet).await?, 0);
    assert!(
        anvil.pool_hashes().await?.is_empty(),
        "nothing broadcast yet"
    );
    svc.kill().await?;
    assert!(
        hung.await?
            .map(|r| r.status.is_server_error())
            .unwrap_or(true),
        "the caller got no success from the killed service"
    );
    let api = match &second {
        Some(core) => Rest::new(&core.http()?, &svc.api_key),
        None => {
            svc.relaunch(options(&anvil, None)).await?;
            svc.rest(&svc.api_key)
        }
    };
    // The retry answers with the stored transaction; the monitor sends it.
    let id = send_until_accepted_on(&api, &key, 777).await?;
    anvil
        .wait_for_nonce("the stored transaction to be mined", wallet, 1)
        .await?;
    let again = send_until_accepted_on(&api, &key, 777).await?;
    assert_eq!(again, id);
    all_settled(&svc, 1).await?;
    assert_eq!(
        anvil.nonce(wallet).await?,
        1,
        "no duplicate reached the chain"
    );
    assert_eq!(svc.stored_transactions().await?, 1);
    assert_eq!(anvil.balance(TO.parse()?).await?, U256::from(777u64));
    Ok(())
}

/// Waits until the service has settled all `n` of its records CONFIRMED: a record is final
/// then, never signed again, so what the chain shows after is what stays.
async fn all_settled(svc: &Service, n: usize) -> anyhow::Result<()> {
    svc.wait_for_stored_statuses("send", &vec!["confirmed"; n])
        .await
}

async fn killed_at_random_moments_of_keyed_sends(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let mut svc = Service::start_with(b, options(&anvil, None)).await?;
    let wallet = funded_wallet(&svc, &anvil).await?;
    let keys: Vec<String> = (0..8).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let mut ids = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let amount = 1000 + i as u64;
        let inflight = spawn_send(&svc, key, amount);
        // Kill at a random moment of the request: before, during or after it.
        let jitter = (uuid::Uuid::new_v4().as_u128() % 40) as u64;
        tokio::time::sleep(std::time::Duration::from_millis(jitter)).await;
        svc.kill().await?;
        let _ = inflight.await;
        svc.relaunch(options(&anvil, None)).await?;
        ids.push(send_until_accepted(&svc, key, amount).await?);
    }
    one_payment_per_key(&svc, &anvil, wallet, &ids, 1000).await
}

async fn two_cores_one_killed_at_random_moments_of_keyed_sends(b: Backend) -> anyhow::Result<()> {
    // Two cores over one database, as behind a load balancer: each key is sent through
    // both at once, one of them is killed (at a random moment, or once the key's transaction
    // is stored), and the client retries the key through the other. The cores race for the key's claim and the wallet's nonces, and
    // the survivor's monitor takes over the dead one's records.
    let anvil = Anvil::start_with(MIXED_MINING).await?;
    let options = anvil.service_options(
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 5\nlease_secs = 5\n",
        &[("WALLETOPS_REQUEST_TIMEOUT_SECS", "10")],
    );
    let mut svc = Service::start_with(b, options.clone()).await?;
    let wallet = funded_wallet(&svc, &anvil).await?;
    let survivor = svc.sibling().await?;
    let other = Rest::new(&survivor.http()?, &svc.api_key);
    let keys: Vec<String> = (0..8).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let mut ids = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let amount = 2000 + i as u64;
        let doomed = spawn_send(&svc, key, amount);
        let twin = spawn_send_to(other.clone(), key, amount);
        if i % 2 == 0 {
            // At a random moment: before, during or after the requests (they take a few
            // milliseconds).
            let jitter = (uuid::Uuid::new_v4().as_u128() % 8) as u64;
            tokio::time::sleep(std::time::Duration::from_millis(jitter)).await;
        } else {
            // Once one of the cores has stored the key's transaction: the other may be
            // signing its twin, and the winner may not have broadcast yet.
            svc.wait_for_stored_transactions(i as i64 + 1).await?;
        }
        svc.kill().await?;
        let _ = doomed.await;
        let _ = twin.await;
        ids.push(send_until_accepted_on(&other, key, amount).await?);
        svc.relaunch(options.clone()).await?;
    }
    one_payment_per_key(&svc, &anvil, wallet, &ids, 2000).await
}

/// Asserts that the keyed sends answered with `ids` (the i-th of `base + i` wei to `TO`)
/// were each made once: mined and settled, one record and one transaction per key, no
/// nonce skipped, and exactly their amounts moved.
async fn one_payment_per_key(
    svc: &Service,
    anvil: &Anvil,
    wallet: Address,
    ids: &[String],
    base: u64,
) -> anyhow::Result<()> {
    let n = ids.len();
    anvil
        .wait_for_nonce("every keyed send to be mined", wallet, n as u64)
        .await?;
    all_settled(svc, n).await?;
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), n, "one transaction per key: {ids:?}");
    assert_eq!(
        anvil.nonce(wallet).await?,
        n as u64,
        "no duplicate reached the chain, and no nonce was skipped"
    );
    assert_eq!(svc.stored_transactions().await?, n as i64);
    let total: u64 = (0..n as u64).map(|i| base + i).sum();
    assert_eq!(anvil.balance(TO.parse()?).await?, U256::from(total));
    Ok(())
}

async fn node_stopped_mid_send_gives_no_duplicate(b: Backend) -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let state_file = state.path().join("anvil.json");
    let state_arg = state_file.display().to_string();
    let anvil = Anvil::start_with(&["--state", &state_arg]).await?;
    let port = anvil.port()?;
    // The request pauses two seconds between storing and broadcasting: the node stops then.
    let mut svc =
        Service::start_with(b, options(&anvil, Some("evm-before-broadcast=sleep(2000)"))).await?;
    let wallet = funded_wallet(&svc, &anvil).await?;
    anvil.mine().await?;
    let key = uuid::Uuid::new_v4().to_string();
    let inflight = spawn_send(&svc, &key, 4242);
    svc.wait_for_stored_transactions(1).await?;
    anvil.stop_gracefully().await?;
    // The broadcast meets a dead node: the outcome is unknown, the answer still SUBMITTED.
    let reply = inflight.await??;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
    svc.kill().await?;
    let anvil = Anvil::start_on(port, &["--state", &state_arg]).await?;
    svc.relaunch(options(&anvil, None)).await?;
    anvil
        .wait_for_nonce("the monitor to send the stored transaction", wallet, 1)
        .await?;
    assert_eq!(send_until_accepted(&svc, &key, 4242).await?, id);
    all_settled(&svc, 1).await?;
    assert_eq!(
        anvil.nonce(wallet).await?,
        1,
        "no duplicate reached the chain"
    );
    let tx = svc.rest(&svc.api_key).transaction(&id).await?;
    assert_eq!(
        tx["hash"], reply.body["hash"],
        "the same signed bytes were sent"
    );
    assert_eq!(anvil.balance(TO.parse()?).await?, U256::from(4242u64));
    Ok(())
}

async fn a_record_says_why_it_waits_while_its_node_is_down(b: Backend) -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let state_arg = state.path().join("anvil.json").display().to_string();
    let anvil = Anvil::start_with(&["--state", &state_arg, "--no-mining"]).await?;
    let port = anvil.port()?;
    let quick = "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n";
    let svc = Service::start_with(b, anvil.service_options(quick, &[])).await?;
    let wallet = funded_wallet(&svc, &anvil).await?;
    anvil.mine().await?;
    let reply = spawn_send(&svc, &uuid::Uuid::new_v4().to_string(), 4242).await??;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
    anvil.stop_gracefully().await?;
    let api = svc.rest(&svc.api_key);
    let tx = api.wait_for_note(&id, "no verdict").await?;
    assert_eq!(tx["status"], "SUBMITTED", "{tx}");
    // The node back (mining again), the record is sent and settles, once.
    let anvil = Anvil::start_on(port, &["--state", &state_arg]).await?;
    api.wait_for_status(&id, "CONFIRMED").await?;
    assert_eq!(anvil.nonce(wallet).await?, 1);
    assert_eq!(anvil.balance(TO.parse()?).await?, U256::from(4242u64));
    Ok(())
}

/// The monitor sends a stored transaction the request has not broadcast yet, and the node
/// mines it; the request's own broadcast then meets "nonce too low" for its own transaction.
/// That must not read as a wallet used elsewhere: re-signing with a new nonce would pay twice.
async fn a_request_slow_to_broadcast_pays_once(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    // The request stalls five seconds before its broadcast, while the monitor polls every
    // 100 ms: it leaves the record to its request meanwhile.
    let svc =
        Service::start_with(b, options(&anvil, Some("evm-before-broadcast=sleep(5000)"))).await?;
    let wallet = funded_wallet(&svc, &anvil).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let inflight = spawn_send(&svc, &key, 777);
    anvil
        .wait_for_nonce("the stored transaction to be sent and mined", wallet, 1)
        .await?;
    let reply = inflight.await??;
    assert_eq!(reply.status, 200, "{}", reply.text);
    // The request answered after its broadcast: a second signing would have been sent by now.
    assert_eq!(
        anvil.nonce(wallet).await?,
        1,
        "one transaction from the wallet"
    );
    assert_eq!(anvil.balance(TO.parse()?).await?, U256::from(777u64));
    let id = reply.body["id"].as_str().unwrap_or_default();
    let tx = svc.rest(&svc.api_key).transaction(id).await?;
    assert_eq!(tx["hash"], reply.body["hash"], "never re-signed");
    Ok(())
}

on_both_backends!(
    killed_between_signing_and_broadcast,
    killed_between_signing_and_broadcast_another_core_sends_it,
    a_record_says_why_it_waits_while_its_node_is_down,
    a_request_slow_to_broadcast_pays_once,
    killed_at_random_moments_of_keyed_sends,
    two_cores_one_killed_at_random_moments_of_keyed_sends,
    node_stopped_mid_send_gives_no_duplicate,
);
