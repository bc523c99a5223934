//! `chains.<slug>.deposits`: whether WalletOps scans a chain for deposits to its wallets, and
//! which of them it announces. Either a switch (`deposits = true`) or a table:
//!
//! ```toml
//! [chains.anvil.deposits]
//! enabled = true                  # default true once the table is there
//! tokens = ["0x5fbd…"]            # announced tokens; absent: every token
//! min_amount = "1000"             # base units, for every asset; or per asset:
//! # min_amount = { native = "1000000000000000", "0x5fbd…" = "1000000" }
//! poll_interval_ms = 1000
//! traces = true                   # value moved by internal calls (`trace_block`); default:
//!                                 # read where the node serves it
//! ```

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use serde::{Deserialize, Serialize};
use solana_pubkey::Pubkey;

use walletops_domain::{ChainFamily, NATIVE_ASSET};

/// A chain's deposit scan, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "DepositsToml", into = "DepositsToml")]
pub struct DepositSettings {
    /// Scan the chain.
    pub enabled: bool,
    /// The tokens announced (each in its one spelling once checked); `None`: every token.
    pub tokens: Option<Vec<String>>,
    /// Less than this of an asset (base units) is recorded as ignored: for every asset
    /// (`*`) or per asset.
    pub min_amount: BTreeMap<String, String>,
    /// How often the chain is scanned.
    pub poll_interval_ms: u64,
    /// EVM: also read the value moved by internal calls, from the node's `trace_block`:
    /// `Some(true)` requires it (a node without it fails the scan), `Some(false)` never reads
    /// it, `None` reads it where the node serves it.
    pub traces: Option<bool>,
}

/// Deposits are scanned this often unless the chain says otherwise.
const DEFAULT_POLL_MS: u64 = 2_000;

/// The key of a minimum that holds for every asset.
const EVERY_ASSET: &str = "*";

impl Default for DepositSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            tokens: None,
            min_amount: BTreeMap::new(),
            poll_interval_ms: DEFAULT_POLL_MS,
            traces: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum DepositsToml {
    Switch(bool),
    Table(DepositsTable),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DepositsTable {
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokens: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_amount: Option<MinAmount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    poll_interval_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    traces: Option<bool>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum MinAmount {
    Every(String),
    PerAsset(BTreeMap<String, String>),
}

impl From<DepositsToml> for DepositSettings {
    fn from(t: DepositsToml) -> Self {
        match t {
            DepositsToml::Switch(enabled) => Self {
                enabled,
                ..Self::default()
            },
            DepositsToml::Table(t) => Self {
                enabled: t.enabled,
                tokens: t.tokens,
                min_amount: match t.min_amount {
                    None => BTreeMap::new(),
                    Some(MinAmount::Every(amount)) => {
                        BTreeMap::from([(EVERY_ASSET.to_owned(), amount)])
                    }
                    Some(MinAmount::PerAsset(map)) => map,
                },
                poll_interval_ms: t.poll_interval_ms.unwrap_or(DEFAULT_POLL_MS),
                traces: t.traces,
            },
        }
    }
}

impl From<DepositSettings> for DepositsToml {
    fn from(s: DepositSettings) -> Self {
        Self::Table(DepositsTable {
            enabled: s.enabled,
            tokens: s.tokens,
            min_amount: (!s.min_amount.is_empty()).then_some(MinAmount::PerAsset(s.min_amount)),
            poll_interval_ms: Some(s.poll_interval_ms),
            traces: s.traces,
        })
    }
}

/// `asset` (`native`, an address or a mint) in its one spelling on `family`.
fn spelled(family: ChainFamily, asset: &str) -> Result<String, String> {
    if asset == NATIVE_ASSET || asset == EVERY_ASSET {
        return Ok(asset.to_owned());
    }
    match family {
        ChainFamily::Evm => asset
            .parse::<Address>()
            .map(|a| format!("{a:#x}"))
            .map_err(|_| format!("{asset:?} is not a token address")),
        ChainFamily::Solana => asset
            .parse::<Pubkey>()
            .map(|m| m.to_string())
            .map_err(|_| format!("{asset:?} is not a mint")),
    }
}

impl DepositSettings {
    /// The settings with every token and amount checked for `family` and spelled once;
    /// what is wrong, naming the setting.
    pub(super) fn checked(mut self, slug: &str, family: ChainFamily) -> anyhow::Result<Self> {
        let bad = |what: &str, e: String| anyhow::anyhow!("chain {slug}: `deposits.{what}`: {e}");
        if let Some(tokens) = &mut self.tokens {
            for token in tokens.iter_mut() {
                *token = spelled(family, token).map_err(|e| bad("tokens", e))?;
            }
        }
        let mut minimums = BTreeMap::new();
        for (asset, amount) in std::mem::take(&mut self.min_amount) {
            let asset = spelled(family, &asset).map_err(|e| bad("min_amount", e))?;
            let amount = U256::from_str_radix(amount.trim(), 10)
                .map_err(|_| bad("min_amount", format!("{amount:?} is not base units")))?;
            minimums.insert(asset, amount.to_string());
        }
        self.min_amount = minimums;
        if self.poll_interval_ms == 0 {
            return Err(bad("poll_interval_ms", "must be at least 1".to_owned()));
        }
        Ok(self)
    }

    /// Why a credit of `amount` of `asset` (spelled once) is not announced; `None`: it is.
    pub fn ignored(&self, asset: &str, amount: U256) -> Option<String> {
        if asset != NATIVE_ASSET
            && let Some(tokens) = &self.tokens
            && !tokens.iter().any(|t| t == asset)
        {
            return Some("the token is not on the chain's deposits.tokens list".to_owned());
        }
        let least = self
            .min_amount
            .get(asset)
            .or_else(|| self.min_amount.get(EVERY_ASSET))?;
        let least = U256::from_str_radix(least, 10).ok()?;
        (amount < least).then(|| format!("less than the chain's deposits.min_amount ({least})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::providers::Format as _;

    #[derive(Deserialize)]
    struct Holder {
        deposits: DepositSettings,
    }

    fn read(toml_text: &str) -> DepositSettings {
        figment::Figment::from(figment::providers::Toml::string(toml_text))
            .extract::<Holder>()
            .expect("parsed")
            .deposits
    }

    #[test]
    fn a_switch_or_a_table() {
        assert!(read("deposits = true").enabled);
        assert!(!read("deposits = false").enabled);
        let table = read(
            "[deposits]\ntokens = [\"0x5FbDB2315678afecb367f032d93F642f64180aa3\"]\nmin_amount = \"1000\"",
        );
        assert!(table.enabled);
        let table = table.checked("anvil", ChainFamily::Evm).expect("checked");
        let token = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
        assert_eq!(table.tokens.as_deref(), Some(&[token.to_owned()][..]));
        assert_eq!(table.ignored(token, U256::from(1000)), None);
        assert!(table.ignored(token, U256::from(999)).is_some());
        assert!(
            table
                .ignored("0x0000000000000000000000000000000000000001", U256::MAX)
                .is_some()
        );
        assert!(table.ignored(NATIVE_ASSET, U256::from(5)).is_some());
    }

    #[test]
    fn minimums_per_asset_and_bad_values_named() {
        let s = read("[deposits]\nmin_amount = { native = \"10\" }")
            .checked("anvil", ChainFamily::Evm)
            .expect("checked");
        assert!(s.ignored(NATIVE_ASSET, U256::from(9)).is_some());
        assert_eq!(
            s.ignored("0x0000000000000000000000000000000000000001", U256::from(1)),
            None
        );
        let err = read("[deposits]\ntokens = [\"nope\"]")
            .checked("anvil", ChainFamily::Evm)
            .expect_err("refused");
        assert!(err.to_string().contains("deposits.tokens"), "{err}");
        let err = read("[deposits]\nmin_amount = \"lots\"")
            .checked("sol", ChainFamily::Solana)
            .expect_err("refused");
        assert!(err.to_string().contains("deposits.min_amount"), "{err}");
    }
}
