//! Per-key scopes: `read` (every GET), `trade` (quotes), `write` (everything that signs,
//! and key management), enforced over REST and gRPC alike, before anything else is read.

use serde_json::json;
use walletops_proto::v1::{
    self as pb, ApiKeyScope, api_key_service_client::ApiKeyServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    Backend, Options, Service, on_both_backends, reason, with_key, write_request,
};

/// A key of the first user with `scopes`, made with the first key.
async fn key_with(
    svc: &Service,
    scopes: &[ApiKeyScope],
) -> anyhow::Result<pb::CreateApiKeyResponse> {
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    Ok(keys
        .create_api_key(with_key(
            pb::CreateApiKeyRequest {
                name: "scoped".to_owned(),
                scopes: scopes.iter().map(|s| i32::from(*s)).collect(),
                ..Default::default()
            },
            &svc.api_key,
        )?)
        .await?
        .into_inner())
}

async fn a_read_only_key_reads_and_is_refused_the_rest(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let made = key_with(&svc, &[ApiKeyScope::Read]).await?;
    assert_eq!(
        made.api_key.expect("key").scopes,
        [ApiKeyScope::Read as i32]
    );
    let read = svc.rest(&made.secret);
    assert_eq!(read.get("/wallets").await?.status, 200);
    let wallet = read.default_wallet("ethereum").await?;
    // A send, well-formed or not, is refused for its scope before anything else.
    let send =
        json!({"chain": "base", "from": wallet, "to": wallet, "asset": "native", "amount": "1"});
    let refused = read.post("/send", &send).await?;
    refused.assert_error(403, "FORBIDDEN")?;
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("`write`"),
        "{}",
        refused.body
    );
    let quote = read.post("/trade/quote", &json!({})).await?;
    quote.assert_error(403, "FORBIDDEN")?;
    assert!(
        quote.body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("`trade`"),
        "{}",
        quote.body
    );
    // The same over gRPC.
    let mut ops = WalletOpsServiceClient::new(svc.channel().await?);
    let err = ops
        .send(write_request(
            pb::SendRequest::default(),
            &made.secret,
            &uuid::Uuid::new_v4().to_string(),
        )?)
        .await
        .expect_err("a read key sends");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    assert!(err.message().contains("`write`"), "{}", err.message());
    // Nor may it manage keys.
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let err = keys
        .revoke_api_key(with_key(
            pb::RevokeApiKeyRequest { id: "x".to_owned() },
            &made.secret,
        )?)
        .await
        .expect_err("a read key revokes");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    Ok(())
}

async fn a_trade_key_quotes_but_does_not_sign(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let made = key_with(&svc, &[ApiKeyScope::Read, ApiKeyScope::Trade]).await?;
    // Past the scope check: the empty quote is INVALID_INPUT, not FORBIDDEN.
    svc.rest(&made.secret)
        .post("/trade/quote", &json!({}))
        .await?
        .assert_error(400, "INVALID_INPUT")?;
    let mut ops = WalletOpsServiceClient::new(svc.channel().await?);
    let err = ops
        .swap(write_request(
            pb::SwapRequest::default(),
            &made.secret,
            &uuid::Uuid::new_v4().to_string(),
        )?)
        .await
        .expect_err("a trade key swaps");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    // It cannot make a key that may do more than itself.
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let err = keys
        .create_api_key(with_key(
            pb::CreateApiKeyRequest {
                name: "wider".to_owned(),
                ..Default::default()
            },
            &made.secret,
        )?)
        .await
        .expect_err("a narrower key makes a wider one");
    assert_eq!(reason(&err).as_deref(), Some("FORBIDDEN"));
    Ok(())
}

async fn keys_have_every_scope_unless_narrowed(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let all = [
        ApiKeyScope::Read as i32,
        ApiKeyScope::Trade as i32,
        ApiKeyScope::Write as i32,
    ];
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let listed = keys
        .list_api_keys(with_key(pb::ListApiKeysRequest {}, &svc.api_key)?)
        .await?
        .into_inner();
    assert_eq!(listed.api_keys[0].scopes, all, "the first start's key");
    assert_eq!(key_with(&svc, &[]).await?.api_key.expect("key").scopes, all);
    // The CLI narrows with --scopes and prints them.
    let out = svc
        .cli(&[
            "keys",
            "create",
            "--name",
            "reader",
            "--scopes",
            "read,trade",
        ])
        .await?;
    assert!(out.success, "{}", out.stderr);
    assert!(out.stdout.contains("read,trade "), "{}", out.stdout);
    let key = out.api_key().expect("key printed");
    svc.rest(&key)
        .post("/send", &json!({}))
        .await?
        .assert_error(403, "FORBIDDEN")?;
    let bad = svc
        .cli(&["keys", "create", "--name", "x", "--scopes", "read,admin"])
        .await?;
    assert!(
        !bad.success && bad.stderr.contains("admin"),
        "{}",
        bad.stderr
    );
    Ok(())
}

async fn the_first_start_key_takes_its_scopes_from_the_config(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start_with(
        b,
        Options::default().with_env("WALLETOPS_FIRST_KEY_SCOPES", "read"),
    )
    .await?;
    let api = svc.rest(&svc.api_key);
    assert_eq!(api.get("/wallets").await?.status, 200);
    api.post("/trade/quote", &json!({}))
        .await?
        .assert_error(403, "FORBIDDEN")?;
    Ok(())
}

on_both_backends!(
    a_read_only_key_reads_and_is_refused_the_rest,
    a_trade_key_quotes_but_does_not_sign,
    keys_have_every_scope_unless_narrowed,
    the_first_start_key_takes_its_scopes_from_the_config,
);
