//! Linking, syncing and the provider codes: a linked user's wallets synced field by field,
//! the four codes over REST and gRPC, delegation at the provider taking effect without a
//! restart, removed wallets, the admin API and the periodic sync.

use alloy::primitives::utils::parse_ether;
use serde_json::json;
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{Backend, as_admin, on_both_backends, poll_until, reason, write_request};

use super::{DID, Linked, listed};

async fn a_linked_users_wallets_are_synced_and_signed_for_by_the_provider(
    b: Backend,
) -> anyhow::Result<()> {
    let mut solana = None;
    let linked = Linked::open(b, |privy| {
        solana = Some(privy.add_embedded_solana(DID, 0, false).0);
        privy.add_account(DID, json!({"type": "wallet", "address": "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045",
            "chain_type": "ethereum", "wallet_client": "unknown", "wallet_client_type": "metamask",
            "connector_type": "injected", "verified_at": 1731974000}));
        privy.add_account(DID, json!({"type": "smart_wallet", "address": "0x2222222222222222222222222222222222222222",
            "smart_wallet_type": "kernel"}));
        privy.add_account(DID, json!({"type": "wallet", "address": "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
            "chain_type": "bitcoin-segwit", "wallet_client_type": "privy", "connector_type": "embedded",
            "delegated": true, "wallet_index": 0}));
        privy.add_account(DID, json!({"type": "email", "address": "user@example.com"}));
    })
    .await?;
    let solana = solana.expect("a Solana wallet").to_string();
    let wallets = linked.wallets().await?;
    // Two local wallets, and the provider's EVM, Solana and external wallets.
    assert_eq!(wallets.len(), 5, "{wallets:#?}");
    let evm = listed(&wallets, &linked.wallet.to_string()).expect("the provider's EVM wallet");
    assert_eq!(
        (
            evm["chainType"].clone(),
            evm["isDefault"].clone(),
            evm["automationEnabled"].clone()
        ),
        (json!("ethereum"), json!(true), json!(true))
    );
    assert_eq!(
        (evm["providerType"].clone(), evm["clientType"].clone()),
        (json!("embedded"), json!("privy"))
    );
    let sol = listed(&wallets, &solana).expect("the provider's Solana wallet");
    assert_eq!(
        (sol["isDefault"].clone(), sol["automationEnabled"].clone()),
        (json!(true), json!(false))
    );
    let external = listed(&wallets, "0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045").expect("listed");
    assert_eq!(
        (
            external["providerType"].clone(),
            external["clientType"].clone(),
            external["automationEnabled"].clone(),
            external["isDefault"].clone()
        ),
        (
            json!("injected"),
            json!("metamask"),
            json!(false),
            json!(false)
        )
    );
    let local_defaults = wallets
        .iter()
        .filter(|w| w["clientType"] == "walletops" && w["isDefault"] == true)
        .count();
    assert_eq!(
        local_defaults, 0,
        "the provider's first embedded wallets are the defaults now"
    );

    // A send from the default wallet is signed by the provider and mined from its address.
    let reply = linked.api().post("/send", &Linked::send(None)).await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(
        record["from"].as_str().map(str::to_ascii_lowercase),
        Some(linked.wallet.to_string().to_ascii_lowercase())
    );
    assert_eq!(linked.anvil.nonce(linked.wallet).await?, 1);
    assert_eq!(linked.privy.rpc_calls(), 1);
    // The user's local wallets keep working beside its provider wallets: the keystore signs.
    let local = wallets
        .iter()
        .find(|w| w["clientType"] == "walletops" && w["chainType"] == "ethereum")
        .and_then(|w| w["address"].as_str())
        .expect("a local EVM wallet")
        .to_owned();
    linked
        .anvil
        .set_balance(local.parse()?, parse_ether("1")?)
        .await?;
    let reply = linked
        .api()
        .post("/send", &Linked::send(Some(&local)))
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    linked.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(
        linked.privy.rpc_calls(),
        1,
        "the provider signed nothing for it"
    );

    // Not delegated, and external: WALLET_NOT_DELEGATED, naming what to do.
    let from_solana = json!({"chain": "solana-devnet", "to": "11111111111111111111111111111112",
                                 "asset": "native", "amount": "1", "from": solana});
    let refused = linked.api().post("/send", &from_solana).await?;
    refused.assert_error(403, "WALLET_NOT_DELEGATED")?;
    assert!(
        refused.text.contains(&solana) && refused.text.contains("delegate it in the app"),
        "{}",
        refused.text
    );
    let refused = linked
        .api()
        .post(
            "/send",
            &Linked::send(Some("0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045")),
        )
        .await?;
    refused.assert_error(403, "WALLET_NOT_DELEGATED")?;
    assert!(refused.text.contains("external"), "{}", refused.text);
    // gRPC gives the same code.
    let mut core = WalletOpsServiceClient::new(linked.svc.channel().await?);
    let request = pb::SendRequest {
        chain: "solana-devnet".to_owned(),
        from: Some(solana.clone()),
        to: "11111111111111111111111111111112".to_owned(),
        asset: pb::Asset::Native.into(),
        amount: "1".to_owned(),
        ..Default::default()
    };
    let status = core
        .send(write_request(
            request,
            &linked.svc.api_key,
            &uuid::Uuid::new_v4().to_string(),
        )?)
        .await
        .expect_err("refused");
    assert_eq!(
        reason(&status).as_deref(),
        Some("WALLET_NOT_DELEGATED"),
        "{status:?}"
    );

    // Unlinked: USER_NOT_LINKED.
    linked.not_linked_after(&["users", "unlink", "owner"]).await
}

async fn delegation_at_the_provider_takes_effect_without_a_restart(
    b: Backend,
) -> anyhow::Result<()> {
    let mut second = None;
    let mut no_id = None;
    let linked = Linked::open(b, |privy| {
        second = Some(privy.add_embedded_evm(DID, 1, false, false).0);
        no_id = Some(privy.add_embedded_evm(DID, 2, true, false).0);
    })
    .await?;
    let second = second.expect("a second wallet").to_string();
    let no_id = no_id.expect("a wallet with no id").to_string();
    linked
        .anvil
        .set_balance(second.parse()?, parse_ether("1")?)
        .await?;
    linked
        .api()
        .post("/send", &Linked::send(Some(&second)))
        .await?
        .assert_error(403, "WALLET_NOT_DELEGATED")?;
    let refused = linked
        .api()
        .post("/send", &Linked::send(Some(&no_id)))
        .await?;
    refused.assert_error(400, "WALLET_ID_REQUIRED")?;
    assert!(refused.text.contains(&no_id), "{}", refused.text);
    assert_eq!(
        linked.grpc_refusal(Some(&no_id)).await?.as_deref(),
        Some("WALLET_ID_REQUIRED")
    );
    // The user delegates the wallet in the app: the next write succeeds, no sync asked for.
    linked.privy.set_delegated(&second, true);
    let reply = linked
        .api()
        .post("/send", &Linked::send(Some(&second)))
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    linked.api().wait_for_status(id, "CONFIRMED").await?;
    // The provider stops listing the wallet: after a sync it is still listed (its
    // transactions stay readable) but cannot be written from.
    linked.privy.remove_account(&second);
    let synced = linked
        .svc
        .cli(&["wallets", "sync", "--user", "owner"])
        .await?;
    anyhow::ensure!(synced.success, "{}", synced.stderr);
    assert!(synced.stdout.contains("1 removed"), "{}", synced.stdout);
    assert!(listed(&linked.wallets().await?, &second).is_some(), "kept");
    let refused = linked
        .api()
        .post("/send", &Linked::send(Some(&second)))
        .await?;
    refused.assert_error(403, "WALLET_NOT_DELEGATED")?;
    assert!(refused.text.contains("no longer among"), "{}", refused.text);
    linked.api().transaction(id).await?;
    // The provider forgets the user: USER_NOT_LINKED after the next sync.
    linked.privy.remove_user(DID);
    linked.not_linked_after(&["wallets", "sync"]).await
}

async fn the_admin_api_links_and_the_service_syncs_on_its_own(b: Backend) -> anyhow::Result<()> {
    let mut second = None;
    let linked = Linked::unlinked(b, "[provider]\nsync_interval_secs = 1\n", &[], |privy| {
        second = Some(privy.add_embedded_evm(DID, 1, false, true).0);
    })
    .await?;
    let second = second.expect("a second wallet").to_string();
    let mut admin = AdminServiceClient::new(linked.svc.admin_channel().await?);
    let status = admin
        .sync_wallets(as_admin(pb::SyncWalletsRequest {
            user: "owner".to_owned(),
        })?)
        .await
        .expect_err("not linked yet");
    assert_eq!(
        reason(&status).as_deref(),
        Some("USER_NOT_LINKED"),
        "{status:?}"
    );
    let reply = admin
        .link_user(as_admin(pb::LinkUserRequest {
            user: "owner".to_owned(),
            provider_user_id: DID.to_owned(),
        })?)
        .await?
        .into_inner();
    assert_eq!(
        reply.user.and_then(|u| u.provider_user_id).as_deref(),
        Some(DID)
    );
    assert_eq!(reply.sync.map(|r| r.added), Some(2));
    // Delegated in the app: the periodic sync sees it with no write asking.
    linked.privy.set_delegated(&second, true);
    poll_until("the periodic sync to see the delegation", || async {
        let wallets = linked.wallets().await?;
        let enabled = listed(&wallets, &second).map(|w| w["automationEnabled"].clone());
        Ok((enabled == Some(json!(true))).then_some(()))
    })
    .await?;
    let reply = admin
        .unlink_user(as_admin(pb::UnlinkUserRequest {
            user: "owner".to_owned(),
        })?)
        .await?
        .into_inner();
    assert_eq!(reply.user.and_then(|u| u.provider_user_id), None);
    linked
        .api()
        .post("/send", &Linked::send(Some(&second)))
        .await?
        .assert_error(403, "USER_NOT_LINKED")?;
    assert_eq!(
        linked.grpc_refusal(Some(&second)).await?.as_deref(),
        Some("USER_NOT_LINKED")
    );
    Ok(())
}

on_both_backends!(
    a_linked_users_wallets_are_synced_and_signed_for_by_the_provider,
    delegation_at_the_provider_takes_effect_without_a_restart,
    the_admin_api_links_and_the_service_syncs_on_its_own,
);
