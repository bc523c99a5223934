//! Dashboard sessions: signing in with a password, the session a sign-in opens, its CSRF
//! token, and one-time sign-in links that set a password.
//!
//! A session's token (256 random bits) lives in the browser's cookie; the database holds
//! its SHA-256, so a copy of the database opens no session. Every request reads the session
//! row (no cache), so signing out holds on every core at once. A session ends 30 minutes
//! after its last request, 12 hours after sign-in, at sign-out, or when its user's password
//! changes. The CSRF token is derived from the session token, so it needs no storage and
//! cannot be made without the cookie.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Duration, Utc};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::passwords;
use crate::{
    error::{Result, WalletOpsError},
    ratelimit::{FailureLimit, RateLimiter},
};
use walletops_domain::{DashboardSession, User};
use walletops_store::{NewSession, Store};

/// A session ends this long after its last request.
pub const IDLE_TIMEOUT: Duration = Duration::minutes(30);
/// A session ends this long after sign-in, however busy.
pub const ABSOLUTE_TIMEOUT: Duration = Duration::hours(12);
/// How long a sign-in link works.
pub const LINK_LIFETIME: Duration = Duration::minutes(15);
/// How precisely a session's last request is recorded.
const SEEN_RESOLUTION: Duration = Duration::seconds(60);
/// Failed sign-ins of one user name from one client address: from the third, each attempt
/// waits 2 s after the newest failure, twice as long after each further one. Counted per
/// pair, so that a stranger's guesses elsewhere never lock the user out.
pub const SIGN_IN_BACKOFF: FailureLimit = FailureLimit {
    what: "sign-ins of this user name from this address",
    limit: 3,
    window: std::time::Duration::from_secs(60 * 60),
    backoff: Some(std::time::Duration::from_secs(2)),
};
/// Failed sign-ins from one client address, whatever the names it tries.
pub const SIGN_IN_FAILURES: FailureLimit = FailureLimit {
    what: "sign-ins from this address",
    limit: 10,
    window: std::time::Duration::from_secs(15 * 60),
    backoff: None,
};
/// Failed sign-in link redemptions from one client address.
pub const LINK_FAILURES: FailureLimit = FailureLimit {
    what: "sign-in links from this address",
    limit: 10,
    window: std::time::Duration::from_secs(15 * 60),
    backoff: None,
};

/// The one answer to a wrong user name and to a wrong password.
const WRONG_CREDENTIALS: &str = "wrong user name or password";
/// The answer to a sign-in link that cannot be used.
const UNUSABLE_LINK: &str = "this sign-in link is unknown, used or expired: ask for a new one with \
     `walletops users sign-in-link`";
/// The answer to a session that is unknown, ended or expired.
const SIGNED_OUT: &str = "not signed in, or the session has ended: sign in again";

/// A secret token (a session's or a sign-in link's), zeroized on drop.
pub struct Token(Zeroizing<String>);

impl Token {
    fn generate() -> Self {
        let bytes: [u8; 32] = rand::random();
        Self(Zeroizing::new(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The value, to hand to the browser once.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The CSRF token of the session whose token is `session_token`.
pub fn csrf_token(session_token: &str) -> String {
    let mut digest = Sha256::new();
    digest.update(b"walletops dashboard csrf\0");
    digest.update(session_token.as_bytes());
    hex::encode(digest.finalize())
}

/// Whether two presented tokens are both there and equal, compared in constant time.
fn same_token(a: &str, b: &str) -> bool {
    !a.is_empty() && a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// A session just opened, with the token that is its only key.
#[derive(Debug)]
pub struct Opened {
    /// The signed-in user.
    pub user: User,
    /// The session.
    pub session: DashboardSession,
    /// The session's token.
    pub token: Token,
}

/// The dashboard's sessions and sign-in links.
#[derive(Debug, Clone)]
pub struct Sessions {
    store: Store,
}

impl Sessions {
    /// Sessions over `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Signs `name` in with `password`, from `client` (an address), guarded by a form token
    /// the browser sent twice (`form`: the form's field and its cookie). Failures back off
    /// per (name, client) and are limited per client; a throttled attempt is refused before
    /// its password is hashed. The failure is counted before the hash is checked (and taken
    /// back on success), so attempts made at once cannot all slip under the limit.
    pub async fn sign_in(
        &self,
        limiter: &RateLimiter,
        name: &str,
        password: &str,
        client: &str,
        form: (&str, &str),
    ) -> Result<Opened> {
        check_form(form)?;
        let pair = [format!("sign-in:pair:{client}:{name}")];
        let from = [format!("sign-in:client:{client}")];
        let counted_pair = limiter.attempt(SIGN_IN_BACKOFF, &pair).await?;
        let counted_from = match limiter.attempt(SIGN_IN_FAILURES, &from).await {
            Ok(counted) => counted,
            Err(refused) => {
                limiter.forgive(counted_pair, &pair).await;
                return Err(refused);
            }
        };
        let found = self.store.user_password(name).await?;
        let (user, stored) = match found {
            Some((user, stored)) => (Some(user), stored),
            None => (None, None),
        };
        let user = match (passwords::verify(password, stored).await, user) {
            (Ok(true), Some(user)) => user,
            // Not checked (too many at once): not the user's failure.
            (Err(busy), _) => {
                limiter.forgive(counted_pair, &pair).await;
                limiter.forgive(counted_from, &from).await;
                return Err(busy);
            }
            _ => {
                tracing::info!(client, "dashboard sign-in failed");
                return Err(WalletOpsError::NotSignedIn(WRONG_CREDENTIALS));
            }
        };
        limiter.forgive(counted_pair, &pair).await;
        limiter.forgive(counted_from, &from).await;
        tracing::info!(user = %user.id, "dashboard sign-in");
        self.open(user).await
    }

    async fn open(&self, user: User) -> Result<Opened> {
        let now = crate::clock::now();
        let token = Token::generate();
        let session = self
            .store
            .insert_session(
                NewSession {
                    user_id: user.id,
                    token_hash: token_hash(token.expose()),
                    expires_at: now + ABSOLUTE_TIMEOUT,
                },
                now,
            )
            .await?;
        Ok(Opened {
            user,
            session,
            token,
        })
    }

    /// The open session whose token is `token`, its last request noted (to a minute).
    pub async fn check(&self, token: &str) -> Result<DashboardSession> {
        let session = self
            .store
            .find_session(&token_hash(token))
            .await?
            .ok_or(WalletOpsError::NotSignedIn(SIGNED_OUT))?;
        let now = crate::clock::now();
        let open = session.ended_at.is_none()
            && session.expires_at > now
            && now - session.last_seen_at < IDLE_TIMEOUT;
        if !open {
            return Err(WalletOpsError::NotSignedIn(SIGNED_OUT));
        }
        if now - session.last_seen_at >= SEEN_RESOLUTION {
            self.store
                .touch_session(session.id, now, now - SEEN_RESOLUTION)
                .await?;
        }
        Ok(session)
    }

    /// `FORBIDDEN` unless `presented` is the CSRF token of session token `token`.
    pub fn check_csrf(token: &str, presented: Option<&str>) -> Result<()> {
        if same_token(presented.unwrap_or_default(), &csrf_token(token)) {
            return Ok(());
        }
        Err(csrf_refused())
    }

    /// The user session `session` is of.
    pub async fn user_of(&self, session: &DashboardSession) -> Result<User> {
        Ok(self.store.user_by_id(session.user_id).await?)
    }

    /// Ends session `id` (sign-out).
    pub async fn end(&self, id: Uuid) -> Result<()> {
        Ok(self.store.end_session(id, crate::clock::now()).await?)
    }

    /// A new sign-in link's token for `user_id`, valid for `LINK_LIFETIME`.
    pub async fn issue_link(&self, user_id: Uuid) -> Result<(Token, DateTime<Utc>)> {
        let now = crate::clock::now();
        let token = Token::generate();
        let expires_at = now + LINK_LIFETIME;
        self.store
            .insert_sign_in_link(user_id, token_hash(token.expose()), expires_at, now)
            .await?;
        Ok((token, expires_at))
    }

    /// Uses sign-in link `token` to set its user's password to `password`, and opens a
    /// session. A used, expired or unknown link is `UNAUTHORIZED`, counted per client
    /// (`client`): the link is looked up (a SHA-256) before the password is hashed, so
    /// guessing links costs no hashing.
    pub async fn redeem_link(
        &self,
        limiter: &RateLimiter,
        token: &str,
        password: &str,
        client: &str,
        form: (&str, &str),
    ) -> Result<Opened> {
        check_form(form)?;
        let password = passwords::check_new("password", password)?;
        let subjects = [format!("sign-in-link:client:{client}")];
        let link = token_hash(token);
        let usable = self
            .store
            .sign_in_link_usable(&link, crate::clock::now())
            .await?;
        let found = usable
            .then_some(())
            .ok_or(WalletOpsError::Unauthorized("sign-in link"));
        limiter
            .counted(LINK_FAILURES, &subjects, found)
            .await
            .map_err(|e| match e {
                WalletOpsError::Unauthorized(_) => WalletOpsError::NotSignedIn(UNUSABLE_LINK),
                other => other,
            })?;
        let hash = passwords::hash(password).await?;
        let user = self
            .store
            .redeem_sign_in_link(&link, &hash, crate::clock::now())
            .await?
            .ok_or(WalletOpsError::NotSignedIn(UNUSABLE_LINK))?;
        tracing::info!(user = %user.id, "dashboard password set with a sign-in link");
        self.open(user).await
    }

    /// Sets `user_id`'s password (the CLI), ending its sessions.
    pub async fn set_password(&self, user_id: Uuid, password: &str) -> Result<()> {
        let password = passwords::check_new("password", password)?;
        let hash = passwords::hash(password).await?;
        Ok(self
            .store
            .set_password(user_id, &hash, crate::clock::now())
            .await?)
    }
}

/// `FORBIDDEN` unless the form's token and its cookie are both there and equal.
fn check_form((field, cookie): (&str, &str)) -> Result<()> {
    if same_token(field, cookie) {
        return Ok(());
    }
    Err(csrf_refused())
}

fn csrf_refused() -> WalletOpsError {
    WalletOpsError::Forbidden(
        "the form's CSRF token is missing or wrong: reload the page and try again".to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_tokens_belong_to_their_session() {
        let (a, b) = (Token::generate(), Token::generate());
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 43);
        let csrf = csrf_token(a.expose());
        assert!(Sessions::check_csrf(a.expose(), Some(&csrf)).is_ok());
        assert!(Sessions::check_csrf(b.expose(), Some(&csrf)).is_err());
        assert!(Sessions::check_csrf(a.expose(), None).is_err());
        assert!(check_form(("x1", "x1")).is_ok());
        assert!(check_form(("", "")).is_err());
        assert!(check_form(("x1", "x2")).is_err());
    }
}
