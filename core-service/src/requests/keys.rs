//! The key and admin requests: scopes, lifetimes, policy rules and new wallets, parsed from
//! their proto enums and text.

use walletops_proto::v1 as pb;

use super::limits::RuleText;
use crate::{
    auth::Expiration,
    error::{Result, WalletOpsError},
};
use walletops_chains::{Chain, Registry};
use walletops_domain::{Allowed, ChainFamily, Custody, RuleKind, Scope, Scopes};

/// The scopes a request asks for in `field`; none: all three.
pub fn scopes(field: &str, requested: &[i32]) -> Result<Scopes> {
    let mut parsed = Vec::with_capacity(requested.len());
    for value in requested {
        parsed.push(match pb::ApiKeyScope::try_from(*value) {
            Ok(pb::ApiKeyScope::Read) => Scope::Read,
            Ok(pb::ApiKeyScope::Trade) => Scope::Trade,
            Ok(pb::ApiKeyScope::Write) => Scope::Write,
            Ok(pb::ApiKeyScope::Unspecified) | Err(_) => {
                return Err(WalletOpsError::invalid(
                    field,
                    "each scope is one of read, trade, write",
                ));
            }
        });
    }
    Ok(Scopes::of(parsed).unwrap_or(Scopes::ALL))
}

/// A new key's lifetime (`expiration`); unspecified: it never expires.
pub fn expiration(value: i32) -> Result<Expiration> {
    let lifetime = pb::KeyExpiration::try_from(value)
        .map_err(|_| WalletOpsError::invalid("expiration", "unknown expiration value"))?;
    Ok(match lifetime {
        pb::KeyExpiration::Unspecified | pb::KeyExpiration::Never => Expiration::Never,
        pb::KeyExpiration::SevenDays => Expiration::Days7,
        pb::KeyExpiration::ThirtyDays => Expiration::Days30,
        pb::KeyExpiration::NinetyDays => Expiration::Days90,
        pb::KeyExpiration::OneHundredEightyDays => Expiration::Days180,
        pb::KeyExpiration::OneYear => Expiration::Year1,
    })
}

/// The kind of a rule given over the API.
fn rule_kind(kind: i32) -> Result<RuleKind> {
    match pb::PolicyRuleKind::try_from(kind) {
        Ok(pb::PolicyRuleKind::Chain) => Ok(RuleKind::Chain),
        Ok(pb::PolicyRuleKind::Recipient) => Ok(RuleKind::Recipient),
        Ok(pb::PolicyRuleKind::Contract) => Ok(RuleKind::Contract),
        Ok(pb::PolicyRuleKind::Spender) => Ok(RuleKind::Spender),
        Ok(pb::PolicyRuleKind::Token) => Ok(RuleKind::Token),
        _ => Err(WalletOpsError::invalid(
            "rule.kind",
            "one of CHAIN, RECIPIENT, CONTRACT, SPENDER",
        )),
    }
}

/// The rule `rule` given over the API, on its chain.
pub fn rule<'a>(
    chains: &'a Registry,
    rule: Option<&pb::PolicyRule>,
) -> Result<(&'a Chain, Allowed)> {
    let rule = rule.ok_or_else(|| WalletOpsError::invalid("rule", "required"))?;
    let given = RuleText {
        kind: rule_kind(rule.kind)?,
        address: rule.address.as_deref(),
        selector: rule.selector.as_deref(),
    };
    let chain = super::chain(chains, &rule.chain)?;
    Ok((chain, super::limits::rule(chain, given)?))
}

/// `CreateWallet`'s family (`chainType`) and custody.
pub fn new_wallet(req: &pb::CreateWalletRequest) -> Result<(ChainFamily, Custody)> {
    let family = req
        .chain_type
        .parse::<ChainFamily>()
        .map_err(|e| WalletOpsError::invalid("chainType", e))?;
    let custody = req
        .custody
        .parse::<Custody>()
        .map_err(|e| WalletOpsError::invalid("custody", e))?;
    Ok((family, custody))
}
