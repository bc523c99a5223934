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
    use super::check_name;

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
