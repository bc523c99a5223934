//! Balance reads: native and token balances of one wallet on one chain, with a short cache
//! (about 15 s for native balances, 45 s for tokens) that `fresh` bypasses. On EVM chains the
//! native balance and every token's balance, decimals and symbol come from one `eth_call` to
//! Multicall3 (`aggregate3`), or one JSON-RPC batch where Multicall3 is absent.

use std::{str::FromStr, sync::Arc, time::Duration};

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};
use moka::sync::Cache;

use solana_pubkey::Pubkey;

use crate::{
    chains::{
        Chain, ChainFamily, WalletAddress,
        evm::{EvmClients, TokenQuery, TokenReading},
        solana::{Holding, MintInfo, SolanaClients},
    },
    error::{Result, Violations, WalletOpsError},
    wallets::Wallet,
};

/// How long a native balance is served from the cache.
const NATIVE_TTL: Duration = Duration::from_secs(15);
/// How long a token balance is served from the cache.
const TOKEN_TTL: Duration = Duration::from_secs(45);
/// Symbol reported for a token whose symbol is not known: an ERC20 whose `symbol()` does not
/// answer, or an SPL mint missing from the known-token table.
pub const UNKNOWN_SYMBOL: &str = "UNKNOWN";

/// Symbols of well-known SPL mints. SPL mints carry no symbol of their own (it lives in
/// separate metadata accounts), so others are reported as `UNKNOWN`.
const KNOWN_SPL: &[(&str, &str)] = &[
    ("So11111111111111111111111111111111111111112", "SOL"),
    ("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v", "USDC"),
    ("Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB", "USDT"),
    ("4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU", "USDC"),
    ("JUPyiwrYJFskUPiHa7hKeqbbqngs4DpszrwEJKsJtXjT", "JUP"),
    ("DezXAZ8z7PnrnRJjz3wXBoRgixCa6xjnB7YaB1pPB263", "BONK"),
    ("mSoLzYCxHdYgdzU16g5QSh3i5K3z3KZK7ytfqcJm7So", "mSOL"),
    ("7dHbWXmci3dT8UFYWYZweBLXgycu7Y3iL6trKn1Y4ARj", "stSOL"),
    ("2b1kV6DkPAnxd5ixfnxCpjxmKwqjjaYmCZfHsFu24GXo", "PYUSD"),
];

fn spl_symbol(mint: &Pubkey) -> String {
    let mint = mint.to_string();
    KNOWN_SPL
        .iter()
        .find(|(m, _)| *m == mint)
        .map_or_else(|| UNKNOWN_SYMBOL.to_owned(), |(_, s)| (*s).to_owned())
}

/// One balance, as the contract's Balance resource has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balance {
    /// Chain family.
    pub family: ChainFamily,
    /// Chain id.
    pub chain_id: i64,
    /// Owning wallet.
    pub address: String,
    /// `native`, `erc20` or `spl`.
    pub asset: &'static str,
    /// Token address or mint; `None` for native.
    pub token: Option<String>,
    /// Amount in base units.
    pub raw: U256,
    /// Decimals.
    pub decimals: u32,
    /// Symbol.
    pub symbol: String,
    /// When the chain was read.
    pub updated_at: DateTime<Utc>,
}

type NativeKey = (String, String);
/// Chain slug (not id: a fork keeps its chain's id), owner, token.
type TokenKey = (String, Address, Address);

/// The native balance `raw` of `wallet` on `chain`, read at `at`.
fn native_balance(chain: &Chain, wallet: &Wallet, (raw, at): (U256, DateTime<Utc>)) -> Balance {
    Balance {
        family: chain.family(),
        chain_id: chain.chain_id(),
        address: wallet.address.clone(),
        asset: "native",
        token: None,
        raw,
        decimals: chain.native_decimals(),
        symbol: chain.native_symbol().to_owned(),
        updated_at: at,
    }
}

/// Reads balances through a cache.
#[derive(Debug, Clone)]
pub struct Balances {
    clients: Arc<EvmClients>,
    solana: Arc<SolanaClients>,
    native: Cache<NativeKey, (U256, DateTime<Utc>)>,
    tokens: Cache<TokenKey, (TokenReading, DateTime<Utc>)>,
    holdings: Cache<NativeKey, (Vec<Holding>, DateTime<Utc>)>,
    /// Mints do not change program or decimals: kept without expiry (bounded in size).
    mints: Cache<Pubkey, MintInfo>,
    /// ERC20 decimals and symbols do not change either: read once per chain and token.
    erc20_meta: Cache<(String, Address), (Option<u8>, Option<String>)>,
}

impl Balances {
    /// Balances read with `clients`.
    pub fn new(clients: Arc<EvmClients>, solana: Arc<SolanaClients>) -> Self {
        Self {
            clients,
            solana,
            holdings: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(TOKEN_TTL)
                .build(),
            mints: Cache::new(100_000),
            erc20_meta: Cache::new(100_000),
            native: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(NATIVE_TTL)
                .build(),
            tokens: Cache::builder()
                .max_capacity(1_000_000)
                .time_to_live(TOKEN_TTL)
                .build(),
        }
    }

    /// The balances of `wallet` on `chain`: native first, then `tokens` in order; zero
    /// balances only with `include_zero`; straight from the chain with `fresh`.
    pub async fn read(
        &self,
        chain: &Chain,
        wallet: &Wallet,
        tokens: &[WalletAddress],
        include_zero: bool,
        fresh: bool,
    ) -> Result<Vec<Balance>> {
        match chain.family() {
            ChainFamily::Evm => {
                self.read_evm(chain, wallet, tokens, include_zero, fresh)
                    .await
            }
            ChainFamily::Solana => {
                self.read_solana(chain, wallet, tokens, include_zero, fresh)
                    .await
            }
        }
    }

    async fn read_evm(
        &self,
        chain: &Chain,
        wallet: &Wallet,
        tokens: &[WalletAddress],
        include_zero: bool,
        fresh: bool,
    ) -> Result<Vec<Balance>> {
        let owner: Address = wallet.address.parse().map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!(
                "stored address {} unreadable",
                wallet.address
            ))
        })?;
        // Parsed from canonical (checksummed) text: it is also what the answer shows.
        let tokens: Vec<(Address, &str)> = tokens
            .iter()
            .filter_map(|t| Some((t.as_str().parse().ok()?, t.as_str())))
            .collect();
        let native_key = (chain.slug().to_owned(), wallet.address.clone());
        let token_key = |t: Address| (chain.slug().to_owned(), owner, t);
        let meta_key = |t: Address| (chain.slug().to_owned(), t);
        // One cache lookup per token: a cost paid for every token of every read.
        let mut readings: Vec<Option<(TokenReading, DateTime<Utc>)>> = tokens
            .iter()
            .map(|(t, _)| (!fresh).then(|| self.tokens.get(&token_key(*t))).flatten())
            .collect();
        let cached_native = (!fresh).then(|| self.native.get(&native_key)).flatten();
        let native = match cached_native {
            Some(hit) if readings.iter().all(Option::is_some) => hit,
            _ => {
                let client = self.clients.get(chain.rpc_url())?;
                let missing: Vec<usize> = (0..tokens.len())
                    .filter(|&i| readings[i].is_none())
                    .collect();
                let known: Vec<Option<(Option<u8>, Option<String>)>> = missing
                    .iter()
                    .map(|&i| self.erc20_meta.get(&meta_key(tokens[i].0)))
                    .collect();
                let queries: Vec<TokenQuery> = missing
                    .iter()
                    .zip(&known)
                    .map(|(&i, meta)| TokenQuery {
                        token: tokens[i].0,
                        meta: meta.is_none(),
                    })
                    .collect();
                let (native, read) = if self.clients.has_multicall(chain.rpc_url(), &client).await?
                {
                    client.balances_multicall(owner, &queries).await?
                } else {
                    client.balances_batch(owner, &queries).await?
                };
                let at = Utc::now();
                self.native.insert(native_key, (native, at));
                for ((&i, meta), mut r) in missing.iter().zip(known).zip(read) {
                    match meta {
                        Some((decimals, symbol)) => {
                            r.decimals = decimals;
                            r.symbol = symbol;
                        }
                        // Metadata is remembered only from a token that answered balanceOf.
                        None if r.balance.is_some() => {
                            self.erc20_meta
                                .insert(meta_key(r.token), (r.decimals, r.symbol.clone()));
                        }
                        None => {}
                    }
                    if r.balance.is_some() {
                        self.tokens.insert(token_key(r.token), (r.clone(), at));
                    }
                    readings[i] = Some((r, at));
                }
                (native, at)
            }
        };
        let mut out = Vec::with_capacity(1 + tokens.len());
        out.push(native_balance(chain, wallet, native));
        let mut bad = Violations::default();
        for (i, ((token, text), reading)) in tokens.iter().zip(readings).enumerate() {
            let Some((reading, at)) = reading else {
                return Err(WalletOpsError::Internal(anyhow::anyhow!(
                    "token read missing"
                )));
            };
            let Some(raw) = reading.balance else {
                bad.push(
                    &format!("tokens[{i}]"),
                    format!(
                        "{token} does not answer ERC20 balanceOf on {}",
                        chain.slug()
                    ),
                );
                continue;
            };
            out.push(Balance {
                family: ChainFamily::Evm,
                chain_id: chain.chain_id(),
                address: wallet.address.clone(),
                asset: "erc20",
                token: Some((*text).to_owned()),
                raw,
                decimals: reading.decimals.map_or(0, u32::from),
                symbol: reading
                    .symbol
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| UNKNOWN_SYMBOL.to_owned()),
                updated_at: at,
            });
        }
        bad.finish()?;
        if !include_zero {
            out.retain(|b| !b.raw.is_zero());
        }
        Ok(out)
    }

    async fn read_solana(
        &self,
        chain: &Chain,
        wallet: &Wallet,
        tokens: &[WalletAddress],
        include_zero: bool,
        fresh: bool,
    ) -> Result<Vec<Balance>> {
        let owner = Pubkey::from_str(&wallet.address).map_err(|_| {
            WalletOpsError::Internal(anyhow::anyhow!(
                "stored address {} unreadable",
                wallet.address
            ))
        })?;
        let client = self.solana.get(chain.rpc_url());
        let key = (chain.slug().to_owned(), wallet.address.clone());
        let native = match self.native.get(&key).filter(|_| !fresh) {
            Some(hit) => hit,
            None => {
                let read = (U256::from(client.balance(&owner).await?), Utc::now());
                self.native.insert(key.clone(), read);
                read
            }
        };
        let (holdings, held_at) = match self.holdings.get(&key).filter(|_| !fresh) {
            Some(hit) => hit,
            None => {
                let read = (client.holdings(&owner).await?, Utc::now());
                self.holdings.insert(key.clone(), read.clone());
                read
            }
        };
        let entry = |mint: &Pubkey, amount: u64, decimals: u8| Balance {
            family: ChainFamily::Solana,
            chain_id: chain.chain_id(),
            address: wallet.address.clone(),
            asset: "spl",
            token: Some(mint.to_string()),
            raw: U256::from(amount),
            decimals: u32::from(decimals),
            symbol: spl_symbol(mint),
            updated_at: held_at,
        };
        let mut out = vec![native_balance(chain, wallet, native)];
        if tokens.is_empty() {
            out.extend(
                holdings
                    .iter()
                    .map(|h| entry(&h.mint, h.amount, h.decimals)),
            );
        } else {
            let wanted: Vec<Pubkey> = tokens
                .iter()
                .filter_map(|t| Pubkey::from_str(t.as_str()).ok())
                .collect();
            // Decimals of requested mints the wallet does not hold come from the mints.
            let unknown: Vec<Pubkey> = wanted
                .iter()
                .filter(|m| !holdings.iter().any(|h| h.mint == **m) && !self.mints.contains_key(*m))
                .copied()
                .collect();
            for (mint, info) in unknown.iter().zip(client.mints(&unknown).await?) {
                if let Some(info) = info {
                    self.mints.insert(*mint, info);
                }
            }
            let mut bad = Violations::default();
            for (i, mint) in wanted.iter().enumerate() {
                match holdings.iter().find(|h| h.mint == *mint) {
                    Some(h) => out.push(entry(mint, h.amount, h.decimals)),
                    None => match self.mints.get(mint) {
                        Some(info) => out.push(entry(mint, 0, info.decimals)),
                        None => bad.push(
                            &format!("tokens[{i}]"),
                            format!(
                                "{mint} is not an SPL Token or Token-2022 mint on {}",
                                chain.slug()
                            ),
                        ),
                    },
                }
            }
            bad.finish()?;
        }
        if !include_zero {
            out.retain(|b| !b.raw.is_zero());
        }
        Ok(out)
    }
}
