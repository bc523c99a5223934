//! Wallets held by the wallet provider, against a fake Privy that holds real keys: a linked
//! user's wallets synced field by field, writes from a provider wallet signed by the
//! provider and mined on anvil, the contract's four provider codes, delegation switched on
//! at the provider taking effect without a restart, and provider failures leaving nothing
//! stored and the key free. On SQLite and PostgreSQL.

use alloy::primitives::{Address, utils::parse_ether};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::pkcs8::EncodePrivateKey as _;
use serde_json::{Value, json};
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    Backend, Service, anvil::Anvil, as_admin, fakes::privy::PrivyFake, on_both_backends,
    poll_until, reason, solana_node::SolanaNode, write_request,
};

const APP_ID: &str = "cm-walletops-app";
const APP_SECRET: &str = "privy-app-secret-do-not-log";
const DID: &str = "did:privy:cm3np4u9j001rc8b73seqmqqk";

/// A fake provider checking authorization signatures, anvil, and the service pointed at
/// both, its first user (`owner`, with local wallets) linked to `DID`.
struct Linked {
    anvil: Anvil,
    privy: PrivyFake,
    svc: Service,
    /// The user's first embedded EVM wallet: delegated, with an id, funded.
    wallet: Address,
}

impl Linked {
    /// `setup` adds what `DID` holds beyond its first EVM wallet, before the link.
    async fn open(b: Backend, setup: impl FnOnce(&PrivyFake)) -> anyhow::Result<Self> {
        let linked = Self::unlinked(b, "", &[], setup).await?;
        linked.link().await?;
        Ok(linked)
    }

    /// `open` with `extra_toml` and `anvil_args`, the user not linked yet.
    async fn unlinked(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        setup: impl FnOnce(&PrivyFake),
    ) -> anyhow::Result<Self> {
        let anvil = Anvil::start_with(anvil_args).await?;
        Self::on(b, anvil, extra_toml, setup).await
    }

    /// `unlinked` over a running `anvil`.
    async fn on(
        b: Backend,
        anvil: Anvil,
        extra_toml: &str,
        setup: impl FnOnce(&PrivyFake),
    ) -> anyhow::Result<Self> {
        let secret = p256::SecretKey::from_bytes(&[11u8; 32].into())?;
        let key = BASE64.encode(secret.to_pkcs8_der()?.as_bytes());
        let privy = PrivyFake::start(APP_ID, APP_SECRET, Some(secret.public_key().into())).await?;
        let (wallet, _) = privy.add_embedded_evm(DID, 0, true, true);
        setup(&privy);
        Self::serve(b, anvil, privy, key, wallet, extra_toml).await
    }

    /// The service over `anvil` and `privy` (whose authorization key is `key`), `wallet`
    /// funded.
    async fn serve(
        b: Backend,
        anvil: Anvil,
        privy: PrivyFake,
        key: String,
        wallet: Address,
        extra_toml: &str,
    ) -> anyhow::Result<Self> {
        // In the environment, which the CLI gets too.
        let url = privy.url();
        let env = [
            ("WALLETOPS_PROVIDER__BASE_URL", url.as_str()),
            ("WALLETOPS_PROVIDER__APP_ID", APP_ID),
            ("WALLETOPS_PROVIDER__APP_SECRET", APP_SECRET),
            ("WALLETOPS_PROVIDER__AUTHORIZATION_KEY", key.as_str()),
        ];
        let svc = Service::start_with(b, anvil.service_options(extra_toml, &env)).await?;
        anvil.set_balance(wallet, parse_ether("10")?).await?;
        Ok(Self {
            anvil,
            privy,
            svc,
            wallet,
        })
    }

    /// Links the first user to `DID` with the CLI.
    async fn link(&self) -> anyhow::Result<()> {
        let out = self
            .svc
            .cli(&["users", "link", "owner", "--provider-user", DID])
            .await?;
        anyhow::ensure!(out.success, "users link: {}", out.stderr);
        Ok(())
    }

    fn api(&self) -> walletops_tests::Rest {
        self.svc.rest(&self.svc.api_key)
    }

    /// A send of 1000 wei on anvil, from `from` (absent: the default wallet).
    fn send(from: Option<&str>) -> Value {
        let mut body = json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                              "asset": "native", "amount": "1000"});
        if let Some(from) = from {
            body["from"] = json!(from);
        }
        body
    }

    /// Runs the CLI command `args`, after which a send from the default wallet is
    /// USER_NOT_LINKED.
    async fn not_linked_after(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = self.svc.cli(args).await?;
        anyhow::ensure!(out.success, "{args:?}: {}", out.stderr);
        self.api()
            .post("/send", &Self::send(None))
            .await?
            .assert_error(403, "USER_NOT_LINKED")
    }

    /// Posts `body` to /send under `key`, which must be accepted, and waits until mined.
    async fn confirmed_under(&self, key: &str, body: &str) -> anyhow::Result<()> {
        let reply = self.api().post_with_key("/send", key, body).await?;
        anyhow::ensure!(
            reply.body["status"] == "SUBMITTED",
            "the same key succeeds: {reply:?}"
        );
        let id = reply.body["id"].as_str().unwrap_or_default();
        self.api().wait_for_status(id, "CONFIRMED").await?;
        Ok(())
    }

    /// The contract code of a gRPC send of 1000 wei on anvil from `from`, refused.
    async fn grpc_refusal(&self, from: Option<&str>) -> anyhow::Result<Option<String>> {
        let mut core = WalletOpsServiceClient::new(self.svc.channel().await?);
        let request = pb::SendRequest {
            chain: "anvil".to_owned(),
            from: from.map(str::to_owned),
            to: "0x1111111111111111111111111111111111111111".to_owned(),
            asset: pb::Asset::Native.into(),
            amount: "1000".to_owned(),
            ..Default::default()
        };
        let key = uuid::Uuid::new_v4().to_string();
        match core
            .send(write_request(request, &self.svc.api_key, &key)?)
            .await
        {
            Ok(reply) => anyhow::bail!("not refused: {reply:?}"),
            Err(status) => Ok(reason(&status)),
        }
    }

    async fn wallets(&self) -> anyhow::Result<Vec<Value>> {
        let reply = self.api().get("/wallets").await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        Ok(reply.body["wallets"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

/// The listed wallet at `address` (any letter case).
fn listed<'a>(wallets: &'a [Value], address: &str) -> Option<&'a Value> {
    wallets.iter().find(|w| {
        w["address"]
            .as_str()
            .is_some_and(|a| a.eq_ignore_ascii_case(address))
    })
}

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

async fn the_admin_api_links_and_the_service_syncs_on_its_own(b: Backend) -> anyhow::Result<()> {
    let mut second = None;
    let linked = Linked::unlinked(b, "[provider]\nsync_interval_secs = 1\n", &[], |privy| {
        second = Some(privy.add_embedded_evm(DID, 1, false, true).0);
    })
    .await?;
    let second = second.expect("a second wallet").to_string();
    let mut admin = AdminServiceClient::new(linked.svc.channel().await?);
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

async fn approvals_and_contract_calls_from_a_provider_wallet_are_mined(
    b: Backend,
) -> anyhow::Result<()> {
    let linked = Linked::open(b, |_| {}).await?;
    let token = linked.anvil.deploy_token("PRV", 18).await?;
    let counter = linked.anvil.deploy_counter().await?;
    let approve = linked
        .api()
        .post(
            "/token/approve",
            &json!({"chain": "anvil", "token": token.to_string(),
                    "spender": "0x2222222222222222222222222222222222222222", "amount": "777"}),
        )
        .await?;
    anyhow::ensure!(approve.body["status"] == "SUBMITTED", "{approve:?}");
    let call = linked
        .api()
        .post(
            "/contracts/send",
            &json!({"chain": "anvil", "to": counter.to_string(), "function": "add(uint256)", "args": ["7"]}),
        )
        .await?;
    anyhow::ensure!(call.body["status"] == "SUBMITTED", "{call:?}");
    for reply in [approve, call] {
        let id = reply.body["id"].as_str().unwrap_or_default();
        linked.api().wait_for_status(id, "CONFIRMED").await?;
    }
    assert_eq!(
        linked.anvil.nonce(linked.wallet).await?,
        2,
        "both from the provider wallet"
    );
    assert_eq!(linked.privy.rpc_calls(), 2);
    Ok(())
}

async fn a_swap_from_a_provider_wallet_is_signed_by_the_provider(b: Backend) -> anyhow::Result<()> {
    use walletops_devnet_aggregator::{DevAggregator, add_liquidity, deploy_pool};
    use walletops_tests::anvil::DEV_ACCOUNT;
    // The pool and its aggregator go up before the service, which is pointed at them.
    let anvil_first = Anvil::start().await?;
    let whole = alloy::primitives::U256::from(10u64).pow(alloy::primitives::U256::from(18));
    let token = anvil_first.deploy_token("PSW", 18).await?;
    anvil_first
        .mint(
            token,
            DEV_ACCOUNT,
            alloy::primitives::U256::from(20_000) * whole,
        )
        .await?;
    let pool = deploy_pool(anvil_first.url(), DEV_ACCOUNT, token).await?;
    add_liquidity(
        anvil_first.url(),
        DEV_ACCOUNT,
        pool,
        parse_ether("10")?,
        alloy::primitives::U256::from(20_000) * whole,
    )
    .await?;
    let aggregator = DevAggregator::connect(anvil_first.url(), pool).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let _server = tokio::spawn(aggregator.serve(listener));
    let linked = Linked::on(
        b,
        anvil_first,
        &format!("[trade.evm]\nbase_url = \"{url}\"\napi_key = \"any\"\n"),
        |_| {},
    )
    .await?;
    linked.link().await?;
    let reply = linked
        .api()
        .post(
            "/trade/swap",
            &json!({"chain": "anvil", "fromToken": "NATIVE", "toToken": token.to_string(),
                    "amount": parse_ether("1")?.to_string()}),
        )
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    let bought = linked.anvil.token_balance(token, linked.wallet).await?;
    assert_eq!(record["dstAmount"], bought.to_string(), "{record}");
    assert_eq!(linked.privy.rpc_calls(), 1, "signed by the provider");
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

async fn a_solana_swap_from_a_provider_wallet_lands(b: Backend) -> anyhow::Result<()> {
    use solana_keypair::Keypair;
    use solana_signer::Signer as _;
    use walletops_tests::{fakes::jupiter::JupiterFake, solana_node as sn};
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let rpc = solana_rpc_client::nonblocking::rpc_client::RpcClient::new(node.url());
    let authority = Keypair::new();
    node.airdrop(&authority.pubkey(), 10_000_000_000)?;
    let mint = sn::create_mint(&rpc, &authority, &spl_token_interface::ID, 6).await?;
    let pool = Keypair::new();
    node.airdrop(&pool.pubkey(), 100_000_000_000)?;
    sn::mint_to(&rpc, &authority, &mint, &pool.pubkey(), 1_000_000_000_000).await?;
    let jupiter = JupiterFake::start(&node.url(), pool, mint).await?;
    let mut sol = None;
    let linked = Linked::unlinked(
        b,
        &format!(
            "[chains.solana]\nrpc_url = \"{}\"\n[trade.solana]\nbase_url = \"{}\"\n",
            node.url(),
            jupiter.url()
        ),
        &[],
        |privy| sol = Some(privy.add_embedded_solana(DID, 0, true).0),
    )
    .await?;
    let sol = sol.expect("a Solana wallet");
    linked.link().await?;
    node.airdrop(&sol, 10_000_000_000)?;
    let reply = linked
        .api()
        .post(
            "/trade/swap",
            &json!({"chain": "solana", "fromToken": "NATIVE", "toToken": mint.to_string(),
                    "amount": "1000000000"}),
        )
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(record["from"], sol.to_string(), "{record}");
    let bought = sn::token_balance(&rpc, &sol, &mint).await?;
    assert_eq!(record["dstAmount"], bought.to_string(), "{record}");
    assert_eq!(linked.privy.rpc_calls(), 1, "signed by the provider");
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
    linked.anvil.rpc("evm_setAutomine", json!([true])).await?;
    linked.anvil.rpc("evm_mine", json!([])).await?;
    let done = linked.api().wait_for_status(&id, "CONFIRMED").await?;
    assert_ne!(done["hash"], first.as_str(), "{done}");
    assert_eq!(linked.anvil.nonce(linked.wallet).await?, 1);
    Ok(())
}

async fn a_solana_send_from_a_provider_wallet_lands(b: Backend) -> anyhow::Result<()> {
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let mut sol = None;
    let linked = Linked::unlinked(
        b,
        &format!("[chains.solana-devnet]\nrpc_url = \"{}\"\n", node.url()),
        &[],
        |privy| sol = Some(privy.add_embedded_solana(DID, 0, true).0),
    )
    .await?;
    let sol = sol.expect("a Solana wallet");
    linked.link().await?;
    node.airdrop(&sol, 1_000_000_000)?;
    let to = solana_pubkey::Pubkey::new_unique();
    let reply = linked
        .api()
        .post(
            "/send",
            &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": "1234567"}),
        )
        .await?;
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{reply:?}");
    let id = reply.body["id"].as_str().unwrap_or_default();
    let record = linked.api().wait_for_status(id, "CONFIRMED").await?;
    assert_eq!(record["from"], sol.to_string(), "{record}");
    let rpc = solana_rpc_client::nonblocking::rpc_client::RpcClient::new(node.url());
    assert_eq!(rpc.get_balance(&to).await?, 1_234_567);
    Ok(())
}

on_both_backends!(
    a_provider_that_never_answers_times_out_and_frees_the_key,
    a_solana_swap_from_a_provider_wallet_lands,
    a_swap_from_a_provider_wallet_is_signed_by_the_provider,
    approvals_and_contract_calls_from_a_provider_wallet_are_mined,
    the_admin_api_links_and_the_service_syncs_on_its_own,
    a_stuck_provider_transaction_is_replaced_once_the_provider_is_back,
    a_solana_send_from_a_provider_wallet_lands,
    a_linked_users_wallets_are_synced_and_signed_for_by_the_provider,
    delegation_at_the_provider_takes_effect_without_a_restart,
    a_failing_provider_stores_nothing_and_leaves_the_key_free,
);
