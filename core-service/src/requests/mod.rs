//! Requests parsed once: each proto message becomes a typed request (chains resolved,
//! addresses as alloy `Address` / Solana `Pubkey`, amounts as integers, enums) before
//! anything acts on it. Every bad field of a request is gathered into one `INVALID_INPUT`
//! naming them all; code past this module never parses a request's text again.

mod approvals;
pub mod calldata;
pub mod deposits;
pub mod keys;
pub mod limits;
pub mod payouts;
mod reads;
mod trade;
mod webhooks;
mod writes;

pub use crate::events::WatchRequest;
pub use crate::webhooks::{DeliveriesRequest, NewWebhook, ReplayRequest};
pub use approvals::{
    DecideRequest, MAX_REASON_CHARS, approval_id, approval_state, approval_state_named,
};
pub use reads::{BalancesRequest, ListTransactionsRequest, ListWalletsRequest, TransactionRequest};
pub use trade::{QuoteRequest, SwapRequest, TradePair};
pub use webhooks::webhook_id;
pub use writes::{ApproveRequest, CallRequest, SendRequest, Transfer};

use crate::error::{Result, Violations, WalletOpsError};

use walletops_chains::{Chain, Registry};
use walletops_domain::{ChainFamily, WalletAddress};

/// An optional field's value; empty counts as absent (proto3 cannot tell them apart for a
/// client that sets every field).
/// Rows per page of a list when the request says none.
const DEFAULT_PAGE_SIZE: u64 = 50;
/// Most rows per page of a list.
const MAX_PAGE_SIZE: u64 = 500;

/// A list's `page_size`: 0 is the default, more than the most is a violation.
pub(crate) fn page_size(v: &mut crate::error::Violations, requested: u32) -> u64 {
    match u64::from(requested) {
        0 => DEFAULT_PAGE_SIZE,
        n if n > MAX_PAGE_SIZE => {
            v.push("page_size", format!("must be 1 to {MAX_PAGE_SIZE}"));
            DEFAULT_PAGE_SIZE
        }
        n => n,
    }
}

pub(crate) fn non_empty(v: Option<&String>) -> Option<&str> {
    v.map(String::as_str).filter(|s| !s.is_empty())
}

/// An address of either family in field `field` (the admin API names wallets this way).
pub fn any_address(raw: &str, field: &str) -> Result<WalletAddress> {
    raw.parse::<WalletAddress>()
        .map_err(|e| WalletOpsError::invalid(field, e))
}

/// The chain named by a request's `chain` field.
pub(crate) fn chain<'a>(chains: &'a Registry, slug: &str) -> Result<&'a Chain> {
    if slug.is_empty() {
        return Err(WalletOpsError::invalid("chain", "required: a chain slug"));
    }
    Ok(chains.resolve(slug)?)
}

/// The chain of an EVM-only request: a Solana slug is `INVALID_INPUT` on `chain`.
fn evm_chain<'a>(chains: &'a Registry, slug: &str) -> Result<&'a Chain> {
    let chain = chain(chains, slug)?;
    if chain.family() != ChainFamily::Evm {
        return Err(WalletOpsError::invalid(
            "chain",
            format!(
                "{} is not an EVM chain; this operation is EVM only",
                chain.slug()
            ),
        ));
    }
    Ok(chain)
}

/// `parsed`, unless it is its family's zero address: no one holds its key, and what is sent
/// or granted there is lost.
fn not_zero(parsed: Result<WalletAddress, String>) -> Result<WalletAddress, String> {
    parsed.and_then(|a| {
        if a.is_zero() {
            Err(
                "must not be the zero address: no one holds its key, and what goes there is lost"
                    .to_owned(),
            )
        } else {
            Ok(a)
        }
    })
}

/// The wallet an optional field names, parsed for `family`; absent or empty: `None`.
fn optional_address(
    v: &mut Violations,
    family: ChainFamily,
    field: &str,
    raw: Option<&String>,
) -> Option<WalletAddress> {
    non_empty(raw).and_then(|raw| v.check(field, family.parse_address(raw)))
}
