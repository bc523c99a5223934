//! The reads: wallet listings, balances and transaction lookups.

use std::{collections::HashMap, str::FromStr};

use uuid::Uuid;
use walletops_proto::v1 as pb;

use super::{chain, non_empty, optional_address};
use crate::{
    chains::{Chain, Registry},
    domain::{ChainFamily, WalletAddress, WalletFilter},
    error::{Result, Violations, WalletOpsError},
};

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
