//! The write path every write RPC takes (`Core::write`), and the one an approved write takes
//! when a core's runner makes it (`approved`): the same steps, so a held write is signed
//! under the same rules as any other.
//!
//! 1. Authenticate the caller and draw the request from its write budget (the admission
//!    layer, before the handler runs).
//! 2. Open the request under its `Idempotency-Key`, before any field is read: a key that
//!    already has an answer gives it, whatever changed since; a key whose write is held for
//!    approval answers from the approval (`Approvals::held`).
//! 3. Parse every field (all violations in one INVALID_INPUT) and resolve the wallet, with
//!    its ownership, link and delegation checks.
//! 4. Under the key's ticket (`Idempotency::run`), build the write on its chain and simulate
//!    it (`Transfers::prepare_*`, `Swaps::prepare`): nothing is signed yet.
//! 5. Judge what the simulation says it does (`policy`): a refusal names the rule and the
//!    asset; a write whose effects pass a key's approval threshold on any asset is held
//!    (`Approvals::hold`) and answered with the approval. Nothing is signed.
//! 6. Sign, store and send it (`Transfers::execute`): the signing transaction claims the key
//!    and reserves, per asset, what the verdict says it moves against the key's limits.
//!
//! A request refused before step 6 claims nothing (a failure of steps 4 and 5 is recorded on
//! the key as any failed write's is). An approved write starts at step 2 with its stored
//! request and is not held again at step 5.

pub mod approved;
mod dry_run;
pub mod kinds;
mod parsed;
mod payout_checks;
mod payouts;

pub use dry_run::DryRun;
pub use kinds::Write;

use tonic::metadata::MetadataMap;

use crate::{
    Core,
    approvals::ToHold,
    auth::Caller,
    error::{Result, WalletOpsError},
    idempotency::{Answer, IdempotencyKey, Keyed, Ticket},
    policy::Verdict,
};

use parsed::Parsed;
use walletops_chains::effects::Foreseen;
use walletops_domain::{Approval, Spend, Submission, WalletAddress};

/// What a write answers.
#[derive(Debug, Clone)]
pub enum Written {
    /// Signed, stored and sent (or the stored answer of an earlier run).
    Submitted(Submission),
    /// Held for a person's approval: not signed.
    Held(Box<Approval>),
}

/// Whether a write is held to its key's approval thresholds.
#[derive(Debug, Clone, Copy)]
enum Gate<'a> {
    /// A write as the key sent it.
    Thresholds,
    /// A write a person approved, seeing this: it may do no more than that.
    Approved(&'a Approval),
}

impl Core {
    /// Runs write RPC `write` for `caller`, admitted for its operation, under the
    /// idempotency key `metadata` carries (the steps above).
    pub async fn write(
        &self,
        caller: &Caller,
        metadata: &MetadataMap,
        write: Write,
    ) -> Result<Written> {
        // Admitted for the call's method; a write reached by any other needs its own scope.
        caller.require(write.operation().scope())?;
        let key = IdempotencyKey::of(metadata)?;
        self.write_as(caller, key, write, Gate::Thresholds).await
    }

    /// Runs `write` of `caller` under idempotency key `key`, from step 2.
    async fn write_as(
        &self,
        caller: &Caller,
        key: IdempotencyKey,
        write: Write,
        gate: Gate<'_>,
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
        if matches!(gate, Gate::Thresholds)
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
        let held_from = match gate {
            Gate::Approved(approval) => approval.wallet.as_deref(),
            Gate::Thresholds => None,
        };
        let parsed = self.parse(caller, &write, held_from).await?;
        self.run(step, ticket, parsed).await
    }

    /// Steps 4 to 6 of `parsed` under `ticket`.
    async fn run(&self, step: Step<'_>, ticket: Ticket, parsed: Parsed) -> Result<Written> {
        self.idempotency
            .run(ticket, &self.chains, async |ticket| {
                let prepared = self.build(step.caller, &parsed).await?;
                let fee = prepared.fee();
                let verdict = self
                    .policy
                    .judge(
                        step.caller,
                        parsed.chain(),
                        (parsed.act(&prepared), prepared.effects()),
                        (fee.max, fee.units),
                    )
                    .await?;
                if let Some(refusal) = verdict.refusal() {
                    return Err(refusal);
                }
                if let Gate::Approved(approval) = step.gate {
                    beyond_approval(approval, &verdict)?;
                } else if let Some((spend, threshold)) = verdict.holds.first() {
                    let from = &parsed.wallet.wallet().address;
                    let approval = self
                        .approvals
                        .hold(ToHold {
                            claim: &ticket.claim,
                            spend,
                            threshold: *threshold,
                            summary: summary(step.write, spend, from, prepared.effects()),
                            request: step.canonical.clone(),
                            wallet: from.to_string(),
                        })
                        .await?;
                    return Ok(Written::Held(Box::new(approval)));
                }
                ticket.set_spends(verdict.spends);
                self.transfers
                    .execute(prepared, ticket)
                    .await
                    .map(Written::Submitted)
            })
            .await
    }
}

impl From<Submission> for Written {
    fn from(submission: Submission) -> Self {
        Self::Submitted(submission)
    }
}

impl Answer for Written {
    fn submission(&self) -> Option<&Submission> {
        match self {
            Self::Submitted(submission) => Some(submission),
            Self::Held(_) => None,
        }
    }
}

/// What `write` does, in a sentence for the person who decides on it, with its simulated
/// effects.
fn summary(write: &Write, spend: &Spend, from: &WalletAddress, effects: &Foreseen) -> String {
    let said = write.summary(spend, from);
    match effects.known() {
        Some(effects) => format!("{said}; simulated: {}", crate::policy::describe(effects)),
        None => said,
    }
}

/// Refuses an approved write whose effects, simulated again now, go beyond what its
/// approver saw: more of the held asset, or another asset past its own threshold. It then
/// ends `failed` with the difference, and nothing is signed.
fn beyond_approval(approval: &Approval, verdict: &Verdict) -> Result<()> {
    for (spend, threshold) in &verdict.holds {
        let same = spend.chain == approval.chain && spend.asset == approval.asset;
        if same && spend.amount <= approval.amount {
            continue;
        }
        let seen = if same {
            format!("{} of it", approval.amount)
        } else {
            format!("{} of {}", approval.amount, approval.asset)
        };
        return Err(WalletOpsError::SendFailed(format!(
            "the write's effects changed since it was approved: it now moves {} of {} on {} (above {threshold}), where its approver saw {seen}; nothing was signed",
            spend.amount, spend.asset, spend.chain
        )));
    }
    Ok(())
}

/// What `Core::run` needs of the write beyond its parsed request.
struct Step<'a> {
    caller: &'a Caller,
    write: &'a Write,
    canonical: Vec<u8>,
    gate: Gate<'a>,
}
