//! What `serve` records in its data dir for the CLI run beside it: the address its REST edge
//! answers at, and with `--dev` the playground's chains. The dev chains exist only inside the
//! running server, and the listen address only on its command line; without the record, a
//! CLI command on the same data dir (a limit on chain `anvil`, a sign-in link) would not know
//! the chain, or would print a link to the default address.

use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};
use walletops_chains::ChainConfig;
use walletops_core::Config;

/// The record's file in the data dir.
const FILE: &str = "serving.json";

/// What a server recorded.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    /// Where its REST edge answers: `http(s)://host:port`.
    rest_url: Option<String>,
    /// The chains only the server defines (the playground's), by slug.
    chains: BTreeMap<String, ChainConfig>,
}

/// Records, for CLI commands on `config.data_dir`, the REST base `config` answers at and the
/// chains of `dev_slugs` as `config` defines them. A failure is logged, not fatal: the
/// server runs without it.
pub(crate) fn record(config: &Config, dev_slugs: &[&str]) {
    let record = Record {
        rest_url: Some(config.public_base()),
        chains: dev_slugs
            .iter()
            .filter_map(|slug| Some(((*slug).to_owned(), config.chains.get(*slug)?.clone())))
            .collect(),
    };
    if let Err(e) = write(&config.data_dir, &record) {
        tracing::warn!(error = %e, "recording the serving address in the data dir failed");
    }
}

fn write(dir: &Path, record: &Record) -> anyhow::Result<()> {
    let text = serde_json::to_vec_pretty(record)?;
    // Written whole, then renamed over the last record: a CLI never reads half of it.
    let partial = dir.join(format!("{FILE}.partial"));
    let _ = std::fs::remove_file(&partial);
    std::io::Write::write_all(
        &mut walletops_domain::files::create_private_file(&partial)?,
        &text,
    )?;
    std::fs::rename(&partial, dir.join(FILE))?;
    Ok(())
}

/// Gives a CLI command's `config` what the server on its data dir recorded: the chains it
/// defines that `config` does not, and, without `public_url`, the address to print in links.
pub(crate) fn apply(config: &mut Config) {
    let Ok(text) = std::fs::read(config.data_dir.join(FILE)) else {
        return;
    };
    let Ok(record) = serde_json::from_slice::<Record>(&text) else {
        tracing::warn!("the data dir's serving record is unreadable; ignored");
        return;
    };
    for (slug, chain) in record.chains {
        config.chains.entry(slug).or_insert(chain);
    }
    if config.public_url.is_none() {
        config.public_url = record.rest_url;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cli_config_gains_the_recorded_chains_and_address() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut served = Config {
            data_dir: dir.path().to_owned(),
            http_addr: "127.0.0.1:18080".parse().expect("addr"),
            ..Config::default()
        };
        served.chains.insert(
            "anvil".to_owned(),
            ChainConfig {
                rpc_url: Some("http://127.0.0.1:8545".to_owned()),
                chain_id: Some(31337),
                ..ChainConfig::default()
            },
        );
        record(&served, &["anvil", "solana-devnet"]);
        let mut cli = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        };
        apply(&mut cli);
        assert_eq!(cli.chains["anvil"].chain_id, Some(31337));
        assert!(!cli.chains.contains_key("solana-devnet"));
        assert_eq!(cli.public_url.as_deref(), Some("http://127.0.0.1:18080"));
        // A configured public_url wins; recording again replaces the record.
        let mut configured = Config {
            data_dir: dir.path().to_owned(),
            public_url: Some("https://ops.example.com".to_owned()),
            ..Config::default()
        };
        record(&served, &[]);
        apply(&mut configured);
        assert_eq!(
            configured.public_url.as_deref(),
            Some("https://ops.example.com")
        );
        assert!(!configured.chains.contains_key("anvil"));
    }
}
