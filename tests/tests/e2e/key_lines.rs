//! Keys only narrow: a key made with a limited key over gRPC is born with its maker's
//! limits, thresholds and policy, shares each daily budget with its whole line (what a child
//! spends counts against its maker's budget and the maker's against the child's), and
//! `ListApiKeys` names its maker.

use serde_json::json;
use walletops_proto::v1::{self as pb, api_key_service_client::ApiKeyServiceClient};
use walletops_tests::{Backend, anvil::KeyedWallet, on_both_backends, with_key};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";
const STRANGER: &str = "0x5555555555555555555555555555555555555555";

/// A request, made with key `by`, for a new key.
fn spawn(by: &str) -> anyhow::Result<tonic::Request<pb::CreateApiKeyRequest>> {
    with_key(
        pb::CreateApiKeyRequest {
            name: "spawn".to_owned(),
            ..Default::default()
        },
        by,
    )
}

fn pay(to: &str, amount: &str) -> serde_json::Value {
    json!({"chain": "anvil", "to": to, "asset": "native", "amount": amount})
}

async fn a_key_made_with_a_limited_key_is_held_as_its_maker(b: Backend) -> anyhow::Result<()> {
    let KeyedWallet {
        anvil,
        svc,
        wallet,
        key,
        prefix,
    } = KeyedWallet::start(b).await?;
    let limits = [
        "--chain",
        "anvil",
        "--max-per-tx",
        "3000",
        "--daily",
        "5000",
    ];
    svc.limit_key(&prefix, &limits).await?;
    svc.allow_key(&prefix, &["--chain", "anvil", "--recipient", RECIPIENT])
        .await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let child = keys.create_api_key(spawn(&key)?).await?.into_inner();
    let grandchild = keys
        .create_api_key(spawn(&child.secret)?)
        .await?
        .into_inner();
    // Listed with its maker and what it was born with.
    let listed = keys
        .list_api_keys(with_key(pb::ListApiKeysRequest {}, &svc.api_key)?)
        .await?
        .into_inner()
        .api_keys;
    let maker_id = listed
        .iter()
        .find(|k| k.prefix == prefix)
        .map(|k| k.id.clone());
    let child_id = child.api_key.as_ref().map(|k| k.id.clone());
    let shown = listed
        .iter()
        .find(|k| Some(&k.id) == child_id.as_ref())
        .expect("the child is listed");
    assert_eq!(shown.created_by, maker_id, "its maker is named");
    assert_eq!(shown.spend_limits.len(), 1, "{shown:?}");
    assert_eq!(shown.spend_limits[0].daily_budget.as_deref(), Some("5000"));
    assert_eq!(shown.policy_rules.len(), 1, "{shown:?}");
    assert_eq!(
        shown.scopes,
        listed
            .iter()
            .find(|k| k.prefix == prefix)
            .expect("maker")
            .scopes
    );

    let (maker, child, grandchild) = (
        svc.rest(&key),
        svc.rest(&child.secret),
        svc.rest(&grandchild.secret),
    );
    // Held to the maker's per-write limit and policy.
    for (api, body, words) in [
        (&child, pay(RECIPIENT, "3001"), "at most 3000"),
        (&grandchild, pay(STRANGER, "1"), "allowed recipients"),
    ] {
        anvil
            .assert_forbidden(wallet, api, ("/send", &body), &[words])
            .await?;
    }
    // One budget for the line: the child's 3000 leave the maker 2000, the maker's 2000 leave
    // the grandchild nothing.
    let paid = child.post("/send", &pay(RECIPIENT, "3000")).await?;
    assert_eq!(paid.status, 200, "{}", paid.text);
    anvil
        .assert_forbidden(
            wallet,
            &maker,
            ("/send", &pay(RECIPIENT, "2001")),
            &["2000 left"],
        )
        .await?;
    let paid = maker.post("/send", &pay(RECIPIENT, "2000")).await?;
    assert_eq!(paid.status, 200, "{}", paid.text);
    anvil
        .assert_forbidden(
            wallet,
            &grandchild,
            ("/send", &pay(RECIPIENT, "1")),
            &["0 left"],
        )
        .await?;
    anvil
        .wait_for_nonce("both payments mined", wallet, 2)
        .await?;
    assert_eq!(anvil.nonce(wallet).await?, 2, "nothing else was signed");
    Ok(())
}

/// A limited key (an agent's) cannot spread itself over many keys, each with its share of
/// the rate budget: its line holds at most three active keys besides its first, however
/// deep they were made. A key of the line revoked leaves room for another; the owner's own
/// key, unlimited, is held only to the ten keys of a user.
async fn a_key_line_holds_at_most_three_keys_besides_its_first(b: Backend) -> anyhow::Result<()> {
    let svc = walletops_tests::Service::start(b).await?;
    let first = svc.create_key("first of its line").await?;
    let prefix = first.split('_').nth(1).unwrap_or_default().to_owned();
    svc.limit_key(&prefix, &["--chain", "ethereum", "--max-per-tx", "1"])
        .await?;
    let mut keys = ApiKeyServiceClient::new(svc.channel().await?);
    let child = keys.create_api_key(spawn(&first)?).await?.into_inner();
    let grandchild = keys
        .create_api_key(spawn(&child.secret)?)
        .await?
        .into_inner();
    keys.create_api_key(spawn(&first)?).await?;
    for by in [&first, &grandchild.secret] {
        let refused = keys
            .create_api_key(spawn(by)?)
            .await
            .expect_err("a fourth key in the line");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
        assert!(refused.message().contains("at most 3"), "{refused:?}");
    }
    let id = grandchild.api_key.map(|k| k.id).unwrap_or_default();
    keys.revoke_api_key(with_key(pb::RevokeApiKeyRequest { id }, &first)?)
        .await?;
    keys.create_api_key(spawn(&child.secret)?).await?;
    // Another line, the owner's, is not held to this one's.
    keys.create_api_key(spawn(&svc.api_key)?).await?;
    Ok(())
}

on_both_backends!(
    a_key_made_with_a_limited_key_is_held_as_its_maker,
    a_key_line_holds_at_most_three_keys_besides_its_first,
);
