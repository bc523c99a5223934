//! Trading: quotes and swap transactions from external swap aggregators, one per chain
//! family behind a trait each (`EvmAggregator`, `SolanaAggregator`), with the clients of the
//! aggregators the service speaks: 1inch's Classic Swap API v6.0 (`oneinch`) and Jupiter's
//! Swap API (`jupiter`).
//!
//! **Invariant:** this module prices and builds; it never signs, stores or broadcasts. A
//! built swap is an unsigned transaction the caller must check (the router or programs it
//! calls, its fee) before anything signs it. Errors carry the aggregator's own words and
//! never an API key or a URL.

pub mod config;
pub mod evm;
pub mod jupiter;
pub mod oneinch;
pub mod solana;

#[cfg(test)]
mod tests;

use std::{collections::HashMap, fmt, sync::Arc};

pub use crate::upstream::HttpPolicy;
pub use config::{EvmTradeConfig, LocalEvmAggregator, SolanaTradeConfig, TradeConfig};
pub use evm::{
    Approval, EvmAggregator, EvmChainId, EvmQuote, EvmQuoteRequest, EvmSwap, EvmSwapRequest,
    EvmSwapTx, NATIVE_TOKEN,
};
pub use solana::{SolanaAggregator, SolanaQuote, SolanaQuoteRequest, SolanaSwap, WRAPPED_SOL_MINT};

/// Why an aggregator call gave no quote or swap.
pub type TradeError = crate::upstream::UpstreamError;

/// A slippage tolerance, in basis points of the quoted output (100 = 1%).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slippage(u16);

impl Slippage {
    /// The spec's default: 1%.
    pub const DEFAULT: Slippage = Slippage(100);
    /// 1inch accepts at most 50%; no sane swap wants more.
    pub const MAX_BPS: u16 = 5_000;

    /// `bps` basis points; at most `MAX_BPS`.
    pub fn from_bps(bps: u16) -> Result<Self, String> {
        if bps > Self::MAX_BPS {
            return Err(format!(
                "must be at most {}%",
                Self::MAX_BPS / Self::BPS_PER_PERCENT
            ));
        }
        Ok(Self(bps))
    }

    /// `percent` as the spec's `slippage` gives it (1 means 1%): between 0 and 50, in
    /// steps of 0.01.
    pub fn from_percent(percent: f64) -> Result<Self, String> {
        const RULE: &str = "must be a percentage between 0 and 50, in steps of 0.01";
        if !percent.is_finite() || !(0.0..=50.0).contains(&percent) {
            return Err(RULE.to_owned());
        }
        let bps = (percent * 100.0).round();
        if (bps - percent * 100.0).abs() > 1e-6 {
            return Err(RULE.to_owned());
        }
        // In 0..=5000 after the checks above, so the cast neither truncates nor wraps.
        Self::from_bps(bps as u16)
    }

    const BPS_PER_PERCENT: u16 = 100;

    /// Basis points, as Jupiter's `slippageBps` takes them.
    pub fn bps(self) -> u16 {
        self.0
    }

    /// Percent in plain decimal (`1`, `0.5`, `0.05`), as 1inch's `slippage` takes it: never
    /// in scientific notation.
    pub fn percent(self) -> String {
        let whole = self.0 / Self::BPS_PER_PERCENT;
        match self.0 % Self::BPS_PER_PERCENT {
            0 => whole.to_string(),
            hundredths if hundredths % 10 == 0 => format!("{whole}.{}", hundredths / 10),
            hundredths => format!("{whole}.{hundredths:02}"),
        }
    }
}

impl fmt::Display for Slippage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent())
    }
}

/// The aggregators as configured, built once at startup.
#[derive(Clone)]
pub struct Aggregators {
    evm: Option<Arc<dyn EvmAggregator>>,
    /// Chains with an aggregator of their own (`TradeConfig::local_evm`).
    evm_by_chain: HashMap<u64, Arc<dyn EvmAggregator>>,
    solana: Arc<dyn SolanaAggregator>,
}

impl fmt::Debug for Aggregators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Aggregators")
            .field("evm", &self.evm.is_some())
            .finish_non_exhaustive()
    }
}

impl Aggregators {
    /// The clients `config` describes. The 1inch client is built only with an API key
    /// (1inch refuses every call without one); Jupiter works without.
    pub fn from_config(config: &TradeConfig) -> anyhow::Result<Self> {
        Self::with_policy(config, HttpPolicy::default())
    }

    /// As `from_config`, with other timeouts and retries.
    pub fn with_policy(config: &TradeConfig, policy: HttpPolicy) -> anyhow::Result<Self> {
        let evm = oneinch::OneInch::from_config(&config.evm, policy.clone())?
            .map(|client| Arc::new(client) as Arc<dyn EvmAggregator>);
        let mut evm_by_chain = HashMap::new();
        for local in &config.local_evm {
            // A local aggregator takes any key; 1inch's client always sends one.
            let client = oneinch::OneInch::new(
                local.base_url.clone(),
                walletops_domain::secret::Secret::from("local".to_owned()),
                policy.clone(),
            )?;
            evm_by_chain.insert(local.chain_id, Arc::new(client) as Arc<dyn EvmAggregator>);
        }
        let solana = Arc::new(jupiter::Jupiter::from_config(&config.solana, policy)?);
        Ok(Self {
            evm,
            evm_by_chain,
            solana,
        })
    }

    /// Aggregators from clients made elsewhere (another aggregator, a test double).
    pub fn new(evm: Option<Arc<dyn EvmAggregator>>, solana: Arc<dyn SolanaAggregator>) -> Self {
        Self {
            evm,
            evm_by_chain: HashMap::new(),
            solana,
        }
    }

    /// The aggregator of EVM chain `chain`, or `Unavailable` naming the option that would
    /// enable it.
    pub fn evm(&self, chain: EvmChainId) -> Result<&dyn EvmAggregator, TradeError> {
        if let Some(local) = self.evm_by_chain.get(&chain.get()) {
            return Ok(local.as_ref());
        }
        self.evm.as_deref().ok_or_else(|| TradeError::Unavailable {
            option: oneinch::API_KEY_OPTION,
            problem: "is not set".to_owned(),
        })
    }

    /// The Solana aggregator.
    pub fn solana(&self) -> &dyn SolanaAggregator {
        self.solana.as_ref()
    }
}
