//! A write parsed and its wallet resolved (steps 3 of the write path), then built and
//! simulated on its chain (step 4): shared by `Core::write` and the dry run, so a dry run
//! answers for exactly the transaction the write would sign. What differs by kind is the
//! kind's own (`kinds`).

use super::{
    Write,
    kinds::{Makers, ParsedWrite},
};
use crate::{
    Core,
    auth::Caller,
    error::{Result, WalletOpsError},
    policy::Act,
    transfers::Prepared,
};
use walletops_chains::Chain;
use walletops_domain::{ChainFamily, DelegatedWallet};

/// A write parsed, its wallet resolved with its ownership, link and delegation checks.
#[derive(Debug)]
pub(super) struct Parsed {
    request: Box<dyn ParsedWrite>,
    /// The wallet it acts on.
    pub(super) wallet: DelegatedWallet,
}

impl Parsed {
    /// The chain it writes to.
    pub(super) fn chain(&self) -> &Chain {
        self.request.chain()
    }

    /// What it is, as key policies tell writes apart, built as `prepared`.
    pub(super) fn act(&self, prepared: &Prepared) -> Act {
        self.request.act(prepared)
    }
}

impl Core {
    /// What the write kinds use of the core.
    fn makers(&self) -> Makers<'_> {
        Makers {
            chains: &self.chains,
            quotes: &self.quotes,
            transfers: &self.transfers,
            swaps: &self.swaps,
        }
    }

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
        let request = write
            .parse(self.makers(), caller, held_from.is_some())
            .await?;
        let family = request.chain().family();
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
                held.as_ref().or(request.from()),
                "from",
            )
            .await?;
        Ok(Parsed { request, wallet })
    }

    /// Builds `parsed` on its chain and simulates it for `caller`, reading the wallet's
    /// state around it where `caller`'s limits need it: nothing is signed.
    pub(super) async fn build(&self, caller: &Caller, parsed: &Parsed) -> Result<Prepared> {
        let watch = match parsed.chain().family() {
            ChainFamily::Evm => self.policy.watched(caller, parsed.chain()).await?,
            ChainFamily::Solana => None,
        };
        parsed
            .request
            .build(self.makers(), &parsed.wallet, watch.as_deref())
            .await
    }
}
