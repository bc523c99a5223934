//! Writes at request time: the chain pipelines that simulate, then claim the key, allocate a
//! nonce, sign and store the signed bytes in one database transaction, and only then
//! broadcast (see `idempotency` for the frame they run in, `docs/write-path.md` for the
//! whole protocol). What happens to a record after its first broadcast is `recovery`'s and
//! the monitor's.

mod broadcasts;
pub mod evm;
mod intents;
pub mod packs;
pub mod solana;

#[cfg(test)]
mod record_lifecycle_tests;

pub use broadcasts::BroadcastLog;

use alloy::primitives::{Address, U256};

use crate::{
    error::{Result, WalletOpsError},
    idempotency::Ticket,
    requests::{ApproveRequest, CallRequest, SendRequest, payouts::PackRequest},
};

use walletops_chains::{Chain, effects::Foreseen};
use walletops_domain::{DelegatedWallet, OpenTransaction, Submission};

/// The write pipelines of both families, behind the writes the contract names.
#[derive(Debug, Clone)]
pub struct Transfers {
    /// The EVM pipeline.
    pub evm: evm::EvmPipeline,
    /// The Solana pipeline.
    pub solana: solana::SolanaPipeline,
}

/// A write built and checked on its chain, not yet signed: what it will sign and what it
/// does to its wallet. The write path judges its effects (`policy`) between the two steps.
#[derive(Debug)]
pub enum Prepared {
    /// On an EVM chain.
    Evm(evm::Prepared),
    /// On a Solana cluster.
    Solana(solana::Prepared),
}

/// The most a write's network fee may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fee {
    /// In the chain's native base units (wei, lamports).
    pub max: U256,
    /// The gas limit (EVM) or compute unit limit (Solana) it is priced at; 0 when not known.
    pub units: u64,
}

impl Prepared {
    /// What it does to its wallet, as far as is known before signing.
    pub fn effects(&self) -> &Foreseen {
        match self {
            Self::Evm(p) => &p.effects,
            Self::Solana(p) => &p.effects,
        }
    }

    /// Whether the wallet held, before it, an allowance for the contract it calls on a
    /// watched token (EVM contract calls of limited keys).
    pub fn holds_allowance(&self) -> bool {
        match self {
            Self::Evm(p) => p.holds_allowance,
            Self::Solana(_) => false,
        }
    }

    /// Why a limited key's EVM contract call changes state no effect speaks for, if it does.
    pub fn unexplained(&self) -> Option<&str> {
        match self {
            Self::Evm(p) => p.unexplained.as_deref(),
            Self::Solana(_) => None,
        }
    }

    /// The most its network fee may cost.
    pub fn fee(&self) -> Fee {
        match self {
            Self::Evm(p) => p.fee(),
            Self::Solana(p) => p.fee,
        }
    }
}

impl Transfers {
    /// Builds and checks the send `req` from `wallet`.
    /// `watch`: the tokens read around an EVM write's simulation (`EvmPipeline::prepare`).
    pub async fn prepare_send(
        &self,
        req: &SendRequest,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        Ok(match intents::send(req, wallet) {
            intents::SendIntent::Evm(intent) => {
                Prepared::Evm(self.evm.prepare(&req.chain, wallet, intent, watch).await?)
            }
            intents::SendIntent::Solana(intent) => {
                Prepared::Solana(self.solana.prepare(&req.chain, wallet, intent).await?)
            }
        })
    }

    /// Builds and checks the payout items `req` packed in one Solana transaction from
    /// `wallet`.
    pub async fn prepare_pack(
        &self,
        req: &PackRequest,
        wallet: &DelegatedWallet,
    ) -> Result<Prepared> {
        let intent = intents::pack(req, wallet);
        Ok(Prepared::Solana(
            self.solana.prepare(&req.chain, wallet, intent).await?,
        ))
    }

    /// Builds and checks the approval of `req`'s spender from `wallet`.
    pub async fn prepare_approve(
        &self,
        req: &ApproveRequest,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        let intent = intents::approve(req, wallet);
        Ok(Prepared::Evm(
            self.evm.prepare(&req.chain, wallet, intent, watch).await?,
        ))
    }

    /// Builds and checks the call of `req`'s contract from `wallet`.
    pub async fn prepare_call(
        &self,
        req: &CallRequest,
        wallet: &DelegatedWallet,
        watch: Option<&[Address]>,
    ) -> Result<Prepared> {
        let intent = intents::call(req, wallet);
        Ok(Prepared::Evm(
            self.evm.prepare(&req.chain, wallet, intent, watch).await?,
        ))
    }

    /// Signs, stores (claiming `ticket`'s key) and sends `prepared`.
    pub async fn execute(&self, prepared: Prepared, ticket: &Ticket) -> Result<Submission> {
        // The record keeps what the simulation showed, to be compared with what it did.
        match prepared {
            Prepared::Evm(mut p) => {
                p.record.simulated_effects = p.effects.known().cloned();
                self.evm.execute(p, ticket).await
            }
            Prepared::Solana(mut p) => {
                p.record.simulated_effects = p.effects.known().cloned();
                self.solana.execute(p, ticket).await
            }
        }
    }
}

/// The answer for stored record `open` when following up its first broadcast failed with
/// `err`: the submission, the record left to the monitor.
pub(crate) fn handed_over(
    chain: &Chain,
    open: &OpenTransaction,
    err: &WalletOpsError,
) -> Submission {
    tracing::warn!(id = %open.id, error = %err, "following up a broadcast failed; the monitor takes over");
    chain.submission_of(open)
}
