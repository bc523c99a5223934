//! GET /wallets: every field of the Wallet resource, the three filters, and ownership.

use serde_json::Value;
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{Backend, Options, Rest, Service, as_admin, on_both_backends, with_key};

async fn addresses(api: &Rest, query: &str) -> anyhow::Result<Vec<String>> {
    let reply = api.get(&format!("/wallets{query}")).await?;
    anyhow::ensure!(reply.status == 200, "{query}: {}", reply.text);
    Ok(reply.body["wallets"]
        .as_array()
        .expect("wallets array")
        .iter()
        .map(|w| w["address"].as_str().unwrap_or_default().to_owned())
        .collect())
}

async fn wallets_have_every_field_of_the_resource(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let reply = svc.rest(&svc.api_key).get("/wallets").await?;
    assert_eq!(reply.status, 200);
    let wallets = reply.body["wallets"].as_array().expect("wallets");
    assert_eq!(wallets.len(), 2);
    let mut families = Vec::new();
    for w in wallets {
        let obj = w.as_object().expect("object");
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "address",
                "automationEnabled",
                "chainType",
                "clientType",
                "isDefault",
                "providerType"
            ]
        );
        assert!(obj["address"].is_string());
        assert_eq!(obj["isDefault"], Value::Bool(true));
        assert_eq!(obj["automationEnabled"], Value::Bool(true));
        assert_eq!(obj["providerType"], "embedded");
        assert_eq!(obj["clientType"], "walletops");
        families.push(obj["chainType"].as_str().expect("chainType").to_owned());
    }
    families.sort();
    assert_eq!(families, ["ethereum", "solana"]);
    let evm = wallets
        .iter()
        .find(|w| w["chainType"] == "ethereum")
        .expect("evm");
    let addr = evm["address"].as_str().expect("address");
    assert!(addr.starts_with("0x") && addr.len() == 42, "{addr}");
    // The /v1 alias serves the same contract.
    let alias = walletops_tests::http::client()
        .get(format!("{}/v1/wallets", svc.http))
        .header("x-api-key", &svc.api_key)
        .send()
        .await?;
    assert_eq!(alias.status(), 200);
    assert_eq!(alias.json::<Value>().await?, reply.body);
    Ok(())
}

async fn filters_select_by_family_default_and_automation(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let api = svc.rest(&svc.api_key);
    let first_evm = addresses(&api, "?chain=ethereum").await?;
    assert_eq!(first_evm.len(), 1);
    let extra = svc.cli_evm_wallet(false).await?;
    let all = addresses(&api, "").await?;
    assert_eq!(all.len(), 3);
    assert_eq!(addresses(&api, "?chain=ethereum").await?.len(), 2);
    let solana = addresses(&api, "?chain=solana").await?;
    assert_eq!(solana.len(), 1);
    assert!(!solana.contains(&extra));
    assert_eq!(
        addresses(&api, "?chain=ethereum&defaultOnly=true").await?,
        first_evm
    );
    assert_eq!(addresses(&api, "?defaultOnly=true").await?.len(), 2);
    assert_eq!(addresses(&api, "?defaultOnly=false").await?.len(), 3);
    let off = svc.cli(&["wallets", "delegate", &extra, "off"]).await?;
    assert!(off.success, "{}", off.stderr);
    let automated = addresses(&api, "?automationOnly=true").await?;
    assert_eq!(automated.len(), 2);
    assert!(!automated.contains(&extra));
    assert_eq!(
        addresses(&api, "?chain=ethereum&automationOnly=true").await?,
        first_evm
    );
    // Making the extra wallet the default leaves exactly one default per family.
    let newest = svc.cli_evm_wallet(true).await?;
    assert_eq!(
        addresses(&api, "?chain=ethereum&defaultOnly=true").await?,
        [newest]
    );
    // gRPC answers the same filters.
    let mut client = WalletOpsServiceClient::new(svc.channel().await?);
    let grpc = client
        .list_wallets(with_key(
            pb::ListWalletsRequest {
                chain: Some("ethereum".to_owned()),
                default_only: None,
                automation_only: Some(true),
            },
            &svc.api_key,
        )?)
        .await?
        .into_inner();
    let mut grpc_addrs: Vec<String> = grpc.wallets.into_iter().map(|w| w.address).collect();
    grpc_addrs.sort();
    let mut rest_addrs = addresses(&api, "?chain=ethereum&automationOnly=true").await?;
    rest_addrs.sort();
    assert_eq!(grpc_addrs, rest_addrs);
    Ok(())
}

async fn callers_see_only_their_own_wallets(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let bob = svc.create_user("bob").await?;
    let owner = addresses(&svc.rest(&svc.api_key), "").await?;
    let bobs = addresses(&svc.rest(&bob), "").await?;
    assert_eq!(owner.len(), 2);
    assert_eq!(bobs.len(), 2);
    assert!(owner.iter().all(|a| !bobs.contains(a)));
    let no_wallets = svc
        .cli(&["users", "create", "carol", "--no-wallets"])
        .await?;
    let carol = no_wallets.api_key().expect("key");
    assert!(addresses(&svc.rest(&carol), "").await?.is_empty());
    Ok(())
}

/// A user's first wallets, made at once, give it one default, not two (nor an internal
/// error for the one that lost).
async fn wallets_made_at_once_give_one_default(b: Backend) -> anyhow::Result<()> {
    // Each creation dwells between finding no default and storing its wallet.
    let svc = Service::start_with(
        b,
        Options::default().with_env("FAILPOINTS", "wallet-after-default-read=return"),
    )
    .await?;
    let out = svc
        .cli(&["users", "create", "carol", "--no-wallets"])
        .await?;
    anyhow::ensure!(out.success, "{}", out.stderr);
    let key = out.api_key().expect("carol's key");
    let admin = AdminServiceClient::new(svc.admin_channel().await?);
    let made = futures::future::join_all((0..6).map(|_| {
        let mut admin = admin.clone();
        async move {
            let req = as_admin(pb::CreateWalletRequest {
                user: "carol".to_owned(),
                chain_type: "ethereum".to_owned(),
                make_default: None,
                custody: String::new(),
            })?;
            Ok::<_, anyhow::Error>(admin.create_wallet(req).await?)
        }
    }))
    .await;
    for m in made {
        m?;
    }
    let api = svc.rest(&key);
    assert_eq!(addresses(&api, "?chain=ethereum").await?.len(), 6);
    assert_eq!(
        addresses(&api, "?chain=ethereum&defaultOnly=true")
            .await?
            .len(),
        1
    );
    Ok(())
}

on_both_backends!(
    wallets_made_at_once_give_one_default,
    wallets_have_every_field_of_the_resource,
    filters_select_by_family_default_and_automation,
    callers_see_only_their_own_wallets,
);
