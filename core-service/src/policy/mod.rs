//! Policy: the one place a write's effects are judged before it is signed. A write is built
//! and simulated first (`Transfers::prepare_*`, `Swaps::prepare`); what the simulation says it
//! does to the wallet, not what the request declares, is held against the caller's key here:
//!
//! * **Deny by default.** A key with any spend limit moves only assets it has a limit on
//!   for the write's chain; any other outflow or grant is FORBIDDEN naming the asset.
//! * **Grants are moves.** An allowance or delegation granted counts as moving its amount;
//!   an unlimited one (allowance, delegation, operator) is FORBIDDEN for a limited key,
//!   whoever the spender is.
//! * **Limits.** Per asset, everything that leaves the wallet plus what it grants is held
//!   against the limit's most per write and 24-hour budget (`limits`); the verdict names the
//!   spends that the signing transaction reserves, under the limit's lock.
//! * **Thresholds.** A write whose amount on any asset passes that asset's approval
//!   threshold is held for a person (`Approvals::hold`).
//! * **Key policies** (`rules`). Allowed chains, contracts (with optional selectors),
//!   recipients and spenders: a key with any rule of a kind may do only what that kind's
//!   rules allow. Recipients and spenders are read from the effects, never from the request.
//! * **Only understood calls.** A limited key calls a contract the wallet holds an
//!   allowance for (on an asset the key is limited on) only when a contract rule names it
//!   with a function: what it takes is decided at execution, not in the simulation.
//! * **No simulation, no limited write.** When the chain's node can simulate neither way,
//!   the write of a key with limits, recipients or spenders is SERVICE_UNAVAILABLE naming
//!   the chain and what its node lacks; a key without them writes as before.

pub mod executed;
mod rules;

use alloy::primitives::{Selector, U256};
use walletops_domain::{
    Effects, FEES_ASSET, GAS_ASSET, Spend, SpendLimit, SpendStanding, WalletAddress,
};
use walletops_store::Store;

use crate::{
    auth::Caller,
    error::{Result, WalletOpsError},
    limits::{BUDGET_WINDOW, LimitsConfig, over_budget, over_per_write},
};

use walletops_chains::{Chain, effects::Foreseen};

/// Why a write may not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A rule refuses it (FORBIDDEN).
    Forbidden(String),
    /// What it does cannot be read (SERVICE_UNAVAILABLE).
    Unreadable(String),
}

/// What a write is, as the policy's rules tell writes apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// A send or an approval: judged by its effects alone.
    Transfer,
    /// A contract call of `contract`, of the function `selector` (none: calldata shorter than
    /// a selector).
    Call {
        /// The contract called.
        contract: WalletAddress,
        /// The calldata's first four bytes.
        selector: Option<Selector>,
        /// Whether the wallet held, before the call, an allowance for the contract on an
        /// asset the key is limited on: such a contract decides at execution what it takes,
        /// whatever its simulation showed.
        holds_allowance: bool,
        /// Why its state changes are not all understood (`effects::evm::unexplained`), if
        /// they are not.
        unexplained: Option<String>,
    },
    /// A swap: its sold amount goes to its route, which the swap guard checks.
    Swap {
        /// The token it buys; `None` for the native coin.
        bought: Option<WalletAddress>,
    },
}

/// What a write may do, by its effects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every reason it may not be made; empty when it may.
    pub refusals: Vec<Refusal>,
    /// What it reserves against its key's limits: one per asset it moves or grants.
    pub spends: Vec<Spend>,
    /// Every spend that passes its asset's approval threshold, with that threshold: the
    /// write then waits for a person.
    pub holds: Vec<(Spend, U256)>,
}

/// Judges writes' effects against their keys' limits.
#[derive(Debug, Clone)]
pub struct Policy {
    store: Store,
    /// The fee budget of a key without one.
    defaults: LimitsConfig,
}

impl Policy {
    /// A policy reading limits from `store`, a key's fee budget `defaults` where it has none.
    pub fn new(store: Store, defaults: LimitsConfig) -> Self {
        Self { store, defaults }
    }

    /// The tokens whose balance a write of `caller` on the EVM chain `chain` has read around
    /// its simulation (the coin's always is): those of its limits there. `None` for a key
    /// without limits, whose write is judged on nothing the reads would add.
    pub async fn watched(
        &self,
        caller: &Caller,
        chain: &Chain,
    ) -> Result<Option<Vec<alloy::primitives::Address>>> {
        let Some(key_id) = caller.key_id().filter(|_| caller.limited()) else {
            return Ok(None);
        };
        let standings = self
            .store
            .spend_limits(key_id, crate::clock::now() - BUDGET_WINDOW)
            .await?;
        Ok(Some(
            standings
                .iter()
                .filter(|s| s.limit.chain == chain.slug())
                .filter_map(|s| match chain.family().parse_address(&s.limit.asset) {
                    Ok(WalletAddress::Evm(token)) => Some(token),
                    _ => None,
                })
                .collect(),
        ))
    }

    /// Why `caller`'s writes are refused while its key's line is frozen (`executed`); `None`
    /// when it is not.
    pub async fn frozen(&self, caller: &Caller) -> Result<Option<String>> {
        let Some(line) = caller.line().filter(|_| caller.limited()) else {
            return Ok(None);
        };
        Ok(self.store.frozen_line(line).await?.map(|f| {
            format!(
                "frozen: this key's line has been frozen since {} because {}; its owner unfreezes it (walletops keys unfreeze, or the dashboard's keys page)",
                f.frozen_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                f.reason
            )
        }))
    }

    /// The verdict on a write `act` of `caller` on `chain` that does `foreseen`, may pay
    /// `fee` in fees and is signed with `gas` (gas limit, Solana compute units): every
    /// reason it may not be made, what it reserves and whether it waits.
    pub async fn judge(
        &self,
        caller: &Caller,
        chain: &Chain,
        (act, foreseen): (Act, &Foreseen),
        (fee, gas): (U256, u64),
    ) -> Result<Verdict> {
        let Some(key_id) = caller.key_id().filter(|_| caller.limited()) else {
            return Ok(Verdict::default());
        };
        let (mut standings, rules, frozen) = tokio::try_join!(
            async {
                Ok::<_, WalletOpsError>(
                    self.store
                        .spend_limits(key_id, crate::clock::now() - BUDGET_WINDOW)
                        .await?,
                )
            },
            async { Ok(self.store.policy_rules(key_id).await?) },
            self.frozen(caller),
        )?;
        if !standings.iter().any(|s| fee_budget_of(s, chain)) {
            // A limited key's fees are bounded where its owner set no budget: the chain's
            // default, kept as the key's row so the reservation locks it as any limit.
            self.store
                .ensure_spend_limit(&SpendLimit {
                    key_id,
                    chain: chain.slug().to_owned(),
                    asset: FEES_ASSET.to_owned(),
                    max_per_transaction: None,
                    daily_budget: Some(self.defaults.fees_per_day(chain)),
                    approval_above: None,
                })
                .await?;
            standings = self
                .store
                .spend_limits(key_id, crate::clock::now() - BUDGET_WINDOW)
                .await?;
        }
        let rules = rules::Rules::new(&rules, chain.slug());
        let mut verdict = Verdict {
            refusals: rules.broken(&act, foreseen.known()),
            ..Verdict::default()
        };
        verdict.refusals.extend(frozen.map(Refusal::Forbidden));
        if let Some(budget) = standings.iter().find(|s| fee_budget_of(s, chain)) {
            verdict
                .refusals
                .extend(passed(budget, fee).map(|why| Refusal::Forbidden(format!("fees: {why}"))));
            verdict.spends.push(Spend {
                key_id,
                chain: chain.slug().to_owned(),
                asset: FEES_ASSET.to_owned(),
                amount: fee,
            });
        }
        if let Some(ceiling) = standings
            .iter()
            .filter(|s| s.limit.chain == chain.slug() && s.limit.asset == GAS_ASSET)
            .find_map(|s| s.limit.max_per_transaction)
            && U256::from(gas) > ceiling
        {
            verdict.refusals.push(Refusal::Forbidden(format!(
                "gas: this key's writes on {} may use at most {ceiling} gas, and this one is signed with a limit of {}",
                chain.slug(),
                gas
            )));
        }
        // The fee budgets and gas ceilings bound fees alone: what a write moves is held to
        // the others.
        standings.retain(|s| s.limit.asset != FEES_ASSET && s.limit.asset != GAS_ASSET);
        if standings.is_empty() && !rules.need_effects() {
            return Ok(verdict);
        }
        match foreseen {
            Foreseen::Known(_) if standings.is_empty() => {}
            Foreseen::Known(effects) => {
                let limited = verdict_on_limits(key_id, chain.slug(), effects, &standings);
                verdict.refusals.extend(limited.refusals);
                verdict.spends.extend(limited.spends);
                verdict.holds = limited.holds;
            }
            Foreseen::Unknown(why) => verdict.refusals.push(Refusal::Unreadable(format!(
                "this key has spend limits or a policy on recipients or spenders, and what this write would do cannot be read before signing: {why}"
            ))),
        }
        Ok(verdict)
    }
}

/// Every limit of `standing` a write of `amount` passes: its most per write, its budget.
fn passed(standing: &SpendStanding, amount: U256) -> impl Iterator<Item = WalletOpsError> {
    let limit = &standing.limit;
    [
        over_per_write(limit, amount),
        over_budget(limit, standing.spent_24h, amount),
    ]
    .into_iter()
    .flatten()
}

/// Whether `standing` is the fee budget on `chain`.
fn fee_budget_of(standing: &SpendStanding, chain: &Chain) -> bool {
    standing.limit.chain == chain.slug() && standing.limit.asset == FEES_ASSET
}

impl Verdict {
    /// The error the write is refused with, if it is: FORBIDDEN with every rule it breaks,
    /// else SERVICE_UNAVAILABLE.
    pub fn refusal(&self) -> Option<WalletOpsError> {
        let forbidden: Vec<&str> = self
            .refusals
            .iter()
            .filter_map(|r| match r {
                Refusal::Forbidden(why) => Some(why.as_str()),
                Refusal::Unreadable(_) => None,
            })
            .collect();
        if !forbidden.is_empty() {
            return Some(WalletOpsError::Forbidden(forbidden.join("; ")));
        }
        self.refusals.first().map(|r| match r {
            Refusal::Forbidden(why) | Refusal::Unreadable(why) => {
                WalletOpsError::ServiceUnavailable(why.clone())
            }
        })
    }

    /// Every reason it is refused, in words.
    pub fn reasons(&self) -> impl Iterator<Item = &str> {
        self.refusals.iter().map(|r| match r {
            Refusal::Forbidden(why) | Refusal::Unreadable(why) => why.as_str(),
        })
    }

    /// Whether it would be signed now: neither refused nor held.
    pub fn allowed(&self) -> bool {
        self.refusals.is_empty() && self.holds.is_empty()
    }

    /// Whether it would wait for a person (and is not refused).
    pub fn needs_approval(&self) -> bool {
        self.refusals.is_empty() && !self.holds.is_empty()
    }

    /// Why it would wait for a person: one sentence per threshold it passes; none when it
    /// is refused, and never waits.
    pub fn hold_reasons(&self) -> impl Iterator<Item = String> {
        let holds = if self.refusals.is_empty() {
            self.holds.as_slice()
        } else {
            &[]
        };
        holds.iter().map(|(spend, threshold)| {
            format!(
                "approval: this write moves {} of {} on {}, above the key's approval threshold of {threshold}; it waits for a person",
                spend.amount, spend.asset, spend.chain
            )
        })
    }
}

/// The verdict on `effects` of a write of key `key_id` on chain `chain`, whose limits now
/// stand at `standings` (every chain's): every limit it breaks, per asset. An unlimited
/// hold is refused whoever it is granted to.
fn verdict_on_limits(
    key_id: uuid::Uuid,
    chain: &str,
    effects: &Effects,
    standings: &[SpendStanding],
) -> Verdict {
    let mut verdict = Verdict::default();
    for asset in effects.assets_at_stake() {
        let name = asset.name();
        let standing = standings
            .iter()
            .find(|s| s.limit.chain == chain && s.limit.asset == name);
        let mut amount = effects.outflow_of(asset);
        for grant in effects.grants.iter().filter(|g| g.asset == asset) {
            match grant.amount {
                Some(granted) => amount = amount.saturating_add(granted),
                // Never allowed, not even to an allowed spender: a spender (or a contract
                // it calls) decides at execution how much it takes, so an unlimited hold
                // is a loss of everything the wallet holds of the asset.
                None => verdict.refusals.push(Refusal::Forbidden(format!(
                    "spend limit: this write grants {} an unlimited hold on {name} on {chain}; a key with spend limits grants only bounded amounts, each counted as moved",
                    grant.spender
                ))),
            }
        }
        if amount.is_zero() {
            continue;
        }
        let Some(standing) = standing else {
            verdict.refusals.push(Refusal::Forbidden(format!(
                "spend limit: this key moves only assets it has a limit on, and this write moves {amount} of {name} on {chain}, which has none"
            )));
            continue;
        };
        let limit = &standing.limit;
        verdict
            .refusals
            .extend(passed(standing, amount).map(|why| Refusal::Forbidden(why.to_string())));
        let spend = Spend {
            key_id,
            chain: chain.to_owned(),
            asset: name,
            amount,
        };
        if let Some(threshold) = limit.approval_above
            && amount > threshold
        {
            verdict.holds.push((spend.clone(), threshold));
        }
        verdict.spends.push(spend);
    }
    verdict
}

/// What `effects` does, in a clause for a person: each outflow and grant, or that it moves
/// nothing out of the wallet.
pub fn describe(effects: &Effects) -> String {
    let mut parts: Vec<String> = effects
        .outflows
        .iter()
        .map(|f| {
            format!(
                "sends {} of {} to {}",
                f.amount,
                f.asset.name(),
                f.counterparty
            )
        })
        .collect();
    parts.extend(effects.grants.iter().map(|g| match g.amount {
        Some(amount) => format!(
            "lets {} take up to {amount} of {}",
            g.spender,
            g.asset.name()
        ),
        None => format!("lets {} take all of {}", g.spender, g.asset.name()),
    }));
    if parts.is_empty() {
        "moves nothing out of the wallet".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests;
