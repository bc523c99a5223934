//! Deposits: money that arrives at the users' wallets from outside. The scanner
//! (`scanner.rs`) finds each credit on the chains whose `deposits` switch is on (`evm.rs`,
//! `solana.rs`) and records it once, under an id derived from where it happened, announcing
//! each change of state through the event outbox (webhooks and watchers); this room also
//! answers the callers' lists, lookups and watches.

mod evm;
mod scanner;
mod solana;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use alloy::primitives::U256;

use crate::{
    error::{Result, WalletOpsError},
    events::{Recheck, Watch, WatchLimits, watch_events},
};

use walletops_chains::Chain;
use walletops_domain::{Deposit, DepositState, Wallet, WalletAddress};
use walletops_store::{DepositEvent, DepositFilter, Store};

pub use scanner::Scanner;

/// A credit a scan found to a wallet, before it is a deposit.
pub(super) struct Found<'a> {
    chain: &'a Chain,
    wallet: &'a Wallet,
    /// The transaction, in its one spelling.
    tx: String,
    /// `native`, or the token, in its one spelling.
    asset: String,
    amount: U256,
    from: Option<String>,
    block: u64,
    block_hash: Option<String>,
    /// Its rank among the transaction's credits of the asset to the wallet.
    rank: u32,
}

impl Found<'_> {
    /// The deposit, pending, or ignored when the chain's settings say so.
    fn deposit(self, at: DateTime<Utc>) -> Deposit {
        let ignored_reason = self
            .chain
            .deposits()
            .and_then(|s| s.ignored(&self.asset, self.amount));
        let address = self.wallet.address.to_string();
        let spelled = match self.wallet.address {
            WalletAddress::Evm(a) => format!("{a:#x}"),
            WalletAddress::Solana(p) => p.to_string(),
        };
        Deposit {
            id: Deposit::id_of(
                self.chain.slug(),
                &self.tx,
                &self.asset,
                &spelled,
                self.rank,
            ),
            user_id: self.wallet.user_id,
            wallet_id: self.wallet.id,
            chain: self.chain.slug().to_owned(),
            address,
            tx_hash: self.tx,
            asset: self.asset,
            amount: self.amount.to_string(),
            from: self.from,
            block: self.block,
            block_hash: self.block_hash,
            state: if ignored_reason.is_some() {
                DepositState::Ignored
            } else {
                DepositState::Pending
            },
            ignored_reason,
            created_at: at,
            updated_at: at,
        }
    }
}

/// Events read at once for a watcher.
const WATCH_BATCH: u64 = 100;

/// The callers' side of deposits.
#[derive(Debug, Clone)]
pub struct Deposits {
    store: Store,
}

/// Where a page of deposits ends: the last one's first-seen time and id, as
/// `next_page_token` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageToken {
    at: DateTime<Utc>,
    id: Uuid,
}

impl PageToken {
    /// The token after `d`.
    pub fn after(d: &Deposit) -> Self {
        Self {
            at: d.created_at,
            id: d.id,
        }
    }

    /// The token spelled `text`; `None`: not one this service gave.
    pub fn parse(text: &str) -> Option<Self> {
        let (micros, id) = text.split_once('.')?;
        Some(Self {
            at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
            id: id.parse().ok()?,
        })
    }
}

impl std::fmt::Display for PageToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.at.timestamp_micros(), self.id)
    }
}

/// The wallet a deposit list is narrowed to: by id or by address.
#[derive(Debug, Clone)]
pub enum WalletRef {
    /// Its id.
    Id(Uuid),
    /// Its address.
    Address(WalletAddress),
}

/// `ListDeposits`, parsed.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    /// Which deposits.
    pub filter: DepositFilter,
    /// The wallet named, if any: the caller's own, or the list is empty.
    pub wallet: Option<WalletRef>,
    /// After which.
    pub page: Option<PageToken>,
    /// How many, 1 to 500.
    pub page_size: u64,
}

/// One event for a deposit watcher: the change, and the deposit in that state.
pub type WatchedDeposit = (DepositEvent, Deposit);

impl Deposits {
    /// Deposits kept in `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// A page of `user_id`'s deposits, newest first, and the token of the next page.
    pub async fn list(
        &self,
        user_id: Uuid,
        req: ListRequest,
    ) -> Result<(Vec<Deposit>, Option<PageToken>)> {
        let mut filter = req.filter;
        if let Some(wallet) = req.wallet {
            let found = match wallet {
                WalletRef::Id(id) => self.store.wallet_by_id(id).await?,
                WalletRef::Address(address) => self.store.find_wallet(&address).await?,
            };
            // Another user's wallet lists nothing, as an unknown one does.
            filter.wallet_id = Some(
                found
                    .filter(|w| w.user_id == user_id)
                    .map_or_else(Uuid::nil, |w| w.id),
            );
        }
        filter.before = req.page.map(|p| (p.at, p.id));
        let mut page = self
            .store
            .list_deposits(user_id, &filter, req.page_size + 1)
            .await?;
        let more = page.len() as u64 > req.page_size;
        page.truncate(usize::try_from(req.page_size).unwrap_or(usize::MAX));
        let next = more.then(|| page.last().map(PageToken::after)).flatten();
        Ok((page, next))
    }

    /// `user_id`'s deposit `id`.
    pub async fn get(&self, user_id: Uuid, id: Uuid) -> Result<Deposit> {
        self.store
            .get_deposit(user_id, id)
            .await?
            .ok_or_else(|| WalletOpsError::NotFound(format!("deposit {id}")))
    }

    /// Streams the changes of `user_id`'s deposits (of `chain`, when given) after event
    /// `after` (`None`: from now on), each with the deposit in the state it entered, under
    /// `limits` and `recheck` (see `events::watch`).
    pub fn watch(
        &self,
        user_id: Uuid,
        (chain, after): (Option<String>, Option<u64>),
        limits: WatchLimits,
        recheck: Recheck,
    ) -> Watch<WatchedDeposit> {
        let reader = self.store.clone();
        watch_events(self.store.clone(), after, (limits, recheck), move |after| {
            let (store, chain) = (reader.clone(), chain.clone());
            async move {
                let events = store
                    .deposit_events_after(user_id, after, chain.as_deref(), WATCH_BATCH)
                    .await?;
                let last = events.last().map(|e| e.seq);
                let ids: Vec<Uuid> = events.iter().map(|e| e.deposit_id).collect();
                let found = store.deposits_by_id(store.db(), &ids).await?;
                let page = events
                    .into_iter()
                    .filter_map(|e| {
                        let mut d = found.iter().find(|d| d.id == e.deposit_id)?.clone();
                        d.state = e.state;
                        Some((e.seq, (e, d)))
                    })
                    .collect();
                Ok((last, page))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_read_back() {
        let t = PageToken {
            at: DateTime::from_timestamp_micros(1_795_400_119_123_456).expect("time"),
            id: Uuid::now_v7(),
        };
        assert_eq!(PageToken::parse(&t.to_string()), Some(t));
        assert_eq!(PageToken::parse("nope"), None);
    }
}
