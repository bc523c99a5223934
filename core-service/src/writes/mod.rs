//! The write path every write RPC takes (`Core::write`), and the one an approved write takes
//! when a core's runner makes it (`approved`): the same steps, so a held write is signed
//! under the same rules as any other.
//!
//! 1. Authenticate the caller and draw the request from its write budget (`Core::admit`).
//! 2. Open the request under its `Idempotency-Key`, before any field is read: a key that
//!    already has an answer gives it, whatever changed since; a key whose write is held for
//!    approval answers from the approval (`Approvals::held`).
//! 3. Parse every field (all violations in one INVALID_INPUT) and resolve the wallet, with
//!    its ownership, link and delegation checks.
//! 4. For a key's write that moves more than the key's approval threshold for the asset:
//!    hold it (`Approvals::hold_if_over`) and answer with the approval. Nothing is signed.
//! 5. Run the write under the key's ticket (`Idempotency::run`): it claims the key, and
//!    reserves what it moves against the key's limits, inside its signing transaction.
//!
//! A request refused before step 5 claims nothing. An approved write starts at step 2 with
//! its stored request and skips step 4.

pub mod approved;

use prost::Message;
use tonic::metadata::MetadataMap;
use walletops_proto::v1 as pb;

use crate::{
    Core,
    approvals::ToHold,
    auth::Caller,
    auth::Operation,
    error::{Result, WalletOpsError},
    idempotency::{Canonical, IdempotencyKey, Keyed, Ticket},
    requests::{ApproveRequest, CallRequest, SendRequest, SwapRequest, WriteRequest},
};
use walletops_domain::{Approval, DelegatedWallet, Spend, Submission, WalletAddress};

/// A write request as received: what a held write stores and runs again once approved.
#[derive(Debug, Clone)]
pub enum Write {
    /// `POST /send`.
    Send(pb::SendRequest),
    /// `POST /token/approve`.
    Approve(pb::ApproveTokenRequest),
    /// `POST /contracts/send`.
    Call(pb::CallContractRequest),
    /// `POST /trade/swap`.
    Swap(pb::SwapRequest),
}

/// What a write answers.
#[derive(Debug, Clone)]
pub enum Written {
    /// Signed, stored and sent (or the stored answer of an earlier run).
    Submitted(Submission),
    /// Held for a person's approval: not signed.
    Held(Box<Approval>),
}

/// Whether a write is held to its key's approval thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// A write as the key sent it.
    Thresholds,
    /// A write a person approved.
    Approved,
}

impl Write {
    /// The operation it is, for the scope it needs.
    pub fn operation(&self) -> Operation {
        match self {
            Self::Send(_) => Operation::Send,
            Self::Approve(_) => Operation::ApproveToken,
            Self::Call(_) => Operation::CallContract,
            Self::Swap(_) => Operation::Swap,
        }
    }

    /// The endpoint's path, under which its idempotency key is kept.
    pub fn path(&self) -> &'static str {
        match self {
            Self::Send(_) => "/send",
            Self::Approve(_) => "/token/approve",
            Self::Call(_) => "/contracts/send",
            Self::Swap(_) => "/trade/swap",
        }
    }

    /// The request's canonical encoding (`Canonical`).
    fn canonical_bytes(&self) -> Vec<u8> {
        match self {
            Self::Send(m) => m.canonical_bytes(),
            Self::Approve(m) => m.canonical_bytes(),
            Self::Call(m) => m.canonical_bytes(),
            Self::Swap(m) => m.canonical_bytes(),
        }
    }

    /// The write stored as `bytes` for endpoint `path`.
    pub(crate) fn decode(path: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |e: prost::DecodeError| {
            WalletOpsError::Internal(anyhow::anyhow!(
                "a held {path} request does not decode: {e}"
            ))
        };
        Ok(match path {
            "/send" => Self::Send(pb::SendRequest::decode(bytes).map_err(bad)?),
            "/token/approve" => Self::Approve(pb::ApproveTokenRequest::decode(bytes).map_err(bad)?),
            "/contracts/send" => Self::Call(pb::CallContractRequest::decode(bytes).map_err(bad)?),
            "/trade/swap" => Self::Swap(pb::SwapRequest::decode(bytes).map_err(bad)?),
            other => {
                return Err(WalletOpsError::Internal(anyhow::anyhow!(
                    "a held write has an unknown path {other}"
                )));
            }
        })
    }

    /// What the write does, in a sentence for the person who decides on it.
    fn summary(&self, spend: &Spend, from: &WalletAddress) -> String {
        let (amount, asset, chain) = (spend.amount, &spend.asset, &spend.chain);
        match self {
            Self::Send(m) => format!("send {amount} {asset} from {from} to {} on {chain}", m.to),
            Self::Approve(m) => format!(
                "allow {} to spend {amount} of {asset} from {from} on {chain}",
                m.spender
            ),
            Self::Call(m) => format!(
                "call {}{} with {amount} {asset} from {from} on {chain}",
                m.to,
                m.function
                    .as_deref()
                    .map(|f| format!(" ({f})"))
                    .unwrap_or_default()
            ),
            Self::Swap(m) => format!(
                "swap {amount} {asset} for {} from {from} on {chain}",
                m.to_token
            ),
        }
    }
}

impl Core {
    /// Runs write RPC `write` for the caller of `metadata` (the steps above).
    pub async fn write(&self, metadata: &MetadataMap, write: Write) -> Result<Written> {
        let caller = self.admit(metadata, write.operation()).await?;
        let key = IdempotencyKey::of(metadata)?;
        self.write_as(&caller, key, write, Gate::Thresholds).await
    }

    /// Runs `write` of `caller` under idempotency key `key`, from step 2.
    async fn write_as(
        &self,
        caller: &Caller,
        key: IdempotencyKey,
        write: Write,
        gate: Gate,
    ) -> Result<Written> {
        let canonical = write.canonical_bytes();
        let ticket = match self
            .idempotency
            .open(caller.user_id, key, write.path(), &canonical, &self.chains)
            .await?
        {
            Keyed::Answered(submission) => return Ok(Written::Submitted(submission)),
            Keyed::Fresh(ticket) => *ticket,
        };
        if gate == Gate::Thresholds
            && caller.limited()
            && let Some(held) = self.approvals.held(&ticket.claim).await?
        {
            return Ok(Written::Held(Box::new(held)));
        }
        let step = Step {
            caller,
            write: &write,
            canonical,
            gate,
        };
        let (transfers, swaps, chains) = (&self.transfers, &self.swaps, &*self.chains);
        match &write {
            Write::Send(m) => {
                let request = SendRequest::parse(chains, m)?;
                self.run(step, ticket, request, async |r, w, t| {
                    transfers.send(r, w, t).await
                })
                .await
            }
            Write::Approve(m) => {
                let request = ApproveRequest::parse(chains, m)?;
                self.run(step, ticket, request, async |r, w, t| {
                    transfers.approve(r, w, t).await
                })
                .await
            }
            Write::Call(m) => {
                let request = CallRequest::parse(chains, m)?;
                self.run(step, ticket, request, async |r, w, t| {
                    transfers.call(r, w, t).await
                })
                .await
            }
            Write::Swap(m) => {
                let request = SwapRequest::parse(chains, m)?;
                self.run(step, ticket, request, async |r, w, t| {
                    swaps.swap(r, w, t).await
                })
                .await
            }
        }
    }

    /// Steps 3 (the wallet) to 5 of `request`, parsed from `step.write`.
    async fn run<R, A>(
        &self,
        step: Step<'_>,
        mut ticket: Ticket,
        request: R,
        act: A,
    ) -> Result<Written>
    where
        R: WriteRequest,
        A: AsyncFnOnce(&R, &DelegatedWallet, &Ticket) -> Result<Submission>,
    {
        // A key's writes are held against its limits; a dashboard session has none, nor a
        // key that never had one.
        let spend = step
            .caller
            .key_id()
            .filter(|_| step.caller.limited())
            .and_then(|key_id| {
                request.moves().map(|(asset, amount)| Spend {
                    key_id,
                    chain: request.chain().slug().to_owned(),
                    asset,
                    amount,
                })
            });
        let wallet = self
            .wallets
            .resolve_delegated(
                step.caller.user_id,
                request.chain().family(),
                request.from(),
                "from",
            )
            .await?;
        if let Some(spend) = spend {
            if step.gate == Gate::Thresholds {
                let held = self
                    .approvals
                    .hold_if_over(ToHold {
                        claim: &ticket.claim,
                        spend: &spend,
                        summary: step.write.summary(&spend, &wallet.wallet().address),
                        request: step.canonical,
                    })
                    .await?;
                if let Some(approval) = held {
                    return Ok(Written::Held(Box::new(approval)));
                }
            }
            ticket.set_spend(spend);
        }
        self.idempotency
            .run(ticket, &self.chains, async |ticket| {
                act(&request, &wallet, ticket).await
            })
            .await
            .map(Written::Submitted)
    }
}

/// What `Core::run` needs of the write beyond its parsed request.
struct Step<'a> {
    caller: &'a Caller,
    write: &'a Write,
    canonical: Vec<u8>,
    gate: Gate,
}
