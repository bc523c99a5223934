//! Key policies: the allow-lists an owner sets on an API key beside its spend limits. Each
//! rule allows one thing on one chain; a key with any rule of a kind may do only what that
//! kind's rules allow (a key listing one recipient sends to no other).

use std::fmt;

use alloy::primitives::Selector;
use uuid::Uuid;

use super::WalletAddress;

/// What one rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Allowed {
    /// Writes on the rule's chain.
    Chain,
    /// Outflows to this account (a token account's owner on Solana).
    Recipient(WalletAddress),
    /// Contract calls to this contract: any function (`None`) or this one.
    Contract(WalletAddress, Option<Selector>),
    /// Allowances, delegations and authorities granted to this account.
    Spender(WalletAddress),
    /// Swaps into this token (a mint on Solana); the native coin needs no rule.
    Token(WalletAddress),
}

/// The kinds of rule, as the store, the API and messages name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// `chain`: allowed chains.
    Chain,
    /// `recipient`: allowed recipients.
    Recipient,
    /// `contract`: allowed contracts, with optional function selectors.
    Contract,
    /// `spender`: allowed spenders.
    Spender,
    /// `token`: tokens a swap may buy.
    Token,
}

impl RuleKind {
    /// Its name: `chain`, `recipient`, `contract` or `spender`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Chain => "chain",
            Self::Recipient => "recipient",
            Self::Contract => "contract",
            Self::Spender => "spender",
            Self::Token => "token",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Chain,
            Self::Recipient,
            Self::Contract,
            Self::Spender,
            Self::Token,
        ]
        .into_iter()
        .find(|k| k.as_str().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Allowed {
    /// Its kind.
    pub fn kind(&self) -> RuleKind {
        match self {
            Self::Chain => RuleKind::Chain,
            Self::Recipient(_) => RuleKind::Recipient,
            Self::Contract(..) => RuleKind::Contract,
            Self::Spender(_) => RuleKind::Spender,
            Self::Token(_) => RuleKind::Token,
        }
    }

    /// The account it names; `None` for a chain.
    pub fn address(&self) -> Option<WalletAddress> {
        match *self {
            Self::Chain => None,
            Self::Recipient(a) | Self::Contract(a, _) | Self::Spender(a) | Self::Token(a) => {
                Some(a)
            }
        }
    }

    /// The function selector it is limited to, if any.
    pub fn selector(&self) -> Option<Selector> {
        match *self {
            Self::Contract(_, selector) => selector,
            _ => None,
        }
    }
}

/// One rule of a key's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// The key.
    pub key_id: Uuid,
    /// The chain's slug.
    pub chain: String,
    /// What it allows there.
    pub allowed: Allowed,
}

impl fmt::Display for PolicyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.allowed.kind(), self.chain)?;
        if let Some(address) = self.allowed.address() {
            write!(f, ": {address}")?;
        }
        if let Some(selector) = self.allowed.selector() {
            write!(f, " ({selector})")?;
        }
        Ok(())
    }
}
