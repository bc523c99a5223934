//! A failing provider: errors, refusals and silence leave nothing stored and the key free,
//! and a replacement the provider could not sign waits for it.

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use serde_json::json;
use walletops_tests::{Backend, on_both_backends, poll_until};

use super::{APP_ID, APP_SECRET, Linked};

async fn a_failing_provider_stores_nothing_and_leaves_the_key_free(
    b: Backend,
) -> anyhow::Result<()> {
    let linked = Linked::open(b, |_| {}).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = Linked::send(None).to_string();
    // Three 500s outlast the client's retries.
    linked.privy.fail_next(&[500, 500, 500]);
    let reply = linked.api().post_with_key("/send", &key, &body).await?;
    reply.assert_error(502, "PROVIDER_RPC_ERROR")?;
    assert!(!reply.text.contains(APP_SECRET), "{}", reply.text);
    linked.privy.fail_next(&[403]);
    assert_eq!(
        linked.grpc_refusal(None).await?.as_deref(),
        Some("PROVIDER_RPC_ERROR")
    );
    assert_eq!(linked.anvil.nonce(linked.wallet).await?, 0, "nothing sent");
    // The retries, and the second request for the same unsigned transaction, carried one
    // key: the provider would answer them with one signature.
    let keys = linked.privy.idempotency_keys();
    assert!(
        keys.len() == 4 && keys.iter().all(|k| *k == keys[0]),
        "one key: {keys:?}"
    );
    // The provider failing a sync: what the CLI logs and says never holds the credentials.
    linked.privy.fail_next(&[500, 500, 500]);
    let out = linked
        .svc
        .cli(&["wallets", "sync", "--user", "owner"])
        .await?;
    assert!(!out.success, "the sync failed");
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("upstream call failed"), "logged: {said}");
    let basic = BASE64.encode(format!("{APP_ID}:{APP_SECRET}"));
    assert!(
        !said.contains(APP_SECRET) && !said.contains(&basic),
        "{said}"
    );
    // A 429 then a success: the retry under the same key signs once.
    linked.privy.fail_next(&[429]);
    linked.confirmed_under(&key, &body).await?;
    assert_eq!(
        linked.anvil.nonce(linked.wallet).await?,
        1,
        "no nonce was lost to the failure"
    );
    Ok(())
}

async fn a_provider_that_never_answers_times_out_and_frees_the_key(
    b: Backend,
) -> anyhow::Result<()> {
    let linked = Linked::open(b, |_| {}).await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = Linked::send(None).to_string();
    // Every attempt goes unanswered: the client gives up after its timeouts and retries.
    linked.privy.stall_rpc(3);
    let reply = linked.api().post_with_key("/send", &key, &body).await?;
    reply.assert_error(502, "PROVIDER_RPC_ERROR")?;
    assert!(reply.text.contains("did not answer"), "{}", reply.text);
    assert_eq!(linked.privy.rpc_calls(), 3);
    assert_eq!(linked.anvil.nonce(linked.wallet).await?, 0, "nothing sent");
    linked.confirmed_under(&key, &body).await?;
    Ok(())
}

async fn a_stuck_provider_transaction_is_replaced_once_the_provider_is_back(
    b: Backend,
) -> anyhow::Result<()> {
    let linked = Linked::unlinked(
        b,
        "[monitor]\npoll_interval_ms = 100\nstuck_after_secs = 1\n",
        &["--no-mining"],
        |_| {},
    )
    .await?;
    linked.link().await?;
    let reply = linked.api().post("/send", &Linked::send(None)).await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default().to_owned();
    let first = reply.body["hash"].as_str().unwrap_or_default().to_owned();
    // The provider is down when the monitor comes to replace it: the record waits, saying so.
    linked.privy.fail_next(&[500; 12]);
    let waiting = linked
        .api()
        .wait_for_note(&id, "waiting for the wallet provider")
        .await?;
    assert_eq!(waiting["status"], "SUBMITTED", "{waiting}");
    assert!(!waiting.to_string().contains(APP_SECRET));
    // Back again: the replacement is signed through it, and mined.
    let replaced = poll_until("a replacement signed by the provider", || async {
        let tx = linked.api().transaction(&id).await?;
        Ok((tx["hash"].as_str().is_some_and(|h| h != first)).then_some(tx))
    })
    .await?;
    assert!(
        replaced["statusHistory"].to_string().contains("replaced"),
        "{replaced}"
    );
    // The record names its replacement before sending it (stored before broadcast): mined
    // sooner, the node would still hold only the first.
    let second = replaced["hash"].clone();
    poll_until("the replacement in the node's pool", || async {
        let tx = linked
            .anvil
            .rpc("eth_getTransactionByHash", json!([second]))
            .await?;
        Ok((!tx.is_null()).then_some(()))
    })
    .await?;
    linked.anvil.rpc("evm_setAutomine", json!([true])).await?;
    linked.anvil.rpc("evm_mine", json!([])).await?;
    let done = linked.api().wait_for_status(&id, "CONFIRMED").await?;
    assert_ne!(done["hash"], first.as_str(), "{done}");
    assert_eq!(linked.anvil.nonce(linked.wallet).await?, 1);
    Ok(())
}

on_both_backends!(
    a_failing_provider_stores_nothing_and_leaves_the_key_free,
    a_provider_that_never_answers_times_out_and_frees_the_key,
    a_stuck_provider_transaction_is_replaced_once_the_provider_is_back,
);
