//! The `[trade]` section of the configuration: where the aggregators are, their keys, and
//! what a swap transaction they build may do.

use serde::{Deserialize, Serialize};

use walletops_domain::secret::Secret;

/// The swap aggregators: 1inch (Classic Swap API v6.0) for EVM chains, Jupiter (Swap API v1)
/// for Solana, and what a swap transaction they build may do.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TradeConfig {
    /// The EVM aggregator.
    pub evm: EvmTradeConfig,
    /// The Solana aggregator.
    pub solana: SolanaTradeConfig,
    /// EVM chains priced and built by an aggregator of their own instead of `evm`: the
    /// playground's local pool for chain `anvil`. Set at startup, never read from a file.
    #[serde(skip)]
    pub local_evm: Vec<LocalEvmAggregator>,
}

/// A 1inch-compatible aggregator serving one EVM chain, which needs no API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEvmAggregator {
    /// The chain id it serves.
    pub chain_id: u64,
    /// Where it listens; the service appends `/swap/v6.0/{chainId}/...` as for 1inch.
    pub base_url: url::Url,
    /// The router its swaps call and its approvals name: allowed on its chain only.
    pub router: alloy::primitives::Address,
}

/// The 1inch Aggregation Router v6, deployed at this address on every chain 1inch serves
/// (its published deployments): the router an EVM swap may call and a quote may name as
/// spender without the operator listing it.
pub const ONEINCH_V6_ROUTER: alloy::primitives::Address =
    alloy::primitives::address!("0x111111125421cA6dc452d289314280a0f8842A65");

/// 1inch v6's router on zkSync Era (chain 324), the one chain where it was deployed at
/// another address.
pub const ONEINCH_V6_ROUTER_ZKSYNC: alloy::primitives::Address =
    alloy::primitives::address!("0x6fd4383cB451173D5f9304F041C7BCBf27d561fF");

/// 1inch v6's published router on chain `chain_id`.
pub fn oneinch_v6_router(chain_id: u64) -> alloy::primitives::Address {
    if chain_id == 324 {
        ONEINCH_V6_ROUTER_ZKSYNC
    } else {
        ONEINCH_V6_ROUTER
    }
}

/// The executors 1inch v6 routes through, seen as `executor` and `srcReceiver` in its
/// answers on Ethereum: a `swap` may hand its input only to one of these, one on
/// `trade.evm.allowed_executors`, or an allowed router of its chain.
pub const ONEINCH_V6_EXECUTORS: [alloy::primitives::Address; 2] = [
    alloy::primitives::address!("0x5141B82f5fFDa4c6fE1E372978F1C5427640a190"),
    alloy::primitives::address!("0xE37e799D5077682FA0a244D46E5649F71457BD09"),
];

impl TradeConfig {
    /// The executors an EVM swap on chain `chain_id` may hand its input to: 1inch's
    /// (`ONEINCH_V6_EXECUTORS`), those on `trade.evm.allowed_executors`, and the chain's
    /// allowed routers (`evm_routers`: a router trusted to be called is trusted to execute
    /// its own swaps, as the playground's pool does).
    pub fn evm_executors(&self, chain_id: u64) -> Vec<alloy::primitives::Address> {
        ONEINCH_V6_EXECUTORS
            .into_iter()
            .chain(self.evm.allowed_executors.iter().copied())
            .chain(self.evm_routers(chain_id))
            .collect()
    }

    /// The routers EVM swaps on chain `chain_id` may call and approve: the built-in 1inch v6
    /// router, those on `trade.evm.allowed_routers`, and the router of the chain's own
    /// aggregator.
    pub fn evm_routers(&self, chain_id: u64) -> Vec<alloy::primitives::Address> {
        let local = self
            .local_evm
            .iter()
            .filter(|l| l.chain_id == chain_id)
            .map(|l| l.router);
        std::iter::once(oneinch_v6_router(chain_id))
            .chain(self.evm.allowed_routers.iter().copied())
            .chain(local)
            .collect()
    }
}
/// The 1inch Classic Swap API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvmTradeConfig {
    /// Where the API is; the service appends `/swap/v6.0/{chainId}/...`.
    pub base_url: url::Url,
    /// The API key, sent as `Authorization: Bearer`. Empty: EVM quotes and swaps answer
    /// SERVICE_UNAVAILABLE (the API refuses every call without one).
    pub api_key: Secret,
    /// Router addresses a swap may call and a quote may name as spender, besides the built-in
    /// 1inch v6 router (`oneinch_v6_router`).
    pub allowed_routers: Vec<alloy::primitives::Address>,
    /// Executors a swap's call data may hand the input to (its `executor` and
    /// `srcReceiver`), besides 1inch's own (`ONEINCH_V6_EXECUTORS`).
    pub allowed_executors: Vec<alloy::primitives::Address>,
}

impl Default for EvmTradeConfig {
    fn default() -> Self {
        Self {
            base_url: url::Url::parse("https://api.1inch.dev").expect("a valid URL literal"),
            api_key: Secret::default(),
            allowed_routers: Vec::new(),
            allowed_executors: Vec::new(),
        }
    }
}

/// The Jupiter Swap API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SolanaTradeConfig {
    /// Where the API is; the service appends `/quote` and `/swap`.
    pub base_url: url::Url,
    /// The API key, sent as `x-api-key` when not empty (keyless hosts take none).
    pub api_key: Secret,
    /// The programs a swap transaction may invoke; any other refuses the swap.
    #[serde(with = "base58_keys")]
    pub allowed_programs: Vec<solana_pubkey::Pubkey>,
    /// The most a swap transaction may cost its fee payer in fees (base and priority), in
    /// lamports.
    pub max_fee_lamports: u64,
    /// The highest compute unit limit a swap transaction may set.
    pub max_compute_units: u32,
}

/// The programs a Jupiter swap normally invokes: the Jupiter v6 aggregator itself, and the
/// System, SPL Token, Token-2022, Associated Token Account, Compute Budget and Memo programs
/// its transactions wrap around it.
const JUPITER_PROGRAMS: [&str; 7] = [
    "JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4",
    "11111111111111111111111111111111",
    "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA",
    "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb",
    "ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL",
    "ComputeBudget111111111111111111111111111111",
    "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
];

impl Default for SolanaTradeConfig {
    fn default() -> Self {
        Self {
            base_url: url::Url::parse("https://api.jup.ag/swap/v1").expect("a valid URL literal"),
            api_key: Secret::default(),
            allowed_programs: JUPITER_PROGRAMS
                .iter()
                .map(|id| id.parse().expect("a valid program id literal"))
                .collect(),
            // 0.005 SOL: far above a normal swap's base fee and priority fee, low enough
            // that a quote built for a fee spike cannot drain a wallet.
            max_fee_lamports: 5_000_000,
            // The most a Solana transaction may request at all.
            max_compute_units: 1_400_000,
        }
    }
}

/// The most compute units a Solana transaction may request.
const MAX_TRANSACTION_COMPUTE_UNITS: u32 = 1_400_000;
/// The base fee of one signature, in lamports: no transaction costs less.
const LAMPORTS_PER_SIGNATURE: u64 = 5_000;

impl TradeConfig {
    /// Refuses what no swap could work with, naming the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (option, url) in [
            ("trade.evm.base_url", &self.evm.base_url),
            ("trade.solana.base_url", &self.solana.base_url),
        ] {
            crate::upstream::check_base_url(option, url)?;
        }
        let s = &self.solana;
        anyhow::ensure!(
            s.max_fee_lamports >= LAMPORTS_PER_SIGNATURE,
            "trade.solana.max_fee_lamports must be at least {LAMPORTS_PER_SIGNATURE} (one signature's fee), not {}",
            s.max_fee_lamports
        );
        anyhow::ensure!(
            (1..=MAX_TRANSACTION_COMPUTE_UNITS).contains(&s.max_compute_units),
            "trade.solana.max_compute_units must be between 1 and {MAX_TRANSACTION_COMPUTE_UNITS}, not {}",
            s.max_compute_units
        );
        Ok(())
    }
}

/// Solana public keys as base58 strings (their serde form is a byte array).
mod base58_keys {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};
    use solana_pubkey::Pubkey;

    pub(super) fn serialize<S: Serializer>(keys: &[Pubkey], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(keys.iter().map(ToString::to_string))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Pubkey>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|key| {
                key.parse()
                    .map_err(|_| D::Error::custom(format!("{key:?} is not a base58 public key")))
            })
            .collect()
    }
}
