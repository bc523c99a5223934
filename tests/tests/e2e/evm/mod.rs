//! EVM writes and balances against a real anvil node: balances equal the node's, transfers,
//! approvals and contract calls move exactly what they say, idempotency holds under
//! concurrency, nonces stay contiguous, and the monitor recovers lost and stuck transactions.
//!
//! This module holds the fixture the tests share; each file below tests one concern.

mod balances;
mod broadcasts;
mod fees;
mod frozen_head;
mod grpc;
mod idempotency;
mod monitor;
mod multi_core;
mod nonces;
mod replacements;
mod rising_base_fee;
mod writes;

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::{Value, json};
use walletops_tests::{
    Backend, Options, Reply, Rest, Service, anvil::Anvil, gateway::Gateway, poll_until,
};

const ETH: u128 = 1_000_000_000_000_000_000;
/// Where the tests send native coin.
const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// A service with chain `anvil` and its funded default EVM wallet.
struct Evm {
    anvil: Anvil,
    svc: Service,
    wallet: Address,
    /// The gateway the service reaches anvil through, if it does.
    gateway: Option<Gateway>,
}

impl Evm {
    async fn start(b: Backend, extra_toml: &str, anvil_args: &[&str]) -> anyhow::Result<Self> {
        Self::start_with_env(b, extra_toml, anvil_args, &[]).await
    }

    /// `start`, with environment variables for the service.
    async fn start_with_env(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::launch(b, extra_toml, anvil_args, env, false).await
    }

    /// `start` over a node that does not mine, with a monitor that sweeps every 100 ms and
    /// takes a transaction for stuck after `stuck_after_secs`.
    async fn unmined(b: Backend, stuck_after_secs: u64) -> anyhow::Result<Self> {
        Self::start(b, &monitor_toml(stuck_after_secs), &["--no-mining"]).await
    }

    /// `start_with_env`, the service reaching anvil through a `Gateway`.
    async fn behind_gateway(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::launch(b, extra_toml, anvil_args, env, true).await
    }

    async fn launch(
        b: Backend,
        extra_toml: &str,
        anvil_args: &[&str],
        env: &[(&str, &str)],
        gated: bool,
    ) -> anyhow::Result<Self> {
        let anvil = Anvil::start_with(anvil_args).await?;
        let gateway = if gated {
            Some(Gateway::start(anvil.url()).await?)
        } else {
            None
        };
        let options = gated_options(&anvil, gateway.as_ref(), extra_toml, env);
        let svc = Service::start_with(b, options).await?;
        let wallet = anvil
            .fund_default_wallet(&svc.rest(&svc.api_key), U256::from(100 * ETH))
            .await?;
        Ok(Self {
            anvil,
            svc,
            wallet,
            gateway,
        })
    }

    /// Kills the service with SIGKILL and starts it again on the same database, through
    /// the same gateway if it had one.
    async fn restart(&mut self, extra_toml: &str, env: &[(&str, &str)]) -> anyhow::Result<()> {
        self.svc.kill().await?;
        let options = gated_options(&self.anvil, self.gateway.as_ref(), extra_toml, env);
        self.svc.relaunch(options).await?;
        Ok(())
    }

    fn gateway(&self) -> anyhow::Result<&Gateway> {
        self.gateway
            .as_ref()
            .context("not started behind a gateway")
    }

    fn api(&self) -> Rest {
        self.svc.rest(&self.svc.api_key)
    }

    async fn tx(&self, id: &str) -> anyhow::Result<Value> {
        self.api().transaction(id).await
    }

    /// POSTs a native send of `amount` wei to `to` under a fresh Idempotency-Key; the answer.
    async fn post_native(&self, to: &str, amount: &str) -> anyhow::Result<Reply> {
        self.api()
            .post(
                "/send",
                &json!({"chain": "anvil", "to": to, "asset": "native", "amount": amount}),
            )
            .await
    }

    /// Sends `amount` wei to `to` over REST; returns the submission's id and hash.
    async fn send_native(&self, to: &str, amount: &str) -> anyhow::Result<(String, String)> {
        let reply = self.post_native(to, amount).await?;
        let id = submitted_id(&reply)?;
        let hash = reply.body["hash"].as_str().unwrap_or_default().to_owned();
        Ok((id, hash))
    }

    /// POSTs a native send of `amount` wei to `RECIPIENT` under Idempotency-Key `key`.
    async fn keyed_send(&self, key: &str, amount: &str) -> anyhow::Result<Reply> {
        let body = json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": amount});
        self.api()
            .post_with_key("/send", key, &body.to_string())
            .await
    }

    /// POSTs the chain write `body` to `path` under a fresh Idempotency-Key and waits until
    /// its transaction is CONFIRMED; the record then.
    async fn write_confirmed(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let reply = self.api().post(path, body).await?;
        self.wait_for(&submitted_id(&reply)?, "CONFIRMED").await
    }

    /// The wallet's owner spends `nonce` outside the service (a zero-value self-transfer at
    /// 100 gwei, far over the service's fees), into the pool.
    async fn owner_takes_nonce(&self, nonce: u64) -> anyhow::Result<()> {
        self.anvil
            .rpc("anvil_impersonateAccount", json!([self.wallet]))
            .await?;
        let gwei = |n: u64| format!("{:#x}", u128::from(n) * 1_000_000_000);
        self.anvil
            .rpc(
                "eth_sendTransaction",
                json!([{"from": self.wallet, "to": self.wallet, "value": "0x0", "nonce": format!("{nonce:#x}"),
                        "gas": "0x5208", "maxFeePerGas": gwei(100), "maxPriorityFeePerGas": gwei(50)}]),
            )
            .await?;
        Ok(())
    }

    /// Waits until the status history of transaction `id` mentions `text`; returns the
    /// record then.
    async fn wait_for_note(&self, id: &str, text: &str) -> anyhow::Result<Value> {
        self.api().wait_for_note(id, text).await
    }

    /// Waits until transaction `id` reaches `status`.
    async fn wait_for(&self, id: &str, status: &str) -> anyhow::Result<Value> {
        self.api().wait_for_status(id, status).await
    }

    /// Waits until the node's pool holds `hash`.
    async fn wait_in_pool(&self, what: &str, hash: &str) -> anyhow::Result<()> {
        poll_until(what, || async {
            Ok(self
                .anvil
                .pool_hashes()
                .await?
                .iter()
                .any(|h| h == hash)
                .then_some(()))
        })
        .await
    }

    /// Waits until the node's pool holds `pool` and nothing else.
    async fn wait_for_pool(&self, what: &str, pool: &[&str]) -> anyhow::Result<()> {
        poll_until(what, || async {
            Ok((self.anvil.pool_hashes().await? == pool).then_some(()))
        })
        .await
    }

    /// Waits until the node's pool holds `n` transactions.
    async fn wait_for_pool_size(&self, what: &str, n: usize) -> anyhow::Result<()> {
        poll_until(what, || async {
            Ok((self.anvil.pool_hashes().await?.len() == n).then_some(()))
        })
        .await
    }

    /// Asserts that the wallet has used `nonces` nonces on chain and `RECIPIENT` holds `wei`.
    async fn assert_paid(&self, nonces: u64, wei: u64) -> anyhow::Result<()> {
        assert_eq!(self.anvil.nonce(self.wallet).await?, nonces);
        assert_eq!(
            self.anvil.balance(RECIPIENT.parse()?).await?,
            U256::from(wei)
        );
        Ok(())
    }
}

/// The service's options over `anvil`, with the chain reached through `gateway` when there
/// is one.
fn gated_options(
    anvil: &Anvil,
    gateway: Option<&Gateway>,
    extra_toml: &str,
    env: &[(&str, &str)],
) -> Options {
    anvil.service_options_via(gateway.map_or(anvil.url(), Gateway::url), extra_toml, env)
}

/// The `[monitor]` section of a service whose monitor sweeps every 100 ms and takes a
/// transaction for stuck after `stuck_after_secs`.
fn monitor_toml(stuck_after_secs: u64) -> String {
    format!("[monitor]\npoll_interval_ms = 100\nstuck_after_secs = {stuck_after_secs}\n")
}

/// Asserts that record `tx` kept the nonce it was first signed with.
fn assert_never_re_signed(tx: &Value) {
    assert!(
        !tx["statusHistory"].to_string().contains("re-signed"),
        "{tx}"
    );
}

fn submitted_id(reply: &Reply) -> anyhow::Result<String> {
    anyhow::ensure!(
        reply.status == 200,
        "expected 200, got {} {}",
        reply.status,
        reply.text
    );
    // The submission result, and nothing else.
    let keys: Vec<&str> = reply
        .body
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    anyhow::ensure!(
        keys == ["chainName", "explorerUrl", "hash", "id", "status"],
        "{}",
        reply.text
    );
    anyhow::ensure!(reply.body["status"] == "SUBMITTED", "{}", reply.text);
    let hash = reply.body["hash"].as_str().unwrap_or_default();
    anyhow::ensure!(hash.len() == 66 && hash.starts_with("0x"), "{}", reply.text);
    anyhow::ensure!(
        reply.body["explorerUrl"]
            .as_str()
            .is_some_and(|url| url.ends_with(hash)),
        "{}",
        reply.text
    );
    anyhow::ensure!(reply.body["chainName"] == "Anvil", "{}", reply.text);
    Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
}
