//! Dashboard passwords: argon2id with the crate's defaults (19 MiB, 2 passes, 1 lane, the
//! OWASP minimum), stored as PHC strings. Hashing and checking run off the async threads,
//! at most `HASHING_AT_ONCE` at a time: a flood of sign-ins queues instead of taking every
//! core's memory and CPU.

use std::sync::LazyLock;

use argon2::{
    Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
    password_hash::{SaltString, rand_core::OsRng},
};
use zeroize::Zeroizing;

use crate::error::{Result, WalletOpsError};

/// Shortest password accepted.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password accepted (argon2 takes any length; a bound keeps a request cheap).
pub const MAX_PASSWORD_CHARS: usize = 256;

/// Hashes computed at once (each takes 19 MiB and a core for tens of milliseconds).
const HASHING_AT_ONCE: usize = 2;

static HASHING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(HASHING_AT_ONCE);

/// How long a password check waits for a slot before it is refused: a flood queues this
/// long at most, and a user's own attempt is told to retry instead of timing out.
const LONGEST_QUEUE: std::time::Duration = std::time::Duration::from_secs(5);

/// Runs `work` off the async threads once a hashing slot is free; `RATE_LIMITED` when none
/// frees within `LONGEST_QUEUE`.
async fn hashing<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let _slot = tokio::time::timeout(LONGEST_QUEUE, HASHING.acquire())
        .await
        .map_err(|_| {
            WalletOpsError::Crowded(
                "too many password checks at once: retry in a few seconds".to_owned(),
            )
        })?
        .map_err(|e| WalletOpsError::Internal(e.into()))?;
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| WalletOpsError::Internal(e.into()))
}

/// A hash of a password no one knows, checked when the user named does not exist or has no
/// password, so that such a sign-in costs the same time as a wrong password.
static STAND_IN: LazyLock<Option<String>> = LazyLock::new(|| {
    let random: [u8; 32] = rand::random();
    hash_now(&hex::encode(random)).ok()
});

/// `password` if it may be set, else why not (for `INVALID_INPUT` on `field`).
pub fn check_new<'a>(field: &str, password: &'a str) -> Result<&'a str> {
    let chars = password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars) {
        return Err(WalletOpsError::invalid(
            field,
            format!("must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"),
        ));
    }
    if password.chars().any(char::is_control) {
        return Err(WalletOpsError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(password)
}

/// The PHC string of `password` with a fresh salt.
pub async fn hash(password: &str) -> Result<String> {
    let password = Zeroizing::new(password.to_owned());
    hashing(move || hash_now(&password)).await?
}

fn hash_now(password: &str) -> Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| WalletOpsError::Internal(anyhow::anyhow!("hashing a password: {e}")))
}

/// Whether `password` matches `stored`; with none stored, checks a stand-in and says no.
/// `RATE_LIMITED` when no hashing slot frees in time.
pub async fn verify(password: &str, stored: Option<String>) -> Result<bool> {
    let password = Zeroizing::new(password.to_owned());
    let known = stored.is_some();
    let checked = hashing(move || {
        let Some(stored) = stored.or_else(|| STAND_IN.clone()) else {
            return false;
        };
        PasswordHash::new(&stored).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await?;
    Ok(known && checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_are_argon2id() {
        let stored = hash("correct horse battery").await.expect("hash");
        assert!(stored.starts_with("$argon2id$"), "{stored}");
        let verify = async |p: &str, s: Option<String>| verify(p, s).await.expect("a slot");
        assert!(verify("correct horse battery", Some(stored.clone())).await);
        assert!(!verify("correct horse battery!", Some(stored)).await);
        assert!(!verify("anything at all", None).await);
    }

    #[test]
    fn new_passwords_are_bounded() {
        assert!(check_new("password", "short").is_err());
        assert!(check_new("password", &"x".repeat(257)).is_err());
        assert!(check_new("password", "twelve chars").is_ok());
        assert!(check_new("password", "twelve\nchars!").is_err());
    }
}
