//! `CreatePayout`: every item checked as a send of its own is, each violation named with the
//! item's place (`items[3].to`), all in one INVALID_INPUT, before anything is stored.

use walletops_proto::v1 as pb;

use super::{SendRequest, non_empty};
use crate::{
    chains::Registry,
    error::{FieldViolation, Result, WalletOpsError},
};

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
