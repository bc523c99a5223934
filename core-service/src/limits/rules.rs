//! Key policies as the owner sets and reads them: each rule parsed for its chain (an
//! address of the chain's family, a contract's selector from hex or a signature), the key
//! found among the owner's. What the rules allow is judged in `policy`.

use alloy::{json_abi::Function, primitives::Selector};
use uuid::Uuid;
use walletops_domain::{Allowed, ChainFamily, PolicyRule, RuleKind};

use super::{Limits, may_set};
use crate::{
    auth::Caller,
    chains::Chain,
    error::{Result, Violations, WalletOpsError},
};

/// A rule as given: the account and selector as text.
#[derive(Debug, Clone, Copy)]
pub struct RuleText<'a> {
    /// What it allows.
    pub kind: RuleKind,
    /// The recipient, contract or spender; none for a chain.
    pub address: Option<&'a str>,
    /// A contract rule's function: `0x` and 8 hex digits, or a signature.
    pub selector: Option<&'a str>,
}

/// A selector given as `0x` and 8 hex digits, or as the signature it is the hash of.
fn selector(raw: &str) -> Result<Selector, String> {
    let raw = raw.trim();
    if raw.contains('(') {
        return Function::parse(raw)
            .map(|f| f.selector())
            .map_err(|e| format!("not a function signature like transfer(address,uint256): {e}"));
    }
    raw.parse::<Selector>()
        .ok()
        .filter(|_| raw.len() == 10 && raw.starts_with("0x"))
        .ok_or_else(|| {
            "0x and 8 hex digits, or a function signature like transfer(address,uint256)".to_owned()
        })
}

/// `given` on `chain`, parsed: every bad field in one INVALID_INPUT.
fn parse(chain: &Chain, given: RuleText<'_>) -> Result<Allowed> {
    let mut v = Violations::default();
    let given_address = given.address.map(str::trim).filter(|a| !a.is_empty());
    let given_selector = given.selector.map(str::trim).filter(|s| !s.is_empty());
    let address = match (given.kind, given_address) {
        (RuleKind::Chain, None) => None,
        (RuleKind::Chain, Some(_)) => v.check(
            "address",
            Err("a chain rule allows the chain itself: give no address".to_owned()),
        ),
        (kind, None) => v.check("address", Err(format!("required for a {kind} rule"))),
        (_, Some(raw)) => v.check("address", chain.family().parse_address(raw)),
    };
    let selector = match (given.kind, given_selector) {
        (_, None) => None,
        (RuleKind::Contract, Some(raw)) => v.check("selector", selector(raw)),
        (kind, Some(_)) => v.check(
            "selector",
            Err(format!(
                "only a contract rule names a function, not a {kind} rule"
            )),
        ),
    };
    if given.kind == RuleKind::Contract && chain.family() != ChainFamily::Evm {
        v.check::<()>(
            "chain",
            Err(format!(
                "contract rules judge EVM contract calls; {} is not an EVM chain",
                chain.slug()
            )),
        );
    }
    v.finish()?;
    let address = || address.ok_or_else(|| WalletOpsError::invalid("address", "required"));
    Ok(match given.kind {
        RuleKind::Chain => Allowed::Chain,
        RuleKind::Recipient => Allowed::Recipient(address()?),
        RuleKind::Spender => Allowed::Spender(address()?),
        RuleKind::Token => Allowed::Token(address()?),
        RuleKind::Contract => Allowed::Contract(address()?, selector),
    })
}

impl Limits {
    /// The rule `given` on `chain` of `user_id`'s key `id_or_prefix`.
    async fn owned_rule(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        given: RuleText<'_>,
    ) -> Result<PolicyRule> {
        let key = self.owned(user_id, id_or_prefix).await?;
        Ok(PolicyRule {
            key_id: key.id,
            chain: chain.slug().to_owned(),
            allowed: parse(chain, given)?,
        })
    }

    /// Adds `given` on `chain` to the policy of `user_id`'s key `id_or_prefix`.
    pub async fn allow(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        given: RuleText<'_>,
    ) -> Result<PolicyRule> {
        let rule = self.owned_rule(user_id, id_or_prefix, chain, given).await?;
        self.store.add_policy_rule(&rule).await?;
        Ok(rule)
    }

    /// Removes `given` on `chain` from the policy of `user_id`'s key `id_or_prefix`.
    pub async fn disallow(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        chain: &Chain,
        given: RuleText<'_>,
    ) -> Result<()> {
        let rule = self.owned_rule(user_id, id_or_prefix, chain, given).await?;
        if self.store.remove_policy_rule(&rule).await? {
            Ok(())
        } else {
            Err(WalletOpsError::NotFound(format!(
                "the key's policy has no rule {rule}"
            )))
        }
    }

    /// `allow` for `caller`, if it may change keys' limits and policies (`may_set`).
    pub async fn allow_as(
        &self,
        caller: &Caller,
        id_or_prefix: &str,
        chain: &Chain,
        given: RuleText<'_>,
    ) -> Result<PolicyRule> {
        may_set(caller)?;
        self.allow(caller.user_id, id_or_prefix, chain, given).await
    }

    /// `disallow` for `caller`, if it may change keys' limits and policies (`may_set`).
    pub async fn disallow_as(
        &self,
        caller: &Caller,
        id_or_prefix: &str,
        chain: &Chain,
        given: RuleText<'_>,
    ) -> Result<()> {
        may_set(caller)?;
        self.disallow(caller.user_id, id_or_prefix, chain, given)
            .await
    }

    /// The policy of key `key_id`.
    pub async fn rules_of(&self, key_id: Uuid) -> Result<Vec<PolicyRule>> {
        Ok(self.store.policy_rules(key_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::selector;

    #[test]
    fn a_selector_is_hex_or_a_signature() {
        let transfer = "0xa9059cbb".parse().expect("hex");
        assert_eq!(selector("0xa9059cbb"), Ok(transfer));
        assert_eq!(selector(" transfer(address,uint256) "), Ok(transfer));
        assert_eq!(selector("transfer(address,uint)"), Ok(transfer));
        for bad in [
            "a9059cbb",
            "0xa9059c",
            "0xa9059cbb00",
            "transfer",
            "0xzz059cbb",
        ] {
            assert!(selector(bad).is_err(), "{bad}");
        }
    }
}
