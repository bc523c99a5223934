//! Accounts: users, who own wallets and API keys, and their keys as stored.

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User id.
    pub id: Uuid,
    /// Unique name.
    pub name: String,
    /// When the user was made.
    pub created_at: DateTime<Utc>,
    /// The user's id at the wallet provider, when linked.
    pub provider_user_id: Option<String>,
}

/// A stored API key; its value is not part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Key id.
    pub id: Uuid,
    /// Owner.
    pub user_id: Uuid,
    /// Descriptive name.
    pub name: String,
    /// Lookup prefix.
    pub prefix: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it expires; `None`: never.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it was last used, to a minute.
    pub last_used_at: Option<DateTime<Utc>>,
    /// The key it was made with through `ApiKeyService`; `None`: the CLI, the admin API or
    /// the first start made it. Revoking a key revokes the keys made with it.
    pub created_by: Option<Uuid>,
    /// Its line: the first key of the line it was made in (its own id for a key its owner
    /// made). A line shares its budgets.
    pub lineage_id: Uuid,
    /// What the key may do.
    pub scopes: Scopes,
    /// Whether the key has ever had a spend limit: one that never had has no limit to hold
    /// its writes to and no held write.
    pub limited: bool,
}

/// A key line whose writes are refused: one of its writes moved more on chain than its
/// simulation showed and its key reserved. Only its owner unfreezes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrozenLine {
    /// The line: its first key's id (`ApiKey::lineage_id`).
    pub line_id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// When it was frozen.
    pub frozen_at: DateTime<Utc>,
    /// What moved beyond the reservation, in words.
    pub reason: String,
    /// The write that moved it.
    pub transaction_id: Uuid,
}

/// A dashboard session as stored; its token is not part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DashboardSession {
    /// Session id.
    pub id: Uuid,
    /// The signed-in user.
    pub user_id: Uuid,
    /// When it was opened.
    pub created_at: DateTime<Utc>,
    /// Its last request, to a minute.
    pub last_seen_at: DateTime<Utc>,
    /// Its absolute end.
    pub expires_at: DateTime<Utc>,
    /// When it was signed out.
    pub ended_at: Option<DateTime<Utc>>,
}

/// One permission of an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Every read: wallets, balances, transactions, keys.
    Read,
    /// Quotes.
    Trade,
    /// Everything that signs (sends, approvals, contract calls, swaps) and key management.
    Write,
}

impl Scope {
    /// Every scope, in their listing order.
    pub const ALL: [Scope; 3] = [Scope::Read, Scope::Trade, Scope::Write];

    /// The scope's name, as the CLI, the dashboard and errors spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Trade => "trade",
            Self::Write => "write",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::Read => 1,
            Self::Trade => 2,
            Self::Write => 4,
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s.trim())
            .ok_or_else(|| format!("unknown scope {s:?}: each is one of read, trade, write"))
    }
}

/// The scopes of a key: a non-empty set. Spelled `read,trade` in files and on the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Scopes(u8);

impl TryFrom<String> for Scopes {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Scopes> for String {
    fn from(s: Scopes) -> Self {
        s.to_string()
    }
}

impl Scopes {
    /// All three: what a key has unless narrowed, and what keys made before scopes kept.
    pub const ALL: Scopes = Scopes(7);
    /// Reading only.
    pub const READ_ONLY: Scopes = Scopes(1);

    /// The set of `scopes`; `None` when empty.
    pub fn of(scopes: impl IntoIterator<Item = Scope>) -> Option<Self> {
        let bits = scopes.into_iter().fold(0, |bits, s| bits | s.bit());
        (bits != 0).then_some(Self(bits))
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    /// The scopes in the set, in listing order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// The first scope of `other` this set lacks.
    pub fn first_missing(self, other: Scopes) -> Option<Scope> {
        other.iter().find(|s| !self.contains(*s))
    }
}

impl std::fmt::Display for Scopes {
    /// The stored and CLI spelling: `read,trade`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        f.write_str(&names.join(","))
    }
}

impl std::str::FromStr for Scopes {
    type Err = String;

    /// Parses `read,trade`: comma-separated, at least one.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let scopes = s
            .split(',')
            .filter(|part| !part.trim().is_empty())
            .map(str::parse)
            .collect::<Result<Vec<Scope>, _>>()?;
        Self::of(scopes).ok_or_else(|| "must name at least one of read, trade, write".to_owned())
    }
}

/// Checks a user or key name: 1 to 100 characters, no control characters, none of the
/// invisible characters that hide or reorder text (a listing must show a name as it is), and
/// not a UUID (users are looked up by id or by name).
pub fn check_name(name: &str) -> Result<&str, String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err("must be 1 to 100 characters".to_owned());
    }
    if name.chars().any(char::is_control) {
        return Err("must not contain control characters".to_owned());
    }
    if name.chars().any(is_invisible) {
        return Err(
            "must not contain invisible characters (zero-width, direction overrides)".to_owned(),
        );
    }
    if Uuid::parse_str(name).is_ok() {
        return Err("must not be a UUID".to_owned());
    }
    Ok(name)
}

/// Zero-width characters, direction marks, embeddings, overrides and isolates, and the
/// byte-order mark.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

#[cfg(test)]
mod tests {
    use super::{Scope, Scopes, check_name};

    #[test]
    fn scopes_round_trip_and_name_what_is_missing() {
        let read_trade: Scopes = "read, trade".parse().expect("parses");
        assert_eq!(read_trade.to_string(), "read,trade");
        assert_eq!(Scopes::ALL.to_string(), "read,trade,write");
        assert!(read_trade.contains(Scope::Trade) && !read_trade.contains(Scope::Write));
        assert_eq!(read_trade.first_missing(Scopes::ALL), Some(Scope::Write));
        assert_eq!(Scopes::ALL.first_missing(read_trade), None);
        assert!("".parse::<Scopes>().is_err());
        assert!("read,admin".parse::<Scopes>().is_err());
    }

    #[test]
    fn names_show_as_they_are() {
        assert_eq!(check_name("  ci key "), Ok("ci key"));
        assert_eq!(check_name("clé de paiement"), Ok("clé de paiement"));
        for bad in [
            "",
            "a\nb",
            "ci\u{202E}yek",
            "ci\u{200B}",
            "\u{FEFF}owner",
            "01a20cd1-4d9a-7291-8497-31a767f83989",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(101)).is_err());
    }
}

/// A key this close to its expiry is reported as expiring soon.
pub const EXPIRING_SOON: chrono::Duration = chrono::Duration::days(7);

/// A key's standing at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Usable.
    Active,
    /// Usable, expiring within 7 days.
    ExpiringSoon,
    /// Past its expiry.
    Expired,
    /// Revoked.
    Revoked,
}

impl ApiKey {
    /// The key's standing at `now`.
    pub fn state(&self, now: DateTime<Utc>) -> KeyState {
        match (self.revoked_at, self.expires_at) {
            (Some(_), _) => KeyState::Revoked,
            (None, Some(exp)) if exp <= now => KeyState::Expired,
            (None, Some(exp)) if exp - now <= EXPIRING_SOON => KeyState::ExpiringSoon,
            _ => KeyState::Active,
        }
    }
}
