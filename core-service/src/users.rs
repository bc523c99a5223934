//! Users: the accounts that own wallets and API keys.

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
}

/// Checks a user or key name: 1 to 100 characters, no control characters.
pub(crate) fn check_name(name: &str) -> Result<&str, String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err("must be 1 to 100 characters".to_owned());
    }
    if name.chars().any(char::is_control) {
        return Err("must not contain control characters".to_owned());
    }
    Ok(name)
}
