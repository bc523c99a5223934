//! Webhooks belong to the key that registered them: revoking it disables them at once (no
//! more deliveries; pending ones kept), an API key cannot enable them again, and the owner
//! can, from the dashboard's Webhooks page.

use walletops_proto::v1::{self as pb, api_key_service_client::ApiKeyServiceClient};
use walletops_tests::{
    Backend, Service, on_both_backends, poll_until,
    webhooks::{Answer, Receiver},
    with_key,
};

use super::{all_settled, funded, send};
use crate::dashboard::{Dashboard, redeem};

/// The endpoint `id` as `GET /webhooks` lists it to `api`.
async fn listed(api: &walletops_tests::Rest, id: &str) -> anyhow::Result<serde_json::Value> {
    let reply = api.get("/webhooks").await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    reply.body["webhooks"]
        .as_array()
        .and_then(|all| all.iter().find(|w| w["id"] == id).cloned())
        .ok_or_else(|| anyhow::anyhow!("webhook {id} not listed: {}", reply.text))
}

/// The owner's dashboard session cookie.
async fn session(svc: &Service) -> anyhow::Result<(String, String)> {
    let mut dashboard = Dashboard::new(svc.channel().await?);
    let (token, csrf) = redeem(svc, &mut dashboard).await?;
    Ok((format!("walletops_session={token}"), csrf))
}

/// A key made with the owner's key registers an endpoint; the owner's key revokes it. The
/// endpoint is disabled in the revocation: nothing more reaches it (a second payment's
/// events reach the owner's own endpoint only), its pending deliveries stay listed, an API
/// key's attempt to enable it is refused, and the owner enables it on the Webhooks page,
/// after which the pending deliveries arrive.
async fn revoking_a_key_disables_its_webhooks(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc) = funded(b, &[]).await?;
    let api = svc.rest(&svc.api_key);
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let child = keys
        .create_api_key(with_key(
            pb::CreateApiKeyRequest {
                name: "integration".to_owned(),
                ..Default::default()
            },
            &svc.api_key,
        )?)
        .await?
        .into_inner();
    let prefix = child.api_key.map(|k| k.prefix).unwrap_or_default();
    let hook = Receiver::start().await?;
    let hook_id = hook.register(&api.with_key(&child.secret), &[]).await?;
    let control = Receiver::start().await?;
    let control_id = control.register(&api, &[]).await?;
    // A key of another line may neither take over the owner's endpoint's secret nor delete
    // it; the owner's own line may.
    let other = api.with_key(&svc.create_key("another line").await?);
    other
        .post(
            &format!("/webhooks/{control_id}/rotate-secret"),
            &serde_json::json!({}),
        )
        .await?
        .assert_error(403, "FORBIDDEN")?;
    other
        .request(
            reqwest::Method::DELETE,
            &format!("/webhooks/{control_id}"),
            &[],
            None,
        )
        .await?
        .assert_error(403, "FORBIDDEN")?;
    assert_eq!(listed(&api, &control_id).await?["state"], "enabled");
    let before = listed(&api, &hook_id).await?;
    assert_eq!(before["createdBy"], "apiKey");
    assert_eq!(before["createdByKey"], prefix.as_str());
    assert_eq!(before["state"], "enabled");
    hook.answer(Answer::Status(500));
    let first = send(&api).await?;
    hook.wait_until("a refused attempt", |r| !r.is_empty())
        .await?;
    // Both of its events made their deliveries (the owner's endpoint has them): a disabled
    // endpoint gets none for events after it was disabled.
    let first_only = [first.clone()];
    control
        .wait_until("the first payment's events at the owner's endpoint", |r| {
            all_settled(r, &first_only)
        })
        .await?;
    keys.revoke_api_key(with_key(
        pb::RevokeApiKeyRequest { id: prefix.clone() },
        &svc.api_key,
    )?)
    .await?;
    let after = listed(&api, &hook_id).await?;
    assert_eq!(after["state"], "disabled", "{after}");
    assert_eq!(after["disabledReason"], "keyRevoked", "{after}");
    let at_revocation = hook.received().len();
    let second = send(&api).await?;
    let ids = [first.clone(), second.clone()];
    control
        .wait_until("both payments' events at the owner's endpoint", |r| {
            all_settled(r, &ids)
        })
        .await?;
    // Retries come every second at most: by now several would have arrived. One attempt
    // may have been under way as the key was revoked.
    let received = hook.received();
    assert!(
        received.len() <= at_revocation + 1,
        "deliveries went on after the revocation: {} then {}",
        at_revocation,
        received.len()
    );
    assert!(received.iter().all(|d| d.transaction() != second));
    let pending = api
        .get(&format!("/webhooks/{hook_id}/deliveries?state=pending"))
        .await?;
    let pending = pending.body["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !pending.is_empty() && pending.iter().all(|d| d["transactionId"] == first.as_str()),
        "the pending deliveries are kept, none made since: {pending:?}"
    );
    let refused = api
        .post(
            &format!("/webhooks/{hook_id}/enable"),
            &serde_json::json!({}),
        )
        .await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert_eq!(listed(&api, &hook_id).await?["state"], "disabled");
    // The owner, on the Webhooks page.
    let (cookie, csrf) = session(&svc).await?;
    let http = walletops_tests::http::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let page = http
        .get(format!("{}/dashboard/webhooks", svc.http))
        .header("cookie", &cookie)
        .send()
        .await?;
    assert_eq!(page.status(), 200);
    let html = page.text().await?;
    for shown in [
        format!("data-disabled=\"{hook_id}\""),
        "the API key that registered it was revoked".to_owned(),
        format!("API key {prefix}"),
        format!("/dashboard/webhooks/{hook_id}/enable"),
    ] {
        assert!(html.contains(&shown), "{shown} not on the page:\n{html}");
    }
    let no_csrf = http
        .post(format!("{}/dashboard/webhooks/{hook_id}/enable", svc.http))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=wrong")
        .send()
        .await?;
    assert_eq!(no_csrf.status(), 403, "enabled without the CSRF token");
    hook.answer(Answer::Status(200));
    let enabled = http
        .post(format!("{}/dashboard/webhooks/{hook_id}/enable", svc.http))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await?;
    assert_eq!(enabled.status(), 303);
    assert_eq!(listed(&api, &hook_id).await?["state"], "enabled");
    let taken = hook
        .wait_until("the kept deliveries, after enabling", |r| {
            all_settled(r, std::slice::from_ref(&first))
        })
        .await?;
    assert!(taken.iter().all(|d| d.transaction() != second));
    // The deliveries page lists them, delivered.
    let listed_page = http
        .get(format!("{}/dashboard/webhooks/{hook_id}", svc.http))
        .header("cookie", &cookie)
        .send()
        .await?
        .text()
        .await?;
    poll_until("the deliveries noted", || async {
        let reply = api
            .get(&format!("/webhooks/{hook_id}/deliveries?state=pending"))
            .await?;
        Ok((reply.body["deliveries"] == serde_json::json!([])).then_some(()))
    })
    .await?;
    assert!(
        listed_page.contains("transaction.submitted"),
        "{listed_page}"
    );
    Ok(())
}

/// An expired key acts no more, through its endpoints neither: once the key that
/// registered an endpoint has expired, no delivery reaches it, new or pending, while the
/// owner's own endpoint gets every event.
async fn an_expired_keys_webhooks_stop_delivering(b: Backend) -> anyhow::Result<()> {
    let (_anvil, svc) = funded(b, &[]).await?;
    let api = svc.rest(&svc.api_key);
    let key = svc.create_key("short-lived").await?;
    let hook = Receiver::start().await?;
    hook.register(&api.with_key(&key), &[]).await?;
    let control = Receiver::start().await?;
    control.register(&api, &[]).await?;
    let first = send(&api).await?;
    let first_only = [first.clone()];
    hook.wait_until("the first payment's events at the key's endpoint", |r| {
        all_settled(r, &first_only)
    })
    .await?;
    // Expired by the clock (moved past it by hand, as an operator's SQL would).
    svc.expire_key(&key[5..9]).await?;
    let at_expiry = hook.received().len();
    let second = send(&api).await?;
    let both = [first, second.clone()];
    control
        .wait_until("both payments' events at the owner's endpoint", |r| {
            all_settled(r, &both)
        })
        .await?;
    let received = hook.received();
    assert_eq!(
        received.len(),
        at_expiry,
        "deliveries went on after the key expired"
    );
    assert!(received.iter().all(|d| d.transaction() != second));
    Ok(())
}

on_both_backends!(
    revoking_a_key_disables_its_webhooks,
    an_expired_keys_webhooks_stop_delivering,
);
