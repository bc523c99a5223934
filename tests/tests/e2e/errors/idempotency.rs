//! The idempotency rows of chain writes that failed: scoped per user, and kept on every
//! chain write, not only /send.

use serde_json::{Value, json};
use walletops_tests::{Backend, Service, on_both_backends};

use super::{SOME_EVM, assert_node_failed, dead_base_node, send_body};

async fn idempotency_keys_are_scoped_per_user(b: Backend) -> anyhow::Result<()> {
    // The dead node refuses both sends before signing, so each request records its key as
    // failed: a key shared across users would answer bob with alice's outcome.
    let svc = Service::start_with(b, dead_base_node()).await?;
    let bob = svc.create_user("bob").await?;
    let key = uuid::Uuid::new_v4().to_string();
    let body = send_body("base").to_string();
    let send = async |api_key: &str| svc.rest(api_key).post_with_key("/send", &key, &body).await;
    assert_node_failed(send(&svc.api_key).await?)?;
    assert_node_failed(send(&bob).await?)?;
    send(&svc.api_key)
        .await?
        .assert_error(409, "IDEMPOTENT_REPLAY")?;
    send(&bob).await?.assert_error(409, "IDEMPOTENT_REPLAY")?;
    Ok(())
}

/// The idempotency table holds on every chain write, not only /send: a key whose write
/// failed answers IDEMPOTENT_REPLAY for the same body and IDEMPOTENT_BODY_MISMATCH for
/// another, on the path it was used on.
async fn every_write_keeps_the_idempotency_rows(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(b, dead_base_node()).await?;
    let api = svc.rest(&svc.api_key);
    for (path, body, other) in [
        (
            "/token/approve",
            json!({"chain": "base", "token": SOME_EVM, "spender": SOME_EVM, "amount": "1"}),
            json!({"chain": "base", "token": SOME_EVM, "spender": SOME_EVM, "amount": "2"}),
        ),
        (
            "/contracts/send",
            json!({"chain": "base", "to": SOME_EVM, "data": "0x1234"}),
            json!({"chain": "base", "to": SOME_EVM, "data": "0x5678"}),
        ),
    ] {
        let key = uuid::Uuid::new_v4().to_string();
        let call = async |body: &Value| api.post_with_key(path, &key, &body.to_string()).await;
        assert_node_failed(call(&body).await?)?;
        call(&body)
            .await?
            .assert_error(409, "IDEMPOTENT_REPLAY")
            .map_err(|e| e.context(path))?;
        call(&other)
            .await?
            .assert_error(409, "IDEMPOTENT_BODY_MISMATCH")
            .map_err(|e| e.context(path))?;
    }
    Ok(())
}

on_both_backends!(
    idempotency_keys_are_scoped_per_user,
    every_write_keeps_the_idempotency_rows,
);
