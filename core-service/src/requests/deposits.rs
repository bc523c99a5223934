//! The deposit reads: a filtered page, one deposit, a watch.

use std::str::FromStr;

use uuid::Uuid;
use walletops_proto::v1 as pb;

use super::non_empty;
use crate::{
    deposits::{ListRequest, PageToken, WalletRef},
    error::{Result, Violations, WalletOpsError},
};
use walletops_chains::Registry;
use walletops_domain::{DepositState, WalletAddress};
use walletops_store::DepositFilter;

/// `ListDeposits`, parsed.
pub fn list(chains: &Registry, req: &pb::ListDepositsRequest) -> Result<ListRequest> {
    let mut v = Violations::default();
    let chain = non_empty(req.chain.as_ref()).and_then(|slug| {
        let chain = chains.resolve(slug).map_err(|e| e.to_string());
        v.check("chain", chain.map(|c| c.slug().to_owned()))
    });
    let wallet = non_empty(req.wallet.as_ref()).and_then(|raw| {
        let wallet = Uuid::from_str(raw).map(WalletRef::Id).or_else(|_| {
            raw.parse::<WalletAddress>()
                .map(WalletRef::Address)
                .map_err(|_| "must be a wallet id or address".to_owned())
        });
        v.check("wallet", wallet)
    });
    let state = match pb::DepositState::try_from(req.state) {
        Ok(pb::DepositState::Unspecified) => None,
        Ok(pb::DepositState::Pending) => Some(DepositState::Pending),
        Ok(pb::DepositState::Confirmed) => Some(DepositState::Confirmed),
        Ok(pb::DepositState::Reverted) => Some(DepositState::Reverted),
        Ok(pb::DepositState::Ignored) => Some(DepositState::Ignored),
        Err(_) => {
            v.push("state", "unknown state");
            None
        }
    };
    let since = req.since.and_then(|ts| {
        let at = chrono::DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or(0))
            .ok_or_else(|| "must be a time".to_owned());
        v.check("since", at)
    });
    let page_size = super::page_size(&mut v, req.page_size);
    let page = non_empty(req.page_token.as_ref()).and_then(|raw| {
        let token =
            PageToken::parse(raw).ok_or_else(|| "not a page token this service gave".to_owned());
        v.check("page_token", token)
    });
    v.finish()?;
    let filter = DepositFilter {
        chain,
        state,
        since,
        ..DepositFilter::default()
    };
    Ok(ListRequest {
        filter,
        wallet,
        page,
        page_size,
    })
}

/// `GetDeposit`'s id.
pub fn deposit_id(req: &pb::GetDepositRequest) -> Result<Uuid> {
    Uuid::from_str(req.id.trim())
        .map_err(|_| WalletOpsError::invalid("id", "must be a deposit id (a UUID)"))
}

/// `WatchDeposits`: the chain (slug) and the event to resume after.
pub fn watch(
    chains: &Registry,
    req: &pb::WatchDepositsRequest,
) -> Result<(Option<String>, Option<u64>)> {
    let chain = match non_empty(req.chain.as_ref()) {
        Some(slug) => Some(
            chains
                .resolve(slug)
                .map_err(|e| WalletOpsError::invalid("chain", e.to_string()))?
                .slug()
                .to_owned(),
        ),
        None => None,
    };
    Ok((chain, req.after_event_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_field_is_named() {
        let chains = Registry::new(&Default::default()).expect("chains");
        let err = list(
            &chains,
            &pb::ListDepositsRequest {
                chain: Some("nowhere".to_owned()),
                wallet: Some("nobody".to_owned()),
                page_size: 501,
                page_token: Some("x".to_owned()),
                ..Default::default()
            },
        )
        .expect_err("refused")
        .to_string();
        for field in ["chain", "wallet", "page_size", "page_token"] {
            assert!(err.contains(field), "{field} not named: {err}");
        }
        let ok = list(&chains, &pb::ListDepositsRequest::default()).expect("parsed");
        assert_eq!(ok.page_size, 50);
        assert!(ok.wallet.is_none());
    }
}
