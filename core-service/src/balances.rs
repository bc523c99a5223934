//! Balance reads: native and token balances of one wallet on one chain, with a short cache
//! (about 15 s for native balances, 45 s for tokens) that `fresh` bypasses. On EVM chains the
//! native balance and every token's balance, decimals and symbol come from one `eth_call` to
//! Multicall3 (`aggregate3`), or one JSON-RPC batch where Multicall3 is absent.

use std::{
    collections::HashMap,
    sync::{Arc, PoisonError, RwLock},
    time::Duration,
};

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};
use moka::sync::Cache;

use solana_pubkey::Pubkey;

use crate::error::{Result, Violations, WalletOpsError};

use walletops_chains::{
    Chain,
    evm::{EvmClients, TokenQuery},
    solana::{Holding, MintInfo, SolanaClients},
};
use walletops_domain::{ChainFamily, Wallet, WalletAddress};

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
    pub address: WalletAddress,
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

type NativeKey = (String, WalletAddress);
/// Chain slug (not id: a fork keeps its chain's id) and owner.
type OwnerKey = (String, Address);
/// The token balances of one owner on one chain, each with the time of its read. One cache
/// entry per owner, not per token: a 50-token read then costs two cache operations, not a
/// hundred.
type Book = HashMap<Address, (U256, DateTime<Utc>)>;
/// Decimals and symbol of an ERC20 token, where it answered them.
type Meta = (Option<u8>, Option<String>);
/// Tokens a book keeps; past it, a read keeps only what it read itself.
const MAX_BOOK: usize = 1_000;
/// Tokens whose metadata is kept per chain; past it, the chain's table starts over.
const MAX_META: usize = 100_000;

/// The native balance `raw` of `wallet` on `chain`, read at `at`.
fn native_balance(chain: &Chain, wallet: &Wallet, (raw, at): (U256, DateTime<Utc>)) -> Balance {
    Balance {
        family: chain.family(),
        chain_id: chain.chain_id(),
        address: wallet.address,
        asset: "native",
        token: None,
        raw,
        decimals: chain.native_decimals(),
        symbol: chain.native_symbol().to_owned(),
        updated_at: at,
    }
}

/// `ttl` as a `chrono` duration, for comparisons with read times.
fn chrono_ttl(ttl: Duration) -> chrono::Duration {
    chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::MAX)
}

/// Reads balances through a cache.
#[derive(Debug, Clone)]
pub struct Balances {
    clients: Arc<EvmClients>,
    solana: Arc<SolanaClients>,
    native: Cache<NativeKey, (U256, DateTime<Utc>)>,
    tokens: Cache<OwnerKey, Arc<Book>>,
    holdings: Cache<NativeKey, (Vec<Holding>, DateTime<Utc>)>,
    /// Mints do not change program or decimals: kept without expiry (bounded in size), per
    /// cluster (by slug), since a mint of one cluster need not exist on another.
    mints: Cache<(String, Pubkey), MintInfo>,
    /// ERC20 decimals and symbols do not change either: read once per chain (by slug) and
    /// token, and looked up under one lock per read.
    erc20_meta: Arc<RwLock<HashMap<String, HashMap<Address, Meta>>>>,
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
            erc20_meta: Arc::default(),
            native: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(NATIVE_TTL)
                .build(),
            // Weighed by the balances a book holds.
            tokens: Cache::builder()
                .max_capacity(1_000_000)
                .weigher(|_, book: &Arc<Book>| u32::try_from(book.len().max(1)).unwrap_or(u32::MAX))
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
        // The wallet was resolved for the chain's family: its address says which to read.
        match wallet.address {
            WalletAddress::Evm(owner) => {
                self.read_evm(chain, wallet, owner, tokens, include_zero, fresh)
                    .await
            }
            WalletAddress::Solana(owner) => {
                self.read_solana(chain, wallet, owner, tokens, include_zero, fresh)
                    .await
            }
        }
    }

    async fn read_evm(
        &self,
        chain: &Chain,
        wallet: &Wallet,
        owner: Address,
        tokens: &[WalletAddress],
        include_zero: bool,
        fresh: bool,
    ) -> Result<Vec<Balance>> {
        let tokens: Vec<Address> = tokens.iter().filter_map(WalletAddress::evm).collect();
        let native_key = (chain.slug().to_owned(), wallet.address);
        let book_key = (chain.slug().to_owned(), owner);
        let mut metas: Vec<Option<Meta>> = {
            let known = self
                .erc20_meta
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let known = known.get(chain.slug());
            tokens
                .iter()
                .map(|t| known.and_then(|k| k.get(t)).cloned())
                .collect()
        };
        // Per token: `None` until known; then its balance (`None`: it did not answer
        // balanceOf) and the time of the read. A cached balance counts only with its metadata.
        let mut balances: Vec<Option<(Option<U256>, DateTime<Utc>)>> = vec![None; tokens.len()];
        // Read once: it answers from the cache and is what a chain read is filed beside.
        let old_book = self.tokens.get(&book_key);
        if !fresh && let Some(book) = &old_book {
            let now = crate::clock::now();
            for ((t, meta), slot) in tokens.iter().zip(&metas).zip(&mut balances) {
                if meta.is_some()
                    && let Some(&(raw, at)) = book.get(t)
                    && now - at < chrono_ttl(TOKEN_TTL)
                {
                    *slot = Some((Some(raw), at));
                }
            }
        }
        let cached_native = (!fresh).then(|| self.native.get(&native_key)).flatten();
        let native = match cached_native {
            Some(hit) if balances.iter().all(Option::is_some) => hit,
            _ => {
                let client = self.clients.get(chain)?;
                let missing: Vec<usize> = (0..tokens.len())
                    .filter(|&i| balances[i].is_none())
                    .collect();
                let queries: Vec<TokenQuery> = missing
                    .iter()
                    .map(|&i| TokenQuery {
                        token: tokens[i],
                        meta: metas[i].is_none(),
                    })
                    .collect();
                let (native, read) = if self.clients.has_multicall(chain.rpc_url(), &client).await?
                {
                    client.balances_multicall(owner, &queries).await?
                } else {
                    client.balances_batch(owner, &queries).await?
                };
                let at = crate::clock::now();
                self.native.insert(native_key, (native, at));
                let mut learned = Vec::new();
                let mut book: Book = HashMap::new();
                for (&i, r) in missing.iter().zip(read) {
                    if metas[i].is_none() {
                        let meta = (r.decimals, r.symbol);
                        // Metadata is remembered only from a token that answered balanceOf.
                        if r.balance.is_some() {
                            learned.push((r.token, meta.clone()));
                        }
                        metas[i] = Some(meta);
                    }
                    if let Some(raw) = r.balance {
                        book.insert(r.token, (raw, at));
                    }
                    balances[i] = Some((r.balance, at));
                }
                self.remember_meta(chain.slug(), learned);
                self.file(book_key, old_book, book, at);
                (native, at)
            }
        };
        let mut out = Vec::with_capacity(1 + tokens.len());
        out.push(native_balance(chain, wallet, native));
        let mut bad = Violations::default();
        for (i, (token, (balance, meta))) in tokens
            .iter()
            .zip(balances.into_iter().zip(metas))
            .enumerate()
        {
            let Some((balance, at)) = balance else {
                return Err(WalletOpsError::Internal(anyhow::anyhow!(
                    "token read missing"
                )));
            };
            let Some(raw) = balance else {
                bad.push(
                    &format!("tokens[{i}]"),
                    format!(
                        "{token} does not answer ERC20 balanceOf on {}",
                        chain.slug()
                    ),
                );
                continue;
            };
            let (decimals, symbol) = meta.unwrap_or_default();
            out.push(Balance {
                family: ChainFamily::Evm,
                chain_id: chain.chain_id(),
                address: wallet.address,
                asset: "erc20",
                token: Some(token.to_checksum(None)),
                raw,
                decimals: decimals.map_or(0, u32::from),
                symbol: symbol
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

    /// The decimals and symbol of `asset` (`native`, an ERC20 address or an SPL mint) on
    /// chain `slug` of `chains` when known without a chain read: the native coin's from the registry, a
    /// token's from what an earlier balance read learned. Pages show amounts with them.
    pub fn known_units_on(
        &self,
        chains: &walletops_chains::Registry,
        slug: &str,
        asset: &str,
    ) -> Option<(u32, String)> {
        self.known_units(chains.resolve(slug).ok()?, asset)
    }

    /// `known_units` of `asset` on `chain`.
    pub fn known_units(&self, chain: &Chain, asset: &str) -> Option<(u32, String)> {
        if asset.eq_ignore_ascii_case("native") {
            return Some((chain.native_decimals(), chain.native_symbol().to_owned()));
        }
        match chain.family() {
            ChainFamily::Evm => {
                let token: Address = asset.parse().ok()?;
                let known = self
                    .erc20_meta
                    .read()
                    .unwrap_or_else(PoisonError::into_inner);
                let (decimals, symbol) = known.get(chain.slug())?.get(&token)?.clone();
                Some((u32::from(decimals?), symbol.filter(|s| !s.is_empty())?))
            }
            ChainFamily::Solana => {
                let mint: Pubkey = asset.parse().ok()?;
                let info = self.mints.get(&(chain.slug().to_owned(), mint))?;
                Some((u32::from(info.decimals), spl_symbol(&mint)))
            }
        }
    }

    /// Adds `learned` token metadata to `chain`'s table.
    fn remember_meta(&self, chain: &str, learned: Vec<(Address, Meta)>) {
        if learned.is_empty() {
            return;
        }
        let mut known = self
            .erc20_meta
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let table = known.entry(chain.to_owned()).or_default();
        if table.len() + learned.len() > MAX_META {
            table.clear();
        }
        table.extend(learned);
    }

    /// Files the balances just `read` at `at` as the owner's book, beside what its `old` book
    /// holds that is still fresh. Two reads racing for one owner may each drop the other's
    /// entries: the cost is a later chain read, never a wrong answer.
    fn file(&self, key: OwnerKey, old: Option<Arc<Book>>, read: Book, at: DateTime<Utc>) {
        let mut book = read;
        if let Some(old) = old
            && old.len() + book.len() <= MAX_BOOK
        {
            for (token, entry) in old.iter() {
                if at - entry.1 < chrono_ttl(TOKEN_TTL) {
                    book.entry(*token).or_insert(*entry);
                }
            }
        }
        self.tokens.insert(key, Arc::new(book));
    }

    async fn read_solana(
        &self,
        chain: &Chain,
        wallet: &Wallet,
        owner: Pubkey,
        tokens: &[WalletAddress],
        include_zero: bool,
        fresh: bool,
    ) -> Result<Vec<Balance>> {
        let client = self.solana.get(chain);
        let key = (chain.slug().to_owned(), wallet.address);
        let native = match self.native.get(&key).filter(|_| !fresh) {
            Some(hit) => hit,
            None => {
                let read = (
                    U256::from(client.balance(&owner).await?),
                    crate::clock::now(),
                );
                self.native.insert(key.clone(), read);
                read
            }
        };
        let (holdings, held_at) = match self.holdings.get(&key).filter(|_| !fresh) {
            Some(hit) => hit,
            None => {
                let read = (client.holdings(&owner).await?, crate::clock::now());
                self.holdings.insert(key.clone(), read.clone());
                read
            }
        };
        let entry = |mint: &Pubkey, amount: u64, decimals: u8| Balance {
            family: ChainFamily::Solana,
            chain_id: chain.chain_id(),
            address: wallet.address,
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
            let wanted: Vec<Pubkey> = tokens.iter().filter_map(WalletAddress::solana).collect();
            // Decimals of requested mints the wallet does not hold come from the mints.
            let key = |mint: &Pubkey| (chain.slug().to_owned(), *mint);
            let unknown: Vec<Pubkey> = wanted
                .iter()
                .filter(|m| {
                    !holdings.iter().any(|h| h.mint == **m) && !self.mints.contains_key(&key(m))
                })
                .copied()
                .collect();
            for (mint, info) in unknown.iter().zip(client.mints(&unknown).await?) {
                if let Some(info) = info {
                    self.mints.insert(key(mint), info);
                }
            }
            let mut bad = Violations::default();
            for (i, mint) in wanted.iter().enumerate() {
                match holdings.iter().find(|h| h.mint == *mint) {
                    Some(h) => out.push(entry(mint, h.amount, h.decimals)),
                    None => match self.mints.get(&key(mint)) {
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

/// The decimals and symbols known without a chain read (`Balances::known_units`), by chain
/// slug: what an answer needs to give amounts in whole units.
#[derive(Debug, Clone)]
pub struct Units {
    chains: std::sync::Arc<walletops_chains::Registry>,
    balances: Balances,
}

impl Units {
    /// The units `balances` knows of the chains of `chains`.
    pub fn new(chains: std::sync::Arc<walletops_chains::Registry>, balances: Balances) -> Self {
        Self { chains, balances }
    }

    /// The chains whose units these are.
    pub fn chains(&self) -> &walletops_chains::Registry {
        &self.chains
    }

    /// The decimals and symbol of `asset` on chain `slug`, when known.
    pub fn of(&self, slug: &str, asset: &str) -> Option<(u32, String)> {
        self.balances.known_units_on(&self.chains, slug, asset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balances() -> Balances {
        Balances::new(Arc::default(), Arc::default())
    }

    fn token(n: u8) -> Address {
        Address::repeat_byte(n)
    }

    fn key() -> OwnerKey {
        ("anvil".to_owned(), Address::repeat_byte(0xee))
    }

    /// Files `read` at `now` beside what the owner's book holds, as a read does.
    fn file_read(b: &Balances, read: Book, now: DateTime<Utc>) {
        b.file(key(), b.tokens.get(&key()), read, now);
    }

    #[test]
    fn a_read_keeps_the_fresh_balances_of_earlier_reads_and_drops_stale_ones() {
        let b = balances();
        let now = crate::clock::now();
        let stale = now - chrono_ttl(TOKEN_TTL) - chrono::Duration::seconds(1);
        file_read(
            &b,
            HashMap::from([
                (token(1), (U256::from(1), now)),
                (token(2), (U256::from(2), stale)),
            ]),
            now,
        );
        file_read(&b, HashMap::from([(token(3), (U256::from(3), now))]), now);
        let book = b.tokens.get(&key()).expect("a book");
        assert_eq!(book.get(&token(1)), Some(&(U256::from(1), now)));
        assert_eq!(book.get(&token(2)), None, "stale entries are dropped");
        assert_eq!(book.get(&token(3)), Some(&(U256::from(3), now)));
    }

    #[test]
    fn a_full_book_keeps_only_the_latest_read() {
        let b = balances();
        let now = crate::clock::now();
        let many: Book = (0..MAX_BOOK)
            .map(|i| {
                (
                    Address::left_padding_from(&i.to_be_bytes()),
                    (U256::from(i), now),
                )
            })
            .collect();
        b.file(key(), None, many, now);
        file_read(
            &b,
            HashMap::from([(token(0xab), (U256::from(7), now))]),
            now,
        );
        let book = b.tokens.get(&key()).expect("a book");
        assert_eq!(book.len(), 1);
        assert_eq!(book.get(&token(0xab)), Some(&(U256::from(7), now)));
    }

    #[test]
    fn metadata_is_kept_per_chain_and_bounded() {
        let b = balances();
        b.remember_meta(
            "anvil",
            vec![(token(1), (Some(6), Some("USDC".to_owned())))],
        );
        b.remember_meta("base", vec![(token(1), (Some(18), None))]);
        let known = b.erc20_meta.read().expect("lock");
        assert_eq!(
            known["anvil"][&token(1)],
            (Some(6), Some("USDC".to_owned()))
        );
        assert_eq!(known["base"][&token(1)], (Some(18), None));
        drop(known);
        let full: Vec<(Address, Meta)> = (0..MAX_META)
            .map(|i| {
                (
                    Address::left_padding_from(&i.to_be_bytes()),
                    (Some(1), None),
                )
            })
            .collect();
        b.remember_meta("anvil", full);
        b.remember_meta("anvil", vec![(token(0xab), (Some(2), None))]);
        let known = b.erc20_meta.read().expect("lock");
        assert_eq!(known["anvil"].len(), 1, "a full table starts over");
        assert_eq!(known["base"].len(), 1);
    }

    #[test]
    fn units_are_known_for_native_coins_and_read_tokens() {
        let b = balances();
        let chains = walletops_chains::Registry::new(&Default::default()).expect("chains");
        let base = chains.resolve("base").expect("base");
        assert_eq!(b.known_units(base, "native"), Some((18, "ETH".to_owned())));
        let address = format!("{:#x}", token(1));
        assert_eq!(b.known_units(base, &address), None, "not read yet");
        b.remember_meta("base", vec![(token(1), (Some(6), Some("USDC".to_owned())))]);
        assert_eq!(b.known_units(base, &address), Some((6, "USDC".to_owned())));
        let solana = chains.resolve("solana").expect("solana");
        assert_eq!(b.known_units(solana, "native"), Some((9, "SOL".to_owned())));
        assert_eq!(b.known_units(solana, "not a mint"), None);
    }
}
