//! Wallets held by the wallet provider, against a fake Privy that holds real keys: a linked
//! user's wallets synced field by field, writes from a provider wallet signed by the
//! provider and mined on anvil, the contract's four provider codes, delegation switched on
//! at the provider taking effect without a restart, and provider failures leaving nothing
//! stored and the key free. On SQLite and PostgreSQL.

mod failures;
mod linking;
mod writes;

use alloy::primitives::{Address, utils::parse_ether};
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::pkcs8::EncodePrivateKey as _;
use serde_json::{Value, json};
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{
    Backend, Service, anvil::Anvil, fakes::privy::PrivyFake, reason, write_request,
};

pub(super) const APP_ID: &str = "cm-walletops-app";
pub(super) const APP_SECRET: &str = "privy-app-secret-do-not-log";
pub(super) const DID: &str = "did:privy:cm3np4u9j001rc8b73seqmqqk";

/// A fake provider checking authorization signatures, anvil, and the service pointed at
/// both, its first user (`owner`, with local wallets) linked to `DID`.
pub(super) struct Linked {
    pub(super) anvil: Anvil,
    pub(super) privy: PrivyFake,
    pub(super) svc: Service,
    /// The user's first embedded EVM wallet: delegated, with an id, funded.
    pub(super) wallet: Address,
}

impl Linked {
    /// `setup` adds what `DID` holds beyond its first EVM wallet, before the link.
    pub(super) async fn open(b: Backend, setup: impl FnOnce(&PrivyFake)) -> anyhow::Result<Self> {
        let linked = Self::unlinked(b, "", &[], setup).await?;
        linked.link().await?;
        Ok(linked)
    }

    /// `open` with `extra_toml` and `anvil_args`, the user not linked yet.
    pub(super) async fn unlinked(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        setup: impl FnOnce(&PrivyFake),
    ) -> anyhow::Result<Self> {
        let anvil = Anvil::start_with(anvil_args).await?;
        Self::on(b, anvil, extra_toml, setup).await
    }

    /// `unlinked` over a running `anvil`.
    pub(super) async fn on(
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
    pub(super) async fn serve(
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
    pub(super) async fn link(&self) -> anyhow::Result<()> {
        let out = self
            .svc
            .cli(&["users", "link", "owner", "--provider-user", DID])
            .await?;
        anyhow::ensure!(out.success, "users link: {}", out.stderr);
        Ok(())
    }

    pub(super) fn api(&self) -> walletops_tests::Rest {
        self.svc.rest(&self.svc.api_key)
    }

    /// A send of 1000 wei on anvil, from `from` (absent: the default wallet).
    pub(super) fn send(from: Option<&str>) -> Value {
        let mut body = json!({"chain": "anvil", "to": "0x1111111111111111111111111111111111111111",
                              "asset": "native", "amount": "1000"});
        if let Some(from) = from {
            body["from"] = json!(from);
        }
        body
    }

    /// Runs the CLI command `args`, after which a send from the default wallet is
    /// USER_NOT_LINKED.
    pub(super) async fn not_linked_after(&self, args: &[&str]) -> anyhow::Result<()> {
        let out = self.svc.cli(args).await?;
        anyhow::ensure!(out.success, "{args:?}: {}", out.stderr);
        self.api()
            .post("/send", &Self::send(None))
            .await?
            .assert_error(403, "USER_NOT_LINKED")
    }

    /// Posts `body` to /send under `key`, which must be accepted, and waits until mined.
    pub(super) async fn confirmed_under(&self, key: &str, body: &str) -> anyhow::Result<()> {
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
    pub(super) async fn grpc_refusal(&self, from: Option<&str>) -> anyhow::Result<Option<String>> {
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

    pub(super) async fn wallets(&self) -> anyhow::Result<Vec<Value>> {
        let reply = self.api().get("/wallets").await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        Ok(reply.body["wallets"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }
}

/// The listed wallet at `address` (any letter case).
pub(super) fn listed<'a>(wallets: &'a [Value], address: &str) -> Option<&'a Value> {
    wallets.iter().find(|w| {
        w["address"]
            .as_str()
            .is_some_and(|a| a.eq_ignore_ascii_case(address))
    })
}
