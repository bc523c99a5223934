//! The dry run (`?dryRun=true`, `SimulateWrite`, the MCP `simulate` tool): a write parsed,
//! built, simulated and judged exactly as `Core::write` would, answered with what it would
//! do, the verdict with every reason, and its fee. Nothing is signed, claimed or stored, no
//! idempotency key is needed, and it counts as a read (a swap's needs the `trade` scope, as
//! its quote does).

use super::Write;
use crate::{
    Core,
    auth::Caller,
    error::{Result, WalletOpsError},
    policy::{Refusal, Verdict},
    transfers::Fee,
};
use walletops_chains::effects::Foreseen;

/// What a write would do, and whether it would be made.
#[derive(Debug, Clone)]
pub struct DryRun {
    /// What its simulation says it does to the wallet.
    pub effects: Foreseen,
    /// The verdict of the caller's scopes and limits.
    pub verdict: Verdict,
    /// The most its network fee may cost.
    pub fee: Fee,
}

impl Core {
    /// The dry run of `write` for `caller`, admitted as a reader (`SimulateWrite`). An error
    /// the write would meet before its verdict (a bad field, a revert, a shortfall) is this one's too.
    pub async fn simulate_write(&self, caller: &Caller, write: Write) -> Result<DryRun> {
        if let Some(needs) = write.dry_run_needs() {
            caller.require(needs.scope())?;
        }
        let parsed = self.parse(caller, &write, None).await?;
        let prepared = self.build(caller, &parsed).await?;
        let fee = prepared.fee();
        let mut verdict = self
            .policy
            .judge(
                caller,
                parsed.chain(),
                (parsed.act(&prepared), prepared.effects()),
                (fee.max, fee.units),
            )
            .await?;
        // The write's own scope is the first thing the write would be refused for.
        if let Err(WalletOpsError::Forbidden(why)) = caller.require(write.operation().scope()) {
            verdict.refusals.insert(0, Refusal::Forbidden(why));
        }
        Ok(DryRun {
            effects: prepared.effects().clone(),
            fee,
            verdict,
        })
    }
}
