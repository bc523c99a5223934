//! Wallets whose keys are in an HSM (a SoftHSM2 token of the test's own): made with the CLI,
//! listed as `providerType: "hsm"`, their writes signed by the token and read back on the
//! nodes; the private key sensitive and never extractable, as `pkcs11-tool` shows it.

use std::str::FromStr as _;

use alloy::primitives::{Address, U256};
use anyhow::Context as _;
use serde_json::json;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use walletops_tests::{
    Backend, Service, anvil::Anvil, on_both_backends, softhsm::SoftHsm, solana_node::SolanaNode,
};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// Makes a wallet of `chain_type` in the HSM with the CLI, its owner's default: its address
/// and its key's label.
async fn hsm_wallet(svc: &Service, chain_type: &str) -> anyhow::Result<(String, String)> {
    let out = svc
        .cli(&[
            "wallets",
            "create",
            "--chain-type",
            chain_type,
            "--custody",
            "hsm",
            "--make-default",
        ])
        .await?;
    anyhow::ensure!(out.success, "wallets create: {}", out.stderr);
    let address = out
        .stdout
        .split_whitespace()
        .next()
        .context("an address")?
        .to_owned();
    let api = svc.rest(&svc.api_key);
    let listed = api.get("/wallets").await?;
    let wallet = listed.body["wallets"]
        .as_array()
        .and_then(|all| all.iter().find(|w| w["address"] == address.as_str()))
        .cloned()
        .with_context(|| format!("{address} listed: {}", listed.text))?;
    assert_eq!(wallet["providerType"], "hsm", "{wallet}");
    let label = out
        .stdout
        .split_once("  key ")
        .map(|(_, label)| label.trim().to_owned())
        .with_context(|| format!("the key's label: {}", out.stdout))?;
    Ok((address, label))
}

async fn an_hsm_wallet_signs_evm_sends(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let anvil = Anvil::start().await?;
    let (name, value) = token.env();
    let options = anvil.service_options(&token.toml(), &[(name.as_str(), value.as_str())]);
    let svc = Service::start_with(b, options).await?;
    let check = svc.cli(&["hsm", "check"]).await?;
    assert!(check.success, "hsm check: {}", check.stderr);
    assert!(
        check.stdout.contains("test signatures verify"),
        "{}",
        check.stdout
    );
    let (address, id) = hsm_wallet(&svc, "ethereum").await?;
    let wallet: Address = address.parse()?;
    anvil
        .set_balance(wallet, U256::from(10u128.pow(18)))
        .await?;
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

async fn an_hsm_wallet_signs_solana_sends(b: Backend) -> anyhow::Result<()> {
    let token = SoftHsm::start()?;
    let node = SolanaNode::start("127.0.0.1:0".parse()?).await?;
    let mut options = node.service_options("", &token.toml());
    options.env.push(token.env());
    let svc = Service::start_with(b, options).await?;
    let (address, id) = hsm_wallet(&svc, "solana").await?;
    node.airdrop(&Pubkey::from_str(&address)?, 1_000_000_000)?;
    let api = svc.rest(&svc.api_key);
    let to = Pubkey::new_unique();
    let reply = api
        .post("/send", &json!({"chain": "solana-devnet", "to": to.to_string(), "asset": "native", "amount": "5000000"}))
        .await?;
    anyhow::ensure!(reply.status == 200, "{}", reply.text);
    api.wait_for_status(reply.body["id"].as_str().context("an id")?, "CONFIRMED")
        .await?;
    assert_eq!(
        RpcClient::new(node.url()).get_balance(&to).await?,
        5_000_000
    );
    let probed = token.probe_key(&id)?;
    assert!(probed.contains("value: refused"), "{probed}");
    Ok(())
}

on_both_backends!(
    an_hsm_wallet_signs_evm_sends,
    an_hsm_wallet_signs_solana_sends
);
