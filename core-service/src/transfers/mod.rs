//! Writes at request time: the chain pipelines that simulate, then claim the key, allocate a
//! nonce, sign and store the signed bytes in one database transaction, and only then
//! broadcast (see `idempotency` for the frame they run in, `docs/write-path.md` for the
//! whole protocol). What happens to a record after its first broadcast is `recovery`'s and
//! the monitor's.

mod broadcasts;
pub mod evm;
mod intents;
pub mod solana;

#[cfg(test)]
mod record_lifecycle_tests;

pub use broadcasts::BroadcastLog;

use crate::{
    chains::Chain,
    error::{Result, WalletOpsError},
    idempotency::Ticket,
    requests::{ApproveRequest, CallRequest, SendRequest},
};
use walletops_domain::{DelegatedWallet, OpenTransaction, Submission};

/// The write pipelines of both families, behind the writes the contract names.
#[derive(Debug, Clone)]
pub struct Transfers {
    /// The EVM pipeline.
    pub evm: evm::EvmPipeline,
    /// The Solana pipeline.
    pub solana: solana::SolanaPipeline,
}

impl Transfers {
    /// Sends `req` from `wallet` under `ticket`.
    pub async fn send(
        &self,
        req: &SendRequest,
        wallet: &DelegatedWallet,
        ticket: &Ticket,
    ) -> Result<Submission> {
        match intents::send(req, wallet) {
            intents::SendIntent::Evm(intent) => {
                self.evm.submit(&req.chain, wallet, intent, ticket).await
            }
            intents::SendIntent::Solana(intent) => {
                self.solana.submit(&req.chain, wallet, intent, ticket).await
            }
        }
    }

    /// Approves `req`'s spender from `wallet` under `ticket`.
    pub async fn approve(
        &self,
        req: &ApproveRequest,
        wallet: &DelegatedWallet,
        ticket: &Ticket,
    ) -> Result<Submission> {
        let intent = intents::approve(req, wallet);
        self.evm.submit(&req.chain, wallet, intent, ticket).await
    }

    /// Calls `req`'s contract from `wallet` under `ticket`.
    pub async fn call(
        &self,
        req: &CallRequest,
        wallet: &DelegatedWallet,
        ticket: &Ticket,
    ) -> Result<Submission> {
        let intent = intents::call(req, wallet);
        self.evm.submit(&req.chain, wallet, intent, ticket).await
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
