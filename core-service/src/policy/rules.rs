//! A key's policy rules judged against a write: the chain it is on, the contract it calls,
//! and, from its effects, whom it pays and whom it grants a hold. A key with any rule of a
//! kind may do only what that kind's rules allow, on every chain.

use std::collections::BTreeSet;

use walletops_domain::{Allowed, Effects, PolicyRule, RuleKind, WalletAddress};

use super::{Act, Refusal};

/// A key's rules, read for one write on one chain.
pub(super) struct Rules<'a> {
    rules: &'a [PolicyRule],
    chain: &'a str,
}

impl<'a> Rules<'a> {
    pub(super) fn new(rules: &'a [PolicyRule], chain: &'a str) -> Self {
        Self { rules, chain }
    }

    /// Whether the key has any rule of `kind`, on any chain.
    fn has(&self, kind: RuleKind) -> bool {
        self.rules.iter().any(|r| r.allowed.kind() == kind)
    }

    /// What the rules allow on the write's chain.
    fn here(&self) -> impl Iterator<Item = &'a Allowed> {
        let chain = self.chain;
        self.rules
            .iter()
            .filter(move |r| r.chain == chain)
            .map(|r| &r.allowed)
    }

    /// Whether judging needs the write's effects: recipients and spenders are read there.
    pub(super) fn need_effects(&self) -> bool {
        self.has(RuleKind::Recipient) || self.has(RuleKind::Spender)
    }

    /// The rule kind that judges a grant's spender: spender rules, or else recipient rules
    /// (a hold is a payment its spender takes later); none when the key has neither.
    fn spenders_judged_by(&self) -> Option<RuleKind> {
        [RuleKind::Spender, RuleKind::Recipient]
            .into_iter()
            .find(|kind| self.has(*kind))
    }

    /// Whether `spender` may be granted a hold here: allowed by the rules of the kind that
    /// judges spenders, or by no rule when the key has neither kind.
    pub(super) fn spender_allowed(&self, spender: &WalletAddress) -> bool {
        match self.spenders_judged_by() {
            None => true,
            Some(RuleKind::Spender) => self
                .here()
                .any(|a| matches!(a, Allowed::Spender(s) if s == spender)),
            Some(_) => self
                .here()
                .any(|a| matches!(a, Allowed::Recipient(r) if r == spender)),
        }
    }

    /// Every rule `act` breaks, with `effects` when they are known.
    pub(super) fn broken(&self, act: &Act, effects: Option<&Effects>) -> Vec<Refusal> {
        let mut out = Vec::new();
        self.chain_broken(&mut out);
        self.call_broken(act, &mut out);
        self.swap_broken(act, &mut out);
        if let Some(effects) = effects {
            self.effects_broken(act, effects, &mut out);
        }
        out.into_iter().map(Refusal::Forbidden).collect()
    }

    /// Why the write's chain breaks the key's chain rules, into `out`.
    fn chain_broken(&self, out: &mut Vec<String>) {
        let chain = self.chain;
        if self.has(RuleKind::Chain) && !self.here().any(|a| *a == Allowed::Chain) {
            let allowed: BTreeSet<&str> = self
                .rules
                .iter()
                .filter(|r| r.allowed == Allowed::Chain)
                .map(|r| r.chain.as_str())
                .collect();
            out.push(format!(
                "policy (allowed chains): this key writes only on {}; this write is on {chain}",
                allowed.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }

    /// Why a contract call breaks the understood-calls and contract rules, into `out`.
    fn call_broken(&self, act: &Act, out: &mut Vec<String>) {
        let chain = self.chain;
        if let Act::Call {
            contract,
            selector,
            unexplained: Some(why),
            ..
        } = act
            && !self.here().any(|a| {
                matches!(a, Allowed::Contract(c, s) if c == contract && (s.is_none() || *s == *selector))
            })
        {
            out.push(format!(
                "policy (understood calls): this call of {contract} on {chain} changes state no effect speaks for ({why}); state change not understood: a key with spend limits calls such a contract only when its contract rules name it"
            ));
        }
        if let Act::Call {
            contract,
            selector,
            holds_allowance: true,
            ..
        } = act
            && !self.here().any(
                |a| matches!(a, Allowed::Contract(c, Some(s)) if c == contract && Some(*s) == *selector),
            )
        {
            out.push(format!(
                "policy (understood calls): the wallet holds an allowance for {contract} on {chain}, which may take more at execution than its simulation shows; state change not understood: a key with spend limits calls such a contract only through a function its contract rules name"
            ));
        }
        if let Act::Call {
            contract, selector, ..
        } = act
            && self.has(RuleKind::Contract)
        {
            let entries: Vec<Option<_>> = self
                .here()
                .filter_map(|a| match a {
                    Allowed::Contract(c, s) if c == contract => Some(*s),
                    _ => None,
                })
                .collect();
            if entries.is_empty() {
                out.push(format!(
                    "policy (allowed contracts): this key calls only its allowed contracts on {chain}, and {contract} is not one"
                ));
            } else if !entries.contains(&None)
                && !selector.is_some_and(|s| entries.contains(&Some(s)))
            {
                let functions: Vec<String> =
                    entries.iter().flatten().map(ToString::to_string).collect();
                out.push(format!(
                    "policy (allowed contracts): this key calls {contract} on {chain} only through {}; this call's function is {}",
                    functions.join(", "),
                    selector.map_or_else(
                        || "none (calldata shorter than a selector)".to_owned(),
                        |s| s.to_string()
                    ),
                ));
            }
        }
    }

    /// Why a swap's bought token breaks the token rules, into `out`.
    fn swap_broken(&self, act: &Act, out: &mut Vec<String>) {
        let chain = self.chain;
        // A key held to its recipients could otherwise move value to anyone by buying a
        // token they control: it buys only the native coin and its listed tokens.
        if let Act::Swap {
            bought: Some(token),
        } = act
            && (self.has(RuleKind::Token) || self.has(RuleKind::Recipient))
            && !self.here().any(|a| *a == Allowed::Token(*token))
        {
            out.push(format!(
                "policy (allowed tokens): this key swaps only into the native coin and the tokens its token rules list on {chain}, and {token} is not one"
            ));
        }
    }

    /// Why what the write does (its outflows, its grants) breaks the recipient and spender
    /// rules, into `out`.
    fn effects_broken(&self, act: &Act, effects: &Effects, out: &mut Vec<String>) {
        let chain = self.chain;
        // A swap's sold amount goes to its route, which the swap guard holds to the quote.
        if self.has(RuleKind::Recipient) && !matches!(act, Act::Swap { .. }) {
            let mut named = BTreeSet::new();
            for flow in &effects.outflows {
                let allowed = self
                    .here()
                    .any(|a| matches!(a, Allowed::Recipient(r) if *r == flow.counterparty));
                if !allowed && named.insert(flow.counterparty.to_string()) {
                    out.push(format!(
                        "policy (allowed recipients): this write sends {} of {} on {chain} to {}, which is not an allowed recipient of this key",
                        flow.amount,
                        flow.asset.name(),
                        flow.counterparty
                    ));
                }
            }
        }
        for grant in &effects.grants {
            if !self.spender_allowed(&grant.spender) {
                let (rule, what) = match self.spenders_judged_by() {
                    Some(RuleKind::Spender) => ("allowed spenders", "an allowed spender"),
                    _ => (
                        "allowed recipients",
                        "an allowed recipient (a key with recipient rules and no spender rules grants holds only to its recipients)",
                    ),
                };
                out.push(format!(
                    "policy ({rule}): this write grants {} a hold on {} on {chain}, which is not {what} of this key",
                    grant.spender,
                    grant.asset.name()
                ));
            }
        }
    }
}
