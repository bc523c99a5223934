//! The reads: wallet listings, balances and transaction lookups.

use std::{collections::HashMap, str::FromStr};

use uuid::Uuid;
use walletops_proto::v1 as pb;

use super::{chain, non_empty, optional_address};
use crate::{
    error::{Result, Violations, WalletOpsError},
    events::WatchRequest,
};
use walletops_chains::{Chain, Registry};
use walletops_domain::{ChainFamily, TxStatus, WalletAddress, WalletFilter};

/// Most `tokens` one balance read may name.
const MAX_BALANCE_TOKENS: usize = 50;

/// `GET /wallets`: which of the caller's wallets to list.
#[derive(Debug, Clone, Copy)]
pub struct ListWalletsRequest {
    /// The filters.
    pub filter: WalletFilter,
}

impl ListWalletsRequest {
    /// Parses `req`.
    pub fn parse(req: &pb::ListWalletsRequest) -> Result<Self> {
        let family = non_empty(req.chain.as_ref())
            .map(|raw| {
                raw.parse::<ChainFamily>()
                    .map_err(|e| WalletOpsError::invalid("chain", e))
            })
            .transpose()?;
        Ok(Self {
            filter: WalletFilter {
                family,
                default_only: req.default_only.unwrap_or(false),
                automation_only: req.automation_only.unwrap_or(false),
            },
        })
    }
}

/// `GET /wallets/balances` and `GET /wallets/{address}/balances`.
#[derive(Debug, Clone)]
pub struct BalancesRequest<'a> {
    /// The chain read.
    pub chain: &'a Chain,
    /// The wallet; `None`: the caller's default for the chain's family.
    pub address: Option<WalletAddress>,
    /// Tokens to read (ERC20 addresses or SPL mints), each once.
    pub tokens: Vec<WalletAddress>,
    /// Zero balances too.
    pub include_zero: bool,
    /// Straight from the chain, past the cache.
    pub fresh: bool,
}

impl<'a> BalancesRequest<'a> {
    /// Parses `req` against `chains`.
    pub fn parse(chains: &'a Registry, req: &pb::GetBalancesRequest) -> Result<Self> {
        let chain = chain(chains, &req.chain)?;
        let family = chain.family();
        let mut v = Violations::default();
        if req.tokens.len() > MAX_BALANCE_TOKENS {
            v.push(
                "tokens",
                format!(
                    "at most {MAX_BALANCE_TOKENS} entries, got {}",
                    req.tokens.len()
                ),
            );
        }
        // A token named twice (in two spellings, say) would be answered twice.
        let mut seen = HashMap::new();
        let tokens: Vec<WalletAddress> = req
            .tokens
            .iter()
            .take(MAX_BALANCE_TOKENS)
            .enumerate()
            .filter_map(|(i, t)| {
                let field = format!("tokens[{i}]");
                let token = v.check(&field, family.parse_address(t))?;
                match seen.insert(token, i) {
                    Some(earlier) => {
                        v.push(&field, format!("repeats tokens[{earlier}]"));
                        None
                    }
                    None => Some(token),
                }
            })
            .collect();
        let address = optional_address(&mut v, family, "address", req.address.as_ref());
        v.conclude(Some(Self {
            chain,
            address,
            tokens,
            include_zero: req.include_zero.unwrap_or(false),
            fresh: req.fresh.unwrap_or(false),
        }))
    }
}

/// `GET /tx/{id}`.
#[derive(Debug, Clone, Copy)]
pub struct TransactionRequest {
    /// The transaction's id.
    pub id: Uuid,
}

impl TransactionRequest {
    /// Parses `req`.
    pub fn parse(req: &pb::GetTransactionRequest) -> Result<Self> {
        Uuid::from_str(req.id.trim())
            .map(|id| Self { id })
            .map_err(|_| WalletOpsError::invalid("id", "must be a transaction id (a UUID)"))
    }
}

impl WatchRequest {
    /// Parses `req`, every bad field in one `INVALID_INPUT`.
    pub fn parse(chains: &Registry, req: &pb::WatchTransactionsRequest) -> Result<Self> {
        let mut v = Violations::default();
        let transaction_id = super::non_empty(req.transaction_id.as_ref()).and_then(|id| {
            let id = Uuid::from_str(id).map_err(|_| "must be a transaction id (a UUID)".to_owned());
            v.check("transaction_id", id)
        });
        let chain = super::non_empty(req.chain.as_ref()).and_then(|slug| {
            let chain = chains.resolve(slug).map_err(|e| e.to_string());
            v.check("chain", chain.map(|c| c.slug().to_owned()))
        });
        v.finish()?;
        Ok(Self {
            transaction_id,
            chain,
            after: req.after_event_id,
        })
    }
}

/// `ListTransactions`: a page of the caller's records.
#[derive(Debug, Clone)]
pub struct ListTransactionsRequest {
    /// Only this chain.
    pub chain: Option<String>,
    /// Only this status.
    pub status: Option<TxStatus>,
    /// Records per page.
    pub page_size: u64,
    /// Records older than this one (the last of the page before).
    pub before: Option<Uuid>,
}

/// Records per page when the request says none.
const DEFAULT_PAGE_SIZE: u64 = 25;
/// Most records per page.
const MAX_PAGE_SIZE: u64 = 100;

impl ListTransactionsRequest {
    /// Parses `req`, every bad field in one `INVALID_INPUT`.
    pub fn parse(chains: &Registry, req: &pb::ListTransactionsRequest) -> Result<Self> {
        let mut v = Violations::default();
        let chain = super::non_empty(req.chain.as_ref()).and_then(|slug| {
            let chain = chains.resolve(slug).map_err(|e| e.to_string());
            v.check("chain", chain.map(|c| c.slug().to_owned()))
        });
        let status = match req.status.map(pb::TransactionStatus::try_from) {
            None | Some(Ok(pb::TransactionStatus::Unspecified)) => None,
            Some(Ok(s)) => Some(tx_status(s)),
            Some(Err(_)) => {
                v.push("status", "unknown status");
                None
            }
        };
        let page_size = match u64::from(req.page_size) {
            0 => DEFAULT_PAGE_SIZE,
            n if n <= MAX_PAGE_SIZE => n,
            _ => {
                v.push("page_size", format!("must be 1 to {MAX_PAGE_SIZE}"));
                DEFAULT_PAGE_SIZE
            }
        };
        let before = match req.page_token.trim() {
            "" => None,
            token => v.check(
                "page_token",
                Uuid::from_str(token)
                    .map_err(|_| "must be a next_page_token the service gave".to_owned()),
            ),
        };
        v.finish()?;
        Ok(Self {
            chain,
            status,
            page_size,
            before,
        })
    }
}

fn tx_status(s: pb::TransactionStatus) -> TxStatus {
    match s {
        pb::TransactionStatus::Unspecified | pb::TransactionStatus::Submitted => {
            TxStatus::Submitted
        }
        pb::TransactionStatus::Confirmed => TxStatus::Confirmed,
        pb::TransactionStatus::Reverted => TxStatus::Reverted,
        pb::TransactionStatus::Failed => TxStatus::Failed,
        pb::TransactionStatus::Dropped => TxStatus::Dropped,
        pb::TransactionStatus::FeeCapped => TxStatus::FeeCapped,
    }
}
