//! `walletops hsm check`: whether the PKCS#11 token of `[hsm]` can sign for WalletOps; and
//! `walletops wallets audit`: the HSM wallets of the store against the keys in the token.

use std::{collections::HashMap, sync::Arc};

use anyhow::Context as _;
use walletops_core::{Config, Core, signer::Hsm};
use walletops_domain::{ChainFamily, Wallet};

use crate::cli::HsmCommand;

pub(crate) async fn hsm(config: &Config, command: HsmCommand) -> anyhow::Result<()> {
    match command {
        HsmCommand::Check { signatures } => {
            let settings = config.hsm.as_ref().context(
                "no HSM is configured: set hsm.module, hsm.token_label and hsm.pin ([hsm] in the config file)",
            )?;
            let hsm = Arc::new(Hsm::open(settings)?);
            println!(
                "module {} loaded, token {:?} found, PIN accepted",
                settings.module.display(),
                settings.token_label
            );
            hsm.check().await?;
            println!("test signatures verify: secp256k1 (EVM) and Ed25519 (Solana)");
            if signatures > 0 {
                for family in [ChainFamily::Evm, ChainFamily::Solana] {
                    let took = hsm.time_signatures(family, signatures).await?;
                    let curve = match family {
                        ChainFamily::Evm => "secp256k1 (EVM)",
                        ChainFamily::Solana => "Ed25519 (Solana)",
                    };
                    println!(
                        "{curve}: {signatures} signatures in {:.3} s, {:.0} signatures/s over {} sessions",
                        took.as_secs_f64(),
                        f64::from(signatures) / took.as_secs_f64().max(1e-9),
                        settings.sessions.max(1)
                    );
                }
            }
        }
    }
    Ok(())
}

/// Reports every HSM wallet of the store whose key is not in the token (or is another key),
/// and every key pair in the token that no stored wallet is labelled with (a creation that
/// failed after the key was made, or keys of another use); fails when it found any.
pub(crate) async fn audit(core: &Core) -> anyhow::Result<()> {
    let mut stored: Vec<Wallet> = Vec::new();
    for family in [ChainFamily::Evm, ChainFamily::Solana] {
        let wallets = core.store.wallets_of_family(family).await?;
        stored.extend(wallets.into_iter().filter(Wallet::in_hsm));
    }
    let pairs = core.wallets.hsm()?.key_pairs().await?;
    let in_token: HashMap<&str, _> = pairs.iter().map(|(l, a)| (l.as_str(), a)).collect();
    let mut problems = 0;
    for w in &stored {
        let label = w.key_label();
        match in_token.get(label.as_str()) {
            Some(address) if **address == w.address => {}
            Some(address) => {
                problems += 1;
                println!(
                    "wallet {} ({}): the key labelled {label} in the HSM is {address}",
                    w.id, w.address
                );
            }
            None => {
                problems += 1;
                println!(
                    "wallet {} ({}): no key labelled {label} in the HSM",
                    w.id, w.address
                );
            }
        }
    }
    let labels: Vec<String> = stored.iter().map(Wallet::key_label).collect();
    for (label, address) in &pairs {
        if !labels.contains(label) {
            problems += 1;
            println!("key {label} ({address}) in the HSM: no wallet in the store");
        }
    }
    println!(
        "{} HSM wallets in the store, {} key pairs in the token, {problems} problems",
        stored.len(),
        pairs.len()
    );
    anyhow::ensure!(problems == 0, "the audit found {problems} problems");
    Ok(())
}
