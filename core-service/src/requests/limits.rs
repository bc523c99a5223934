//! Keys' spend limits and policy rules as the owner gives them (the API, the dashboard, the
//! command line), parsed for their chain: a limit's asset named as limits name it and its
//! amounts for the chain's family; a rule's account of the chain's family and a contract's
//! selector, from hex or a signature. `limits/` takes them typed.

use alloy::{json_abi::Function, primitives::Selector};
use walletops_domain::{
    Allowed, AmountKind, ChainFamily, FEES_ASSET, GAS_ASSET, NATIVE_ASSET, RuleKind, WalletAddress,
    asset_name, parse_amount,
};

use crate::{
    error::{Result, Violations, WalletOpsError},
    limits::NewLimit,
};

use walletops_chains::Chain;

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

/// The rule `given` on `chain`: every bad field in one INVALID_INPUT.
pub fn rule(chain: &Chain, given: RuleText<'_>) -> Result<Allowed> {
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

/// The limits' name of `raw` on `chain`: `native`, `fees`, `gas`, or the token's address
/// (lowercase) or mint, checked for the chain's family.
fn limit_asset(chain: &Chain, raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    for named in [NATIVE_ASSET, FEES_ASSET, GAS_ASSET] {
        if raw.eq_ignore_ascii_case(named) {
            return Ok(named.to_owned());
        }
    }
    match raw.parse::<WalletAddress>() {
        Ok(token) if token.family() == chain.family() => Ok(asset_name(Some(token))),
        _ => Err(format!(
            "must be native, fees, gas or a token of {}: {}",
            chain.slug(),
            if chain.family() == ChainFamily::Evm {
                "0x and 40 hex digits"
            } else {
                "a base58 mint"
            }
        )),
    }
}

/// The asset `raw` of a limit on `chain`, as limits name it (field `asset`).
pub fn asset(chain: &Chain, raw: &str) -> Result<String> {
    limit_asset(chain, raw).map_err(|e| WalletOpsError::invalid("asset", e))
}

/// A limit as given: amounts as text, `None` for no such limit.
#[derive(Debug, Clone, Copy)]
pub struct LimitText<'a> {
    /// The asset: `native`, a token address or a mint.
    pub asset: &'a str,
    /// The most one write may move, in base units.
    pub max_per_transaction: Option<&'a str>,
    /// The most a rolling 24 hours may move, in base units.
    pub daily_budget: Option<&'a str>,
    /// Above this, in base units, a write waits for a person's approval.
    pub approval_above: Option<&'a str>,
}

/// The limit `given` on `chain`, its amounts for the chain's family: every bad field in one
/// INVALID_INPUT.
pub fn limit(chain: &Chain, given: LimitText<'_>) -> Result<NewLimit> {
    let kind = match chain.family() {
        ChainFamily::Evm => AmountKind::Uint256,
        ChainFamily::Solana => AmountKind::U64,
    };
    let mut v = Violations::default();
    let asset = v.check("asset", limit_asset(chain, given.asset));
    let mut amount = |field: &'static str, raw: Option<&str>| {
        raw.and_then(|raw| v.check(field, parse_amount(raw, kind)))
    };
    let max_per_transaction = amount("max_per_transaction", given.max_per_transaction);
    let daily_budget = amount("daily_budget", given.daily_budget);
    let approval_above = amount("approval_above", given.approval_above);
    if given.max_per_transaction.is_none()
        && given.daily_budget.is_none()
        && given.approval_above.is_none()
    {
        v.check::<()>(
            "max_per_transaction",
            Err(
                "give a maximum per write, a daily budget, an approval threshold, or any of them"
                    .to_owned(),
            ),
        );
    }
    v.finish()?;
    Ok(NewLimit {
        asset: asset.unwrap_or_default(),
        max_per_transaction,
        daily_budget,
        approval_above,
    })
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
