//! Wallets whose keys are in an HSM (a SoftHSM2 token of the test's own): made with the CLI,
//! listed as `providerType: "hsm"`, their writes signed by the token and read back on the
//! nodes; the private key sensitive and never extractable, as `pkcs11-tool` shows it; a
//! token gone or a PIN changed mid-run leaving nothing half-done.

mod faults;
mod writes;

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::json;
use walletops_tests::{Backend, Service, anvil::Anvil, on_both_backends, softhsm::SoftHsm};

pub(super) const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// Makes a wallet of `chain_type` in `token` with the CLI, its owner's default, and finds it
/// listed as an HSM wallet: its address and its key's label.
pub(super) async fn hsm_wallet(
    svc: &Service,
    token: &SoftHsm,
    chain_type: &str,
) -> anyhow::Result<(String, String)> {
    let (address, label) = token.wallet(svc, chain_type).await?;
    let listed = svc.rest(&svc.api_key).get("/wallets").await?;
    let wallet = listed.body["wallets"]
        .as_array()
        .and_then(|all| all.iter().find(|w| w["address"] == address.as_str()))
        .cloned()
        .with_context(|| format!("{address} listed: {}", listed.text))?;
    assert_eq!(wallet["providerType"], "hsm", "{wallet}");
    Ok((address, label))
}

/// `hsm_wallet` on EVM, given `wei` on `anvil`: its address and its key's label.
pub(super) async fn funded_evm_wallet(
    svc: &Service,
    token: &SoftHsm,
    anvil: &Anvil,
    wei: u128,
) -> anyhow::Result<(Address, String)> {
    let (address, label) = hsm_wallet(svc, token, "ethereum").await?;
    let wallet: Address = address.parse()?;
    anvil.set_balance(wallet, U256::from(wei)).await?;
    Ok((wallet, label))
}

async fn an_hsm_wallet_signs_evm_sends(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let anvil = Anvil::start().await?;
    let (name, value) = token.env();
    let options = anvil.service_options(&token.toml(), &[(name.as_str(), value.as_str())]);
    let svc = Service::start_with(b, options).await?;
    let check = svc.cli(&["hsm", "check", "--signatures", "20"]).await?;
    assert!(check.success, "hsm check: {}", check.stderr);
    for line in [
        "test signatures verify",
        "secp256k1 (EVM): 20 signatures in",
        "Ed25519 (Solana): 20 signatures in",
    ] {
        assert!(check.stdout.contains(line), "{line}: {}", check.stdout);
    }
    let (wallet, id) = funded_evm_wallet(&svc, &token, &anvil, 10u128.pow(18)).await?;
    let api = svc.rest(&svc.api_key);
    for amount in ["1000", "2000"] {
        let reply = api
            .post(
                "/send",
                &json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": amount}),
            )
            .await?;
        anyhow::ensure!(reply.status == 200, "{}", reply.text);
        let id = reply.body["id"].as_str().context("an id")?;
        api.wait_for_status(id, "CONFIRMED").await?;
    }
    assert_eq!(
        anvil.nonce(wallet).await?,
        2,
        "signed by the token, from its address"
    );
    assert_eq!(
        anvil.balance(RECIPIENT.parse()?).await?,
        U256::from(3000u64)
    );
    // The key is there, labelled with the wallet's id, and it never leaves.
    let listed = token.tool(&["--list-objects", "--type", "privkey"])?;
    assert!(listed.contains(&id), "{listed}");
    assert!(listed.contains("never extractable"), "{listed}");
    let probed = token.probe_key(&id)?;
    assert!(
        probed.contains("value: refused")
            && probed.contains("sensitive: true")
            && probed.contains("extractable: false"),
        "{probed}"
    );
    // The audit finds the wallet's key, and then a key no wallet is labelled with.
    let audit = svc.cli(&["wallets", "audit"]).await?;
    assert!(audit.success, "{}{}", audit.stdout, audit.stderr);
    assert!(
        audit
            .stdout
            .contains("1 HSM wallets in the store, 1 key pairs in the token, 0 problems"),
        "{}",
        audit.stdout
    );
    token.tool(&[
        "--keypairgen",
        "--key-type",
        "EC:secp256k1",
        "--label",
        "stray",
        "--id",
        "99",
    ])?;
    let audit = svc.cli(&["wallets", "audit"]).await?;
    assert!(!audit.success, "{}", audit.stdout);
    assert!(audit.stdout.contains("key stray"), "{}", audit.stdout);
    Ok(())
}

on_both_backends!(an_hsm_wallet_signs_evm_sends);
