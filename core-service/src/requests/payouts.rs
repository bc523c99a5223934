//! `CreatePayout`: every item checked as a send of its own is, each violation named with the
//! item's place (`items[3].to`), all in one INVALID_INPUT, before anything is stored.

use walletops_proto::v1 as pb;

use solana_pubkey::Pubkey;

use super::{SendRequest, Transfer, non_empty};
use crate::error::{FieldViolation, Result, Violations, WalletOpsError};
use walletops_chains::{Chain, Registry};
use walletops_domain::{PayoutState, WalletAddress};
use walletops_store::PayoutFilter;

/// Most items one payout may hold.
pub const MAX_ITEMS: usize = 1000;
/// Longest `reference`, in characters.
const MAX_REFERENCE: usize = 200;

/// A payout's items, each parsed as a send, with the send each one becomes.
#[derive(Debug, Clone)]
pub struct PayoutRequest {
    /// Each item's send, as made (chain and wallet filled in), and as parsed.
    pub items: Vec<(pb::SendRequest, SendRequest, Option<String>)>,
}

impl PayoutRequest {
    /// Parses `req`, every bad field of every item in one `INVALID_INPUT`.
    pub fn parse(chains: &Registry, req: &pb::CreatePayoutRequest) -> Result<Self> {
        let chain = super::chain(chains, &req.chain)?;
        if req.items.is_empty() || req.items.len() > MAX_ITEMS {
            return Err(WalletOpsError::invalid(
                "items",
                format!("must hold 1 to {MAX_ITEMS} items, not {}", req.items.len()),
            ));
        }
        let mut bad: Vec<FieldViolation> = Vec::new();
        let mut items = Vec::with_capacity(req.items.len());
        for (i, item) in req.items.iter().enumerate() {
            let send = pb::SendRequest {
                chain: chain.slug().to_owned(),
                from: non_empty(req.from.as_ref()).map(str::to_owned),
                to: item.to.clone(),
                asset: item.asset,
                token: item.token.clone(),
                amount: item.amount.clone(),
            };
            let reference = non_empty(item.reference.as_ref()).map(str::to_owned);
            if reference.as_ref().is_some_and(|r| {
                r.chars().count() > MAX_REFERENCE || r.chars().any(char::is_control)
            }) {
                bad.push(FieldViolation::new(
                    format!("items[{i}].reference"),
                    format!("at most {MAX_REFERENCE} characters, no control characters"),
                ));
            }
            match SendRequest::parse(chains, &send) {
                Ok(parsed) => items.push((send, parsed, reference)),
                Err(WalletOpsError::InvalidInput(violations)) => {
                    bad.extend(violations.into_iter().map(|v| {
                        let field = if v.field == "from" {
                            v.field
                        } else {
                            format!("items[{i}].{}", v.field)
                        };
                        FieldViolation::new(field, v.description)
                    }));
                }
                Err(other) => return Err(other),
            }
        }
        if !bad.is_empty() {
            // The wallet is the payout's, named once.
            let mut named = false;
            bad.retain(|v| v.field != "from" || !std::mem::replace(&mut named, true));
            return Err(WalletOpsError::InvalidInput(bad));
        }
        Ok(Self { items })
    }
}

/// One recipient of a Solana transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leg {
    /// The recipient (the owner, for SPL).
    pub to: Pubkey,
    /// Lamports or token base units.
    pub amount: u64,
}

/// A payout's items of one asset paid in one Solana transaction (a pack), as the runner
/// asks for it: the items' sends, parsed.
#[derive(Debug, Clone)]
pub struct PackRequest {
    /// The chain.
    pub chain: Chain,
    /// The paying wallet.
    pub from: Option<WalletAddress>,
    /// The mint; `None`: SOL.
    pub mint: Option<Pubkey>,
    /// Each recipient and its amount.
    pub legs: Vec<Leg>,
}

impl PackRequest {
    /// The pack of `transfers` on `chain` from `from`: Solana transfers, all of one asset
    /// (as the payout packed them when it was checked).
    pub fn of(chain: Chain, from: Option<WalletAddress>, transfers: &[Transfer]) -> Result<Self> {
        let mut mint = None;
        let mut legs = Vec::with_capacity(transfers.len());
        for (i, transfer) in transfers.iter().enumerate() {
            let Transfer::Solana {
                to,
                mint: m,
                amount,
            } = *transfer
            else {
                return Err(WalletOpsError::invalid(
                    "chain",
                    "items are packed in one transaction only on Solana",
                ));
            };
            if i == 0 {
                mint = m;
            } else if m != mint {
                return Err(WalletOpsError::InvalidInput(vec![FieldViolation::new(
                    format!("items[{i}].token"),
                    "the items of one transaction move one asset",
                )]));
            }
            legs.push(Leg { to, amount });
        }
        Ok(Self {
            chain,
            from,
            mint,
            legs,
        })
    }
}

/// `ListPayouts`, parsed: the filter and the page size.
pub fn list(chains: &Registry, req: &pb::ListPayoutsRequest) -> Result<(PayoutFilter, u64)> {
    let mut v = Violations::default();
    let chain = non_empty(req.chain.as_ref()).and_then(|slug| {
        let chain = chains.resolve(slug).map_err(|e| e.to_string());
        v.check("chain", chain.map(|c| c.slug().to_owned()))
    });
    let state = match pb::PayoutState::try_from(req.state) {
        Ok(pb::PayoutState::Unspecified) => None,
        Ok(pb::PayoutState::Running) => Some(PayoutState::Running),
        Ok(pb::PayoutState::Completed) => Some(PayoutState::Completed),
        Err(_) => {
            v.push("state", "unknown state");
            None
        }
    };
    let page_size = super::page_size(&mut v, req.page_size);
    let before = non_empty(req.page_token.as_ref()).and_then(|raw| {
        let id = raw
            .parse::<uuid::Uuid>()
            .map_err(|_| "not a page token this service gave".to_owned());
        v.check("page_token", id)
    });
    v.finish()?;
    Ok((
        PayoutFilter {
            chain,
            state,
            before,
        },
        page_size,
    ))
}
