//! The wallet guard's cost: the gas of a limited key's token transfer from a wallet without
//! its guard, then from the same wallet with it (`execute` and its checks).

use alloy::primitives::U256;
use serde_json::{Value, json};
use walletops_tests::{Backend, Rest, anvil::KeyedWallet};

/// The gas of one transfer each way.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GuardGas {
    /// Unguarded.
    pub(crate) plain: u64,
    /// Through the guard.
    pub(crate) guarded: u64,
}

impl GuardGas {
    pub(crate) fn print(&self) {
        println!(
            "guard                     {:>8} gas a guarded token transfer, {} unguarded: {:+} gas ({:+.0} %)",
            self.guarded,
            self.plain,
            i128::from(self.guarded) - i128::from(self.plain),
            100.0 * (self.guarded as f64 - self.plain as f64) / self.plain as f64
        );
    }

    pub(crate) fn json(&self) -> Value {
        json!({"plain_gas": self.plain, "guarded_gas": self.guarded,
            "extra_gas": i128::from(self.guarded) - i128::from(self.plain)})
    }
}

/// Measures both transfers on a fresh anvil and service (SQLite), the key limited on the
/// token (so the guard checks the coin, the token's balance and the recipient's allowance).
pub(crate) async fn guard_gas() -> anyhow::Result<GuardGas> {
    let keyed = KeyedWallet::start(Backend::Sqlite).await?;
    let token = keyed.token().await?;
    let asset = token.to_string();
    keyed
        .svc
        .limit_key(
            &keyed.prefix,
            &["--chain", "anvil", "--asset", &asset, "--daily", "1000"],
        )
        .await?;
    let api = keyed.svc.rest(&keyed.key);
    // A first transfer creates the recipient's balance (a fresh storage slot costs more):
    // the two measured ones both change balances that exist.
    transfer_gas(&keyed, &api, &asset).await?;
    let plain = transfer_gas(&keyed, &api, &asset).await?;
    let wallet = keyed.wallet.to_string();
    let out = keyed
        .svc
        .cli(&["wallets", "guard", "enable", &wallet, "--chain", "anvil"])
        .await?;
    anyhow::ensure!(out.success, "guard enable: {}", out.stderr);
    let guarded = transfer_gas(&keyed, &api, &asset).await?;
    Ok(GuardGas { plain, guarded })
}

/// The gas used by `api`'s transfer of 5 units of `asset`, once confirmed.
async fn transfer_gas(keyed: &KeyedWallet, api: &Rest, asset: &str) -> anyhow::Result<u64> {
    let reply = api
        .post(
            "/send",
            &json!({"chain": "anvil", "asset": "erc20", "token": asset,
                "to": "0x5555555555555555555555555555555555555555", "amount": "5"}),
        )
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    let record = api
        .wait_for_status(reply.body["id"].as_str().unwrap_or_default(), "CONFIRMED")
        .await?;
    let receipt = keyed
        .anvil
        .rpc("eth_getTransactionReceipt", json!([record["hash"]]))
        .await?;
    let used: U256 = receipt["gasUsed"].as_str().unwrap_or_default().parse()?;
    Ok(u64::try_from(used)?)
}
