//! A write parsed and its wallet resolved (steps 3 of the write path), then built and
//! simulated on its chain (step 4): shared by `Core::write` and the dry run, so a dry run
//! answers for exactly the transaction the write would sign.

use super::Write;
use crate::{
    Core,
    auth::Caller,
    chains::Chain,
    error::{Result, WalletOpsError},
    policy::Act,
    requests::{
        ApproveRequest, CallRequest, SendRequest, SwapRequest, WriteRequest, payouts::PackRequest,
    },
    transfers::Prepared,
};
use alloy::primitives::Selector;
use walletops_domain::{ChainFamily, DelegatedWallet, WalletAddress};

/// A write's request, parsed into typed values.
#[derive(Debug)]
enum Request {
    Send(SendRequest),
    Approve(ApproveRequest),
    Call(CallRequest),
    Swap(SwapRequest),
    Pack(PackRequest),
}

impl Request {
    fn parsed(&self) -> &dyn WriteRequest {
        match self {
            Self::Send(r) => r,
            Self::Approve(r) => r,
            Self::Call(r) => r,
            Self::Swap(r) => r,
            Self::Pack(r) => r,
        }
    }
}

/// A write parsed, its wallet resolved with its ownership, link and delegation checks.
#[derive(Debug)]
pub(super) struct Parsed {
    request: Request,
    /// The wallet it acts on.
    pub(super) wallet: DelegatedWallet,
}

impl Parsed {
    /// The chain it writes to.
    pub(super) fn chain(&self) -> &Chain {
        self.request.parsed().chain()
    }

    /// What it is, as key policies tell writes apart, built as `prepared`.
    pub(super) fn act(&self, prepared: &Prepared) -> Act {
        match &self.request {
            Request::Send(_) | Request::Approve(_) | Request::Pack(_) => Act::Transfer,
            Request::Call(r) => Act::Call {
                contract: WalletAddress::Evm(r.to),
                selector: r.input.get(..4).map(Selector::from_slice),
                holds_allowance: prepared.holds_allowance(),
                unexplained: prepared.unexplained().map(str::to_owned),
            },
            Request::Swap(r) => Act::Swap { bought: r.bought() },
        }
    }
}

impl Core {
    /// Parses every field of `write` (all violations in one INVALID_INPUT) and resolves the
    /// wallet it acts on for `caller`.
    /// `held_from`: the wallet an approved write resolved to when it was held, used in place
    /// of what its request names (the default wallet may have changed since).
    pub(super) async fn parse(
        &self,
        caller: &Caller,
        write: &Write,
        held_from: Option<&str>,
    ) -> Result<Parsed> {
        let chains = &*self.chains;
        let request = match write {
            Write::Send(m) => Request::Send(SendRequest::parse(chains, m)?),
            Write::Approve(m) => Request::Approve(ApproveRequest::parse(chains, m)?),
            Write::Call(m) => Request::Call(CallRequest::parse(chains, m)?),
            Write::Swap(m) => {
                let mut swap = SwapRequest::parse(chains, m)?;
                // An approved swap is judged after its quote's minute: its quote still binds.
                swap.quoted = self
                    .quotes
                    .named_by(caller, &swap, held_from.is_some())
                    .await?;
                Request::Swap(swap)
            }
            Write::Pack(m) => Request::Pack(PackRequest::parse(chains, m)?),
        };
        let parsed = request.parsed();
        let family = parsed.chain().family();
        let held = held_from
            .map(|a| family.parse_address(a))
            .transpose()
            .map_err(|e| {
                WalletOpsError::Internal(anyhow::anyhow!(
                    "a held write's wallet is unreadable: {e}"
                ))
            })?;
        let wallet = self
            .wallets
            .resolve_delegated(
                caller.user_id,
                family,
                held.as_ref().or(parsed.from()),
                "from",
            )
            .await?;
        Ok(Parsed { request, wallet })
    }

    /// Builds `parsed` on its chain and simulates it for `caller`, reading the wallet's
    /// state around it where `caller`'s limits need it: nothing is signed.
    pub(super) async fn build(&self, caller: &Caller, parsed: &Parsed) -> Result<Prepared> {
        let wallet = &parsed.wallet;
        let watch = match parsed.chain().family() {
            ChainFamily::Evm => self.policy.watched(caller, parsed.chain()).await?,
            ChainFamily::Solana => None,
        };
        let watch = watch.as_deref();
        match &parsed.request {
            Request::Send(r) => self.transfers.prepare_send(r, wallet, watch).await,
            Request::Approve(r) => self.transfers.prepare_approve(r, wallet, watch).await,
            Request::Call(r) => self.transfers.prepare_call(r, wallet, watch).await,
            Request::Swap(r) => self.swaps.prepare(r, wallet, watch).await,
            Request::Pack(r) => self.transfers.prepare_pack(r, wallet).await,
        }
    }
}
