//! The HSM failing mid-run: a token gone, or back under a changed PIN, leaves a write
//! unsigned, nothing stored and its Idempotency-Key free (503 naming the HSM); a replacement
//! the monitor could not sign waits for the token, saying so; a token put back signs again
//! without a restart, and a refused PIN is not tried over and over. A payout's items wait
//! for the token and are paid once it is back.

use alloy::primitives::U256;
use serde_json::json;
use walletops_tests::{
    Backend, Rest, Service, anvil::Anvil, on_both_backends, poll_until, softhsm, softhsm::SoftHsm,
};

use super::{RECIPIENT, funded_evm_wallet};

/// The PIN the operator changes the token's to.
const NEW_PIN: &str = "4321";

fn send(amount: &str) -> String {
    json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": amount}).to_string()
}

/// Posts `body` under `key` and expects a 503 naming the HSM with nothing stored: its text.
async fn refused(svc: &Service, api: &Rest, key: &str, body: &str) -> anyhow::Result<String> {
    let stored = svc.stored_transactions().await?;
    let reply = api.post_with_key("/send", key, body).await?;
    reply.assert_error(503, "SERVICE_UNAVAILABLE")?;
    assert!(reply.text.contains("HSM"), "names the HSM: {}", reply.text);
    assert_eq!(svc.stored_transactions().await?, stored, "nothing stored");
    Ok(reply.text)
}

/// Posts `body` under `key`, which must be free: the new record's id.
async fn submitted(api: &Rest, key: &str, body: &str) -> anyhow::Result<String> {
    let reply = api.post_with_key("/send", key, body).await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{}", reply.text);
    Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
}

async fn a_token_gone_or_a_pin_changed_leaves_nothing_half_done(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let anvil = Anvil::start().await?;
    let (name, value) = token.env();
    let mut options = anvil.service_options(
        &format!(
            "{}[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
            token.toml()
        ),
        &[(name.as_str(), value.as_str())],
    );
    let mut svc = Service::start_with(b, options.clone()).await?;
    let (wallet, _) = funded_evm_wallet(&svc, &token, &anvil, 10u128.pow(18)).await?;
    let api = svc.rest(&svc.api_key);
    // A first send the node holds unmined: the monitor will want to sign a replacement.
    anvil.set_automine(false).await?;
    let first = api
        .post_with_key("/send", &uuid::Uuid::new_v4().to_string(), &send("1000"))
        .await?;
    anyhow::ensure!(first.body["status"] == "SUBMITTED", "{}", first.text);
    let id = first.body["id"].as_str().unwrap_or_default().to_owned();
    let first_hash = first.body["hash"].as_str().unwrap_or_default().to_owned();

    // The token is gone: a write is refused unsigned, and the replacement waits, saying so.
    token.remove()?;
    let (key, body) = (uuid::Uuid::new_v4().to_string(), send("2000"));
    refused(&svc, &api, &key, &body).await?;
    let waiting = api.wait_for_note(&id, "waiting for the HSM").await?;
    assert_eq!(
        waiting["hash"],
        first_hash.as_str(),
        "not replaced: {waiting}"
    );
    assert_eq!(anvil.pool_hashes().await?, vec![first_hash.clone()]);

    // Back: the same key is free and signs, without a restart, and the replacement goes out.
    token.put_back()?;
    let second = submitted(&api, &key, &body).await?;
    poll_until("the replacement signed by the token", || async {
        let tx = api.transaction(&id).await?;
        Ok((tx["hash"] != first_hash.as_str()).then_some(()))
    })
    .await?;

    // Gone again, and back under a changed PIN: the service's PIN is refused, and tried
    // again at most once a minute (a real device would lock it).
    token.change_pin(softhsm::PIN, NEW_PIN)?;
    token.remove()?;
    let (key, body) = (uuid::Uuid::new_v4().to_string(), send("3000"));
    refused(&svc, &api, &key, &body).await?;
    token.put_back()?;
    poll_until("the PIN to be held back", || async {
        let text = refused(&svc, &api, &key, &body).await?;
        Ok(text.contains("at most once a minute").then_some(()))
    })
    .await?;

    // Restarted with the new PIN: the same key is still free.
    svc.terminate().await?;
    options
        .env
        .push(("WALLETOPS_HSM__PIN".to_owned(), NEW_PIN.to_owned()));
    svc.relaunch(options).await?;
    let api = svc.rest(&svc.api_key);
    let third = submitted(&api, &key, &body).await?;
    anvil.set_automine(true).await?;
    anvil.mine().await?;
    for id in [&id, &second, &third] {
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    assert_eq!(anvil.nonce(wallet).await?, 3, "no nonce lost or doubled");
    assert_eq!(
        anvil.balance(RECIPIENT.parse()?).await?,
        U256::from(6000u64)
    );
    Ok(())
}

/// The HSM gone while a payout is made: its items wait (the refusal is a passing one, as it
/// is for an approved write), and they are paid, each once, once the token is back.
async fn an_hsm_outage_during_a_payout_leaves_its_items_waiting(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let anvil = Anvil::start().await?;
    let (name, value) = token.env();
    let log = tempfile::NamedTempFile::new()?;
    let options = anvil
        .service_options(&token.toml(), &[(name.as_str(), value.as_str())])
        .logging_to(log.path());
    let svc = Service::start_with(b, options).await?;
    let (wallet, _) = funded_evm_wallet(&svc, &token, &anvil, 10u128.pow(18)).await?;
    let api = svc.rest(&svc.api_key);
    let recipients = [RECIPIENT, "0x2222222222222222222222222222222222222222"];
    let items: Vec<_> = recipients
        .iter()
        .map(|to| json!({"to": to, "asset": "native", "amount": "700"}))
        .collect();

    token.remove()?;
    let made = api
        .post(
            "/payouts",
            &json!({"chain": "anvil", "from": wallet.to_string(), "items": items}),
        )
        .await?;
    anyhow::ensure!(made.status == 202, "{}", made.text);
    let id = made.body["id"].as_str().unwrap_or_default().to_owned();
    poll_until("the runner to find the HSM gone", || async {
        let text = std::fs::read_to_string(log.path())?;
        Ok(text
            .lines()
            .any(|l| l.contains("a payout item waits") && l.contains("HSM"))
            .then_some(()))
    })
    .await?;
    let waiting = api.get(&format!("/payouts/{id}")).await?;
    assert_eq!(waiting.body["state"], "RUNNING", "{}", waiting.text);
    assert_eq!(waiting.body["totals"]["QUEUED"], 2, "{}", waiting.text);

    token.put_back()?;
    let done = poll_until("the payout to complete", || async {
        let p = api.get(&format!("/payouts/{id}")).await?;
        Ok((p.body["state"] == "COMPLETED").then_some(p.body))
    })
    .await?;
    assert_eq!(done["totals"]["CONFIRMED"], 2, "{}", done["totals"]);
    for to in recipients {
        assert_eq!(anvil.balance(to.parse()?).await?, U256::from(700u64));
    }
    assert_eq!(anvil.nonce(wallet).await?, 2, "each item paid once");
    Ok(())
}

on_both_backends!(
    a_token_gone_or_a_pin_changed_leaves_nothing_half_done,
    an_hsm_outage_during_a_payout_leaves_its_items_waiting,
);
