//! The chain registry: built-in slugs for the main EVM networks, their testnets and the Solana
//! clusters, plus whatever the config file adds or overrides (a local `anvil` chain, say).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    builtin::{BUILT_IN, default_confirmations, default_fees_per_day},
    deposit_settings::DepositSettings,
    solana_fees::SolanaFees,
};
use crate::ChainError;
use walletops_domain::{ChainFamily, OpenTransaction, Submission};

/// One chain the service can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    slug: String,
    family: ChainFamily,
    chain_id: i64,
    name: String,
    explorer_tx_url: Option<String>,
    /// Never empty.
    rpc_urls: Vec<String>,
    native_symbol: String,
    confirmations: u64,
    /// A limited key's fee budget per day without one of its own, in base units.
    fees_per_day: u64,
    /// Named in the config file (not only built in).
    configured: bool,
    /// Its deposit scan, when on.
    deposits: Option<DepositSettings>,
    /// How its own Solana transfers price their compute.
    fees: SolanaFees,
    /// Solana: where every send of a transfer also goes (a block engine, a staked sender).
    send_urls: Vec<String>,
}

impl Chain {
    /// The submission result of record `open`, stored on this chain: its current hash and
    /// the explorer's link to it.
    pub fn submission_of(&self, open: &OpenTransaction) -> Submission {
        let hash = open.hashes.last().map(ToString::to_string);
        Submission {
            id: open.id,
            explorer_url: hash.as_deref().and_then(|h| self.explorer_url(h)),
            hash,
            chain_name: self.name().to_owned(),
        }
    }

    /// Symbol of the native coin, e.g. `ETH`, `POL`, `SOL`.
    pub fn native_symbol(&self) -> &str {
        &self.native_symbol
    }
    /// Decimals of the native coin.
    pub fn native_decimals(&self) -> u32 {
        match self.family {
            ChainFamily::Evm => 18,
            ChainFamily::Solana => 9,
        }
    }
    /// Whether the config file names the chain: an operator chose it, so pages read it
    /// even when no transaction of the user is on it yet.
    pub fn configured(&self) -> bool {
        self.configured
    }
    /// The slug callers use, e.g. `base-sepolia`.
    pub fn slug(&self) -> &str {
        &self.slug
    }
    /// The chain's family.
    pub fn family(&self) -> ChainFamily {
        self.family
    }
    /// Numeric chain id; Solana clusters use the sentinels 0 (mainnet), -2 (testnet),
    /// -3 (devnet).
    pub fn chain_id(&self) -> i64 {
        self.chain_id
    }
    /// Display name, the `chainName` of a submission.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The first JSON-RPC endpoint.
    pub fn rpc_url(&self) -> &str {
        &self.rpc_urls[0]
    }
    /// Every JSON-RPC endpoint, in the order they are tried (see `chains::failover`).
    pub fn rpc_urls(&self) -> &[String] {
        &self.rpc_urls
    }
    /// Solana: where every send of a transfer also goes, besides its RPC URLs.
    pub fn send_urls(&self) -> &[String] {
        &self.send_urls
    }
    /// Blocks (the including one counted) an EVM transaction must be under before its record
    /// is final: a record whose block is reorganised away before then is followed again.
    pub fn confirmations(&self) -> u64 {
        self.confirmations
    }

    /// What a limited key's writes may pay in fees a day here, by default (the operator's
    /// `limits.default_fees_per_day` overrides it), in the native coin's base units.
    pub fn default_fees_per_day(&self) -> u64 {
        self.fees_per_day
    }
    /// Its deposit scan's settings, when it is scanned.
    pub fn deposits(&self) -> Option<&DepositSettings> {
        self.deposits.as_ref()
    }
    /// How its own Solana transfers price their compute (defaults on EVM chains, unused).
    pub fn solana_fees(&self) -> &SolanaFees {
        &self.fees
    }
    /// Explorer link for a transaction hash or signature, where the chain has an explorer.
    pub fn explorer_url(&self, hash: &str) -> Option<String> {
        self.explorer_tx_url
            .as_ref()
            .map(|t| t.replace("{hash}", hash))
    }
    /// Explorer link for an address, where the transaction link has the common
    /// `…/tx/{hash}` shape (every built-in explorer): `…/address/{address}`.
    pub fn explorer_address_url(&self, address: &str) -> Option<String> {
        self.explorer_tx_url
            .as_ref()
            .filter(|t| t.contains("/tx/{hash}"))
            .map(|t| t.replace("/tx/{hash}", &format!("/address/{address}")))
    }
}

/// Refuses a configured chain that would fail only later, on a request: an EVM chain id
/// that transactions cannot carry, a Solana one outside the contract's sentinels (0 and the
/// negatives), an explorer link the same for every transaction.
fn check_configured(chain: &Chain) -> anyhow::Result<()> {
    let slug = &chain.slug;
    match chain.family {
        ChainFamily::Evm if chain.chain_id <= 0 => {
            anyhow::bail!("chain {slug}: an EVM `chain_id` is a positive number")
        }
        ChainFamily::Solana if chain.chain_id > 0 => anyhow::bail!(
            "chain {slug}: a Solana `chain_id` is 0 (mainnet) or negative (-2 testnet, -3 devnet)"
        ),
        _ => {}
    }
    if let Some(template) = &chain.explorer_tx_url
        && !template.contains("{hash}")
    {
        anyhow::bail!("chain {slug}: `explorer_tx_url` must hold `{{hash}}`");
    }
    Ok(())
}

/// A chain in the config file: a new slug needs `family`, `chain_id` and `name`; for a
/// built-in slug every field is optional and overrides the built-in value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChainConfig {
    /// `ethereum` or `solana`.
    pub family: Option<ChainFamily>,
    /// Numeric chain id.
    pub chain_id: Option<i64>,
    /// Display name.
    pub name: Option<String>,
    /// Explorer URL template with `{hash}` where the hash goes.
    pub explorer_tx_url: Option<String>,
    /// JSON-RPC endpoint.
    pub rpc_url: Option<String>,
    /// Several JSON-RPC endpoints of the chain, tried in order (instead of `rpc_url`).
    pub rpc_urls: Option<Vec<String>>,
    /// Symbol of the native coin (default `ETH` for EVM chains, `SOL` for Solana).
    pub native_symbol: Option<String>,
    /// Confirmations an EVM transaction needs before it is final, at least 1 (the including
    /// block); default per built-in chain, 1 for a new one.
    pub confirmations: Option<u64>,
    /// Whether deposits to the wallets are scanned for, and which are announced; default
    /// off (on for `serve --dev`'s chains).
    pub deposits: Option<DepositSettings>,
    /// Solana: compute units asked beyond the simulation's, in percent (default 10).
    pub compute_unit_margin: Option<u32>,
    /// Solana: the percentile of recent prioritization fees paid (default 75).
    pub priority_fee_percentile: Option<u8>,
    /// Solana: the most micro-lamports per compute unit paid (default 1,000,000).
    pub max_priority_fee_micro_lamports: Option<u64>,
    /// Solana: how often a transfer not yet seen is sent again, in ms (default 2,000).
    pub resend_interval_ms: Option<u64>,
    /// Solana: where every send of a transfer also goes (`sendTransaction`, preflight
    /// skipped), such as a block engine or a staked-connection sender.
    pub send_urls: Option<Vec<String>>,
}

/// The endpoints `cfg` sets: `rpc_url` or `rpc_urls`, not both, and not an empty list.
fn configured_urls(slug: &str, cfg: &ChainConfig) -> anyhow::Result<Option<Vec<String>>> {
    match (&cfg.rpc_url, &cfg.rpc_urls) {
        (Some(_), Some(_)) => {
            anyhow::bail!("chain {slug}: set `rpc_url` or `rpc_urls`, not both")
        }
        (_, Some(urls)) if urls.is_empty() => {
            anyhow::bail!("chain {slug}: `rpc_urls` lists no URL")
        }
        (Some(url), None) => Ok(Some(vec![url.clone()])),
        (None, urls) => Ok(urls.clone()),
    }
}

/// Every chain known to this service, by slug.
#[derive(Debug, Clone)]
pub struct Registry {
    chains: BTreeMap<String, Chain>,
}

impl Registry {
    /// The built-in chains with `overrides` from the config applied.
    pub fn new(overrides: &BTreeMap<String, ChainConfig>) -> anyhow::Result<Self> {
        let mut chains: BTreeMap<String, Chain> = BUILT_IN
            .iter()
            .map(|&(slug, family, chain_id, name, explorer, rpc)| {
                (
                    slug.to_owned(),
                    Chain {
                        slug: slug.to_owned(),
                        family,
                        chain_id,
                        name: name.to_owned(),
                        explorer_tx_url: Some(explorer.to_owned()),
                        rpc_urls: vec![rpc.to_owned()],
                        native_symbol: match (family, slug) {
                            (ChainFamily::Solana, _) => "SOL",
                            (_, "polygon" | "polygon-amoy") => "POL",
                            (_, "bsc" | "bsc-testnet") => "BNB",
                            _ => "ETH",
                        }
                        .to_owned(),
                        confirmations: default_confirmations(slug),
                        fees_per_day: default_fees_per_day(slug, family),
                        configured: false,
                        deposits: None,
                        fees: SolanaFees::default(),
                        send_urls: Vec::new(),
                    },
                )
            })
            .collect();
        for (slug, cfg) in overrides {
            let rpc_urls = configured_urls(slug, cfg)?;
            if cfg.confirmations == Some(0) {
                anyhow::bail!(
                    "chain {slug}: `confirmations` must be at least 1 (the including block)"
                );
            }
            let chain = match chains.remove(slug) {
                Some(mut c) => {
                    if cfg.family.is_some_and(|f| f != c.family) {
                        anyhow::bail!(
                            "chain {slug}: a built-in chain keeps its `family`; add a chain under a new slug instead"
                        );
                    }
                    c.chain_id = cfg.chain_id.unwrap_or(c.chain_id);
                    c.name = cfg.name.clone().unwrap_or(c.name);
                    c.explorer_tx_url = cfg.explorer_tx_url.clone().or(c.explorer_tx_url);
                    c.rpc_urls = rpc_urls.unwrap_or(c.rpc_urls);
                    c.native_symbol = cfg.native_symbol.clone().unwrap_or(c.native_symbol);
                    c.confirmations = cfg.confirmations.unwrap_or(c.confirmations);
                    c.configured = true;
                    c.deposits = cfg.deposits.clone();
                    c.fees = SolanaFees::of(slug, cfg)?;
                    c.send_urls = cfg.send_urls.clone().unwrap_or_default();
                    c
                }
                None => {
                    let family = cfg
                        .family
                        .ok_or_else(|| anyhow::anyhow!("chain {slug}: `family` is required"))?;
                    Chain {
                        slug: slug.clone(),
                        family,
                        native_symbol: cfg.native_symbol.clone().unwrap_or_else(|| {
                            match family {
                                ChainFamily::Evm => "ETH",
                                ChainFamily::Solana => "SOL",
                            }
                            .to_owned()
                        }),
                        chain_id: cfg.chain_id.ok_or_else(|| {
                            anyhow::anyhow!("chain {slug}: `chain_id` is required")
                        })?,
                        name: cfg.name.clone().unwrap_or_else(|| slug.clone()),
                        explorer_tx_url: cfg.explorer_tx_url.clone(),
                        rpc_urls: rpc_urls.ok_or_else(|| {
                            anyhow::anyhow!("chain {slug}: `rpc_url` (or `rpc_urls`) is required")
                        })?,
                        confirmations: cfg.confirmations.unwrap_or(1),
                        fees_per_day: default_fees_per_day(slug, family),
                        configured: true,
                        deposits: cfg.deposits.clone(),
                        fees: SolanaFees::of(slug, cfg)?,
                        send_urls: cfg.send_urls.clone().unwrap_or_default(),
                    }
                }
            };
            check_configured(&chain)?;
            let mut chain = chain;
            chain.deposits = match chain.deposits.take().filter(|d| d.enabled) {
                Some(d) => Some(d.checked(slug, chain.family)?),
                None => None,
            };
            chains.insert(slug.clone(), chain);
        }
        Ok(Self { chains })
    }

    /// The chain for `slug`; unknown -> `CHAIN_UNKNOWN`.
    pub fn resolve(&self, slug: &str) -> Result<&Chain, ChainError> {
        self.chains
            .get(slug)
            .ok_or_else(|| ChainError::Unknown(slug.to_owned()))
    }

    /// The display name of a stored record's chain `slug` and its explorer link for
    /// `hash`. A record outlives its chain's configuration: once the slug is gone, the name
    /// is the slug and there is no link, never an error.
    pub fn label(&self, slug: &str, hash: Option<&str>) -> (String, Option<String>) {
        match self.chains.get(slug) {
            Some(chain) => (
                chain.name().to_owned(),
                hash.and_then(|h| chain.explorer_url(h)),
            ),
            None => (slug.to_owned(), None),
        }
    }

    /// Every chain, by slug.
    pub fn all(&self) -> impl Iterator<Item = &Chain> {
        self.chains.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A local chain the config adds.
    fn anvil() -> ChainConfig {
        ChainConfig {
            family: Some(ChainFamily::Evm),
            chain_id: Some(31337),
            name: Some("Anvil".to_owned()),
            rpc_url: Some("http://127.0.0.1:8545".to_owned()),
            ..ChainConfig::default()
        }
    }

    #[test]
    fn built_ins_and_overrides() {
        let mut overrides = BTreeMap::new();
        overrides.insert("anvil".to_owned(), anvil());
        overrides.insert(
            "base".to_owned(),
            ChainConfig {
                rpc_url: Some("http://base.local".to_owned()),
                ..ChainConfig::default()
            },
        );
        let r = Registry::new(&overrides).expect("registry");
        assert_eq!(r.resolve("anvil").expect("anvil").chain_id(), 31337);
        assert_eq!(
            r.resolve("base").expect("base").rpc_url(),
            "http://base.local"
        );
        assert_eq!(r.resolve("solana-devnet").expect("devnet").chain_id(), -3);
        assert_eq!(r.resolve("solana-testnet").expect("testnet").chain_id(), -2);
        // Only what the config names counts as configured (pages read it by default).
        let configured: Vec<&str> = r
            .all()
            .filter(|c| c.configured())
            .map(Chain::slug)
            .collect();
        assert_eq!(configured, ["anvil", "base"]);
        assert_eq!(
            r.resolve("solana-devnet")
                .expect("devnet")
                .explorer_url("abc")
                .as_deref(),
            Some("https://explorer.solana.com/tx/abc?cluster=devnet")
        );
        assert!(matches!(r.resolve("nope"), Err(ChainError::Unknown(_))));
        // A stored record's label, its chain configured or gone.
        assert_eq!(
            r.label("solana-devnet", Some("abc")),
            (
                "Solana Devnet".to_owned(),
                Some("https://explorer.solana.com/tx/abc?cluster=devnet".to_owned())
            )
        );
        assert_eq!(r.label("base", None).1, None);
        assert_eq!(r.label("gone", Some("0x1")), ("gone".to_owned(), None));
    }

    #[test]
    fn a_chain_lists_several_urls_or_one() {
        let urls = vec!["http://a".to_owned(), "http://b".to_owned()];
        let several = |rpc_url: Option<&str>, rpc_urls: Option<Vec<String>>| {
            let mut overrides = BTreeMap::new();
            let cfg = ChainConfig {
                rpc_url: rpc_url.map(str::to_owned),
                rpc_urls,
                ..ChainConfig::default()
            };
            overrides.insert("base".to_owned(), cfg);
            Registry::new(&overrides)
        };
        let r = several(None, Some(urls.clone())).expect("registry");
        let base = r.resolve("base").expect("base");
        assert_eq!(base.rpc_urls(), urls.as_slice());
        assert_eq!(base.rpc_url(), "http://a");
        let both = several(Some("http://c"), Some(urls)).expect_err("both");
        assert!(both.to_string().contains("not both"), "{both}");
        let none = several(None, Some(Vec::new())).expect_err("empty");
        assert!(none.to_string().contains("no URL"), "{none}");
    }

    #[test]
    fn configured_chains_that_would_fail_later_are_refused() {
        let refused = |slug: &str, cfg: ChainConfig, says: &str| {
            let err = Registry::new(&BTreeMap::from([(slug.to_owned(), cfg)]))
                .expect_err(says)
                .to_string();
            assert!(err.contains(slug) && err.contains(says), "{err}");
        };
        refused(
            "base",
            ChainConfig {
                family: Some(ChainFamily::Solana),
                ..ChainConfig::default()
            },
            "family",
        );
        for id in [0, -5] {
            refused(
                "anvil",
                ChainConfig {
                    chain_id: Some(id),
                    ..anvil()
                },
                "chain_id",
            );
        }
        refused(
            "solana",
            ChainConfig {
                chain_id: Some(101),
                ..ChainConfig::default()
            },
            "chain_id",
        );
        refused(
            "anvil",
            ChainConfig {
                explorer_tx_url: Some("https://explorer.test/tx/".to_owned()),
                ..anvil()
            },
            "{hash}",
        );
        // The same family again is no change.
        Registry::new(&BTreeMap::from([(
            "base".to_owned(),
            ChainConfig {
                family: Some(ChainFamily::Evm),
                ..ChainConfig::default()
            },
        )]))
        .expect("same family");
    }

    #[test]
    fn confirmations_default_per_chain_and_can_be_set() {
        let mut overrides = BTreeMap::new();
        overrides.insert("anvil".to_owned(), anvil());
        let depth_of = |n| ChainConfig {
            confirmations: Some(n),
            ..ChainConfig::default()
        };
        overrides.insert("polygon".to_owned(), depth_of(32));
        let r = Registry::new(&overrides).expect("registry");
        let depth = |slug| r.resolve(slug).expect(slug).confirmations();
        assert_eq!(depth("ethereum"), 3);
        assert_eq!(depth("base"), 1);
        assert_eq!(depth("anvil"), 1);
        assert_eq!(depth("polygon"), 32);

        overrides.insert("base".to_owned(), depth_of(0));
        let err = Registry::new(&overrides).expect_err("zero confirmations");
        assert!(
            err.to_string().contains("chain base: `confirmations`"),
            "{err}"
        );
    }
}
