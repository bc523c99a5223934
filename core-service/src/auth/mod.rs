//! API keys: their format, their lifecycle (create, list, revoke, expire) and the check that
//! turns an `x-api-key` value into a `Caller`.
//!
//! A key reads `wops_<prefix>_<random>`: a 4-character lookup prefix and 32 random characters,
//! all drawn from the thread CSPRNG. Only the SHA-256 of the whole value is stored; a key is
//! found by its prefix and its hash compared in constant time. A request that only reads
//! finds the key in memory while the core hears of key changes (a revocation, an expiry
//! moved, a limit or a policy set: within a second on every core, `Store::watch_key_changes`);
//! a request that may move money or change anything always reads the key row.

mod last_use;
mod operations;
pub mod passwords;
mod secret;
pub mod sessions;
mod standing;
mod users;

use chrono::{DateTime, Duration, Utc};
use subtle::ConstantTimeEq;
use uuid::Uuid;

pub use operations::{Gate, Operation};
pub use secret::{ApiKeySecret, VENDOR};
pub use sessions::Sessions;
pub use users::Users;

use self::last_use::LastUses;
use crate::{
    error::{Result, WalletOpsError},
    ratelimit::{Drawer, RateLimiter},
};
pub use walletops_domain::KeyState;
use walletops_domain::{ApiKey, Scope, Scopes, check_name};
use walletops_store::{NewApiKey, Store, StoreError};

/// Most keys a user may hold that are neither revoked nor expired.
pub const MAX_ACTIVE_KEYS: u64 = 10;

/// The authenticated caller of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user the key or session belongs to; every operation acts for this user only.
    pub user_id: Uuid,
    /// What the caller may do.
    pub scopes: Scopes,
    /// How the caller authenticated.
    pub credential: Credential,
}

/// What a caller authenticated with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// An API key.
    Key {
        /// The key's id.
        id: Uuid,
        /// The key's prefix, the only part of a key that may be logged.
        prefix: String,
        /// When the key expires; `None`: never.
        expires_at: Option<DateTime<Utc>>,
        /// Whether the key had ever had a spend limit when it was read (`ApiKey::limited`).
        limited: bool,
        /// The key's line (`ApiKey::lineage_id`), which shares its budgets.
        line: Uuid,
    },
    /// A dashboard session: its user itself, with every scope.
    Session {
        /// The session's id.
        id: Uuid,
    },
}

impl Caller {
    /// The key used, if a key was.
    pub fn key_id(&self) -> Option<Uuid> {
        match &self.credential {
            Credential::Key { id, .. } => Some(*id),
            Credential::Session { .. } => None,
        }
    }

    /// When the key used expires, if a key was and it expires.
    fn key_expires_at(&self) -> Option<DateTime<Utc>> {
        match &self.credential {
            Credential::Key { expires_at, .. } => *expires_at,
            Credential::Session { .. } => None,
        }
    }

    /// Whether the caller's writes are held to spend limits and may have been held for
    /// approval: a key that has had a limit. A limit set while a write of its key is under
    /// way holds the key's writes authenticated after it.
    pub fn limited(&self) -> bool {
        matches!(self.credential, Credential::Key { limited: true, .. })
    }

    /// The line of the key used, if a key was.
    pub fn line(&self) -> Option<Uuid> {
        match &self.credential {
            Credential::Key { line, .. } => Some(*line),
            Credential::Session { .. } => None,
        }
    }

    /// What the logs may say of the credential: a key's prefix, a session's id.
    pub fn label(&self) -> String {
        match &self.credential {
            Credential::Key { prefix, .. } => prefix.clone(),
            Credential::Session { id } => format!("session {id}"),
        }
    }

    /// `FORBIDDEN` naming `scope` unless the key has it.
    pub fn require(&self, scope: Scope) -> Result<()> {
        if self.scopes.contains(scope) {
            return Ok(());
        }
        Err(WalletOpsError::Forbidden(format!(
            "this API key lacks the `{scope}` scope (it has: {}); use a key with `{scope}`, \
             made in the dashboard or with `walletops keys create --scopes`",
            self.scopes
        )))
    }
}

/// The lifetimes a key may be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiration {
    /// Never expires (the default).
    #[default]
    Never,
    /// 7 days.
    Days7,
    /// 30 days.
    Days30,
    /// 90 days.
    Days90,
    /// 180 days.
    Days180,
    /// 365 days.
    Year1,
}

impl Expiration {
    /// When a key made at `now` expires.
    pub fn expires_at(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let days = match self {
            Self::Never => return None,
            Self::Days7 => 7,
            Self::Days30 => 30,
            Self::Days90 => 90,
            Self::Days180 => 180,
            Self::Year1 => 365,
        };
        Some(now + Duration::days(days))
    }
}

impl std::str::FromStr for Expiration {
    type Err = String;

    /// Parses the CLI spelling: `never`, `7d`, `30d`, `90d`, `180d`, `1y`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "never" => Ok(Self::Never),
            "7d" => Ok(Self::Days7),
            "30d" => Ok(Self::Days30),
            "90d" => Ok(Self::Days90),
            "180d" => Ok(Self::Days180),
            "1y" => Ok(Self::Year1),
            _ => Err("must be one of: never, 7d, 30d, 90d, 180d, 1y".to_owned()),
        }
    }
}

/// Checks presented keys and manages their lifecycle.
#[derive(Debug, Clone)]
pub struct ApiKeys {
    store: Store,
    last_uses: LastUses,
    /// How many active lines of keys each user has, read at most every `LINES_FRESH_FOR`.
    lines: moka::sync::Cache<Uuid, u64>,
}

/// How long a user's count of key lines is reused: a key made or revoked on another core
/// changes the budget shares within this.
const LINES_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(10);

impl ApiKeys {
    /// Key management over `store`; starts the writer of keys' last uses on the current
    /// runtime.
    pub fn new(store: Store) -> Self {
        Self {
            last_uses: LastUses::start(store.clone()),
            store,
            lines: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(LINES_FRESH_FOR)
                .build(),
        }
    }

    /// Who draws `caller`'s requests from the budgets (see `ratelimit::Drawer`).
    pub async fn drawer(&self, caller: &Caller) -> Result<Drawer> {
        Ok(match &caller.credential {
            Credential::Key { line, .. } => {
                let user = caller.user_id;
                let lines = match self.lines.get(&user) {
                    Some(n) => n,
                    None => {
                        let n = self
                            .store
                            .active_key_lines(user, crate::clock::now())
                            .await?;
                        self.lines.insert(user, n);
                        n
                    }
                };
                Drawer::Key {
                    user,
                    line: *line,
                    shared: lines > 1,
                }
            }
            Credential::Session { .. } => Drawer::Dashboard {
                user: caller.user_id,
            },
        })
    }

    /// The caller that `presented` (the `x-api-key` value) authenticates, for a call from
    /// `client`. Every failure is the same `UNAUTHORIZED` to the caller; the reason goes to
    /// the log with the prefix. Failures are counted per client and per key prefix; past
    /// `limiter`'s limit, failing calls are answered `RATE_LIMITED`, while a valid key is
    /// always let in: a stranger's guesses behind the same proxy, or against the key's
    /// prefix, must not lock its holder out.
    /// A request that `reads_only` may be let in by a key held in memory.
    pub async fn authenticate(
        &self,
        presented: Option<&str>,
        limiter: &RateLimiter,
        client: &str,
        reads_only: bool,
    ) -> Result<Caller> {
        let secret = presented.and_then(ApiKeySecret::parse);
        let mut subjects = vec![format!("auth:client:{client}")];
        subjects.extend(
            secret
                .as_ref()
                .map(|s| format!("auth:prefix:{}", s.prefix())),
        );
        let checked = self.check(presented, secret, reads_only).await;
        limiter
            .counted(limiter.failed_auth(), &subjects, checked)
            .await
    }

    async fn check(
        &self,
        presented: Option<&str>,
        secret: Option<ApiKeySecret>,
        reads_only: bool,
    ) -> Result<Caller> {
        presented.ok_or(WalletOpsError::Unauthorized("no x-api-key"))?;
        let secret = secret.ok_or(WalletOpsError::Unauthorized("malformed x-api-key"))?;
        let found = if reads_only {
            self.store.find_api_key_for_read(secret.prefix()).await?
        } else {
            self.store.find_api_key_by_prefix(secret.prefix()).await?
        };
        let (key, stored_hash) = found.ok_or(WalletOpsError::Unauthorized("unknown key prefix"))?;
        let matches: bool = secret
            .hash()
            .as_bytes()
            .ct_eq(stored_hash.as_bytes())
            .into();
        if !matches {
            return Err(WalletOpsError::Unauthorized("key value does not match"));
        }
        let now = crate::clock::now();
        match key.state(now) {
            KeyState::Revoked => return Err(WalletOpsError::Unauthorized("key revoked")),
            KeyState::Expired => return Err(WalletOpsError::Unauthorized("key expired")),
            KeyState::Active | KeyState::ExpiringSoon => {}
        }
        self.last_uses.note(&key, now);
        Ok(Caller {
            user_id: key.user_id,
            scopes: key.scopes,
            credential: Credential::Key {
                id: key.id,
                prefix: key.prefix,
                expires_at: key.expires_at,
                limited: key.limited,
                line: key.lineage_id,
            },
        })
    }

    /// Makes a key for `user_id` with `scopes`, with the key of `creator` when a caller
    /// makes it (not the CLI, the admin API or the dashboard); the secret is returned this
    /// once and never stored. A key cannot make one that outlives it, nor one that may do
    /// more than itself: a leaked key would keep its holder in past its expiry, or widen
    /// what it was given. (Revoking it revokes the keys made with it.)
    pub async fn create(
        &self,
        user_id: Uuid,
        name: &str,
        expiration: Expiration,
        scopes: Scopes,
        creator: Option<&Caller>,
    ) -> Result<(ApiKey, ApiKeySecret)> {
        let name = check_name(name).map_err(|e| WalletOpsError::invalid("name", e))?;
        if let Some(missing) = creator.and_then(|c| c.scopes.first_missing(scopes)) {
            return Err(WalletOpsError::Forbidden(format!(
                "the key making it lacks the `{missing}` scope: it cannot make a key that may \
                 do more than itself"
            )));
        }
        let now = crate::clock::now();
        let expires_at = expiration.expires_at(now);
        if let Some(limit) = creator.and_then(Caller::key_expires_at)
            && expires_at.is_none_or(|at| at > limit)
        {
            return Err(WalletOpsError::invalid(
                "expiration",
                format!(
                    "the key making it expires at {}: it cannot make a key that outlives it",
                    limit.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            ));
        }
        let new = NewKey {
            user_id,
            name,
            expires_at,
            scopes,
            created_by: creator.and_then(Caller::key_id),
        };
        self.insert(new, MAX_ACTIVE_KEYS).await
    }

    /// Makes `user_id`'s first key with `scopes`, which never expires, unless it has an
    /// active key already (`None`: another core's first start made it meanwhile).
    pub async fn create_first(
        &self,
        user_id: Uuid,
        scopes: Scopes,
    ) -> Result<Option<(ApiKey, ApiKeySecret)>> {
        let new = NewKey {
            user_id,
            name: "first key",
            expires_at: None,
            scopes,
            created_by: None,
        };
        match self.insert(new, 1).await {
            Ok(made) => Ok(Some(made)),
            Err(WalletOpsError::Forbidden(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Stores `new` unless its user has `max_active` active keys (`FORBIDDEN`).
    async fn insert(&self, new: NewKey<'_>, max_active: u64) -> Result<(ApiKey, ApiKeySecret)> {
        let now = crate::clock::now();
        // A 4-character prefix can collide with an existing key's; draw again when it does.
        for _ in 0..8 {
            let secret = ApiKeySecret::generate();
            let new = NewApiKey {
                user_id: new.user_id,
                name: new.name.to_owned(),
                prefix: secret.prefix().to_owned(),
                secret_hash: secret.hash(),
                expires_at: new.expires_at,
                created_by: new.created_by,
                scopes: new.scopes,
            };
            let inserted = self
                .store
                .insert_api_key(new, max_active, now)
                .await
                .map_err(|e| match e {
                    StoreError::Full(max) => WalletOpsError::Forbidden(format!(
                        "a user may hold at most {max} active API keys; revoke one first"
                    )),
                    e => e.into(),
                })?;
            if let Some(key) = inserted {
                self.lines.invalidate(&key.user_id);
                return Ok((key, secret));
            }
        }
        Err(WalletOpsError::Internal(anyhow::anyhow!(
            "no free API key prefix after 8 draws"
        )))
    }

    /// Every key of `user_id`, newest first, revoked and expired ones included.
    pub async fn list(&self, user_id: Uuid) -> Result<Vec<ApiKey>> {
        Ok(self.store.list_api_keys(user_id).await?)
    }

    /// The key `caller` presented; none for a dashboard session.
    pub async fn current(&self, caller: &Caller) -> Result<Option<ApiKey>> {
        let Credential::Key { id, .. } = &caller.credential else {
            return Ok(None);
        };
        Ok(self
            .list(caller.user_id)
            .await?
            .into_iter()
            .find(|k| k.id == *id))
    }

    /// Revokes `user_id`'s key with id or prefix `id_or_prefix`, for good, with the keys made
    /// from it (see `Store::revoke_api_key`): a key `caller` holds may revoke only itself and
    /// the keys made from it.
    pub async fn revoke(
        &self,
        user_id: Uuid,
        id_or_prefix: &str,
        caller: Option<&Caller>,
    ) -> Result<ApiKey> {
        if id_or_prefix.trim().is_empty() {
            return Err(WalletOpsError::invalid("id", "must be a key id or prefix"));
        }
        let revoked = self
            .store
            .revoke_api_key(
                user_id,
                id_or_prefix.trim(),
                caller.and_then(Caller::key_id),
                crate::clock::now(),
            )
            .await?
            .ok_or_else(|| WalletOpsError::NotFound("no such API key".to_owned()))?;
        self.lines.invalidate(&user_id);
        Ok(revoked)
    }
}

/// A key about to be made, before its value is drawn.
struct NewKey<'a> {
    user_id: Uuid,
    name: &'a str,
    expires_at: Option<DateTime<Utc>>,
    scopes: Scopes,
    created_by: Option<Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(expires_at: Option<DateTime<Utc>>, revoked_at: Option<DateTime<Utc>>) -> ApiKey {
        ApiKey {
            id: Uuid::nil(),
            user_id: Uuid::nil(),
            name: "k".to_owned(),
            prefix: "abcd".to_owned(),
            created_at: crate::clock::now(),
            expires_at,
            revoked_at,
            last_used_at: None,
            created_by: None,
            lineage_id: Uuid::nil(),
            scopes: Scopes::ALL,
            limited: false,
        }
    }

    #[test]
    fn states_follow_expiry_and_revocation() {
        let now = crate::clock::now();
        assert_eq!(key(None, None).state(now), KeyState::Active);
        assert_eq!(
            key(Some(now + Duration::days(8)), None).state(now),
            KeyState::Active
        );
        assert_eq!(
            key(Some(now + Duration::days(7)), None).state(now),
            KeyState::ExpiringSoon
        );
        assert_eq!(key(Some(now), None).state(now), KeyState::Expired);
        assert_eq!(key(None, Some(now)).state(now), KeyState::Revoked);
    }

    #[test]
    fn expirations() {
        let now = crate::clock::now();
        assert_eq!(Expiration::Never.expires_at(now), None);
        assert_eq!(
            "1y".parse::<Expiration>()
                .expect("1y")
                .expires_at(now)
                .map(|t| (t - now).num_days()),
            Some(365)
        );
        assert!("2d".parse::<Expiration>().is_err());
    }
}
