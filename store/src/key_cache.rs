//! API keys held in memory for reads, and how a core hears that a key changed anywhere: the
//! `key_changes` trigger (see its migration) notifies channel `walletops_keys` on PostgreSQL,
//! which the core listens on; a SQLite core reads the row's version every `POLL`. A key
//! changed through this store is dropped at once, after its transaction commits.
//!
//! The keys are used only while the core hears of changes (`live`): from the moment the
//! channel is lost (the listening connection dropped, the version unreadable) every read of
//! a key goes to the database, until the channel is back and the keys have been dropped.

use std::{
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::Duration,
};

use sea_orm::{ConnectionTrait, DatabaseBackend, Statement, sqlx::postgres::PgListener};
use walletops_domain::ApiKey;

use crate::Store;

/// The PostgreSQL channel the trigger notifies.
const CHANNEL: &str = "walletops_keys";
/// How often a SQLite core reads the version; the pause before listening again on
/// PostgreSQL.
const POLL: Duration = Duration::from_millis(250);
/// What the listening connection calls itself (`pg_stat_activity.application_name`, set
/// in `listen`).
pub const LISTENER_NAME: &str = "walletops-key-changes";
/// Keys held at most.
const HELD: u64 = 100_000;

/// A key and its stored hash, by prefix.
#[derive(Debug)]
pub(crate) struct KeyCache {
    keys: moka::sync::Cache<String, (ApiKey, String)>,
    /// Moves on every drop: a key read from the database before a drop is not kept after it.
    generation: AtomicU64,
    /// Whether the core hears of changes.
    live: AtomicBool,
}

impl Default for KeyCache {
    fn default() -> Self {
        Self {
            keys: moka::sync::Cache::builder().max_capacity(HELD).build(),
            generation: AtomicU64::new(0),
            live: AtomicBool::new(false),
        }
    }
}

impl KeyCache {
    /// The key of `prefix` if held (and the cache is live); else the generation to `put`
    /// what the database says under.
    pub(crate) fn get(&self, prefix: &str) -> Result<(ApiKey, String), u64> {
        let generation = self.generation.load(Ordering::Acquire);
        if !self.live.load(Ordering::Acquire) {
            return Err(generation);
        }
        self.keys.get(prefix).ok_or(generation)
    }

    /// Keeps `key` read at `generation`, unless a drop came since.
    pub(crate) fn put(&self, prefix: &str, key: (ApiKey, String), generation: u64) {
        if !self.live.load(Ordering::Acquire) {
            return;
        }
        self.keys.insert(prefix.to_owned(), key);
        // A drop between the read and the insert may have missed it.
        if self.generation.load(Ordering::Acquire) != generation {
            self.keys.invalidate(prefix);
        }
    }

    /// Drops every key held.
    pub(crate) fn drop_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.keys.invalidate_all();
    }

    /// Whether keys may be held from now on; drops what is held (a `put` racing with the
    /// change sees the generation move).
    fn set_live(&self, live: bool) {
        self.live.store(live, Ordering::Release);
        self.drop_all();
    }
}

impl Store {
    /// Starts hearing of key changes on the current runtime, so that keys are held in memory
    /// for reads; `on_state` is told each time the channel is up (`true`) or lost.
    pub fn watch_key_changes(&self, on_state: impl Fn(bool) + Send + Sync + 'static) {
        let store = self.clone();
        tokio::spawn(async move {
            match store.sea().get_database_backend() {
                DatabaseBackend::Postgres => store.listen(&on_state).await,
                _ => store.poll(&on_state).await,
            }
        });
    }

    async fn listen(&self, on_state: &(dyn Fn(bool) + Send + Sync)) {
        let pool = self.sea().get_postgres_connection_pool().clone();
        loop {
            let listening = async {
                let mut listener = PgListener::connect_with(&pool).await?;
                sea_orm::sqlx::query("SET application_name = 'walletops-key-changes'")
                    .execute(&mut listener)
                    .await?;
                listener.listen(CHANNEL).await?;
                Ok::<_, sea_orm::sqlx::Error>(listener)
            };
            match listening.await {
                Ok(mut listener) => {
                    self.keys.set_live(true);
                    on_state(true);
                    // `None`: the connection was lost, and notifications with it.
                    while let Ok(Some(_)) = listener.try_recv().await {
                        self.keys.drop_all();
                    }
                    self.keys.set_live(false);
                    on_state(false);
                    tracing::warn!(
                        "lost the key-change channel: keys are read from the database until it is back"
                    );
                }
                Err(e) => tracing::warn!(error = %e, "listening for key changes failed"),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn poll(&self, on_state: &(dyn Fn(bool) + Send + Sync)) {
        let read = Statement::from_string(
            self.sea().get_database_backend(),
            "SELECT version FROM key_changes WHERE id = 1",
        );
        let mut seen: Option<i64> = None;
        loop {
            let version = match self.sea().query_one_raw(read.clone()).await {
                Ok(Some(row)) => row.try_get::<i64>("", "version").ok(),
                _ => None,
            };
            match (seen, version) {
                (None, Some(_)) => {
                    self.keys.set_live(true);
                    on_state(true);
                }
                (Some(_), None) => {
                    self.keys.set_live(false);
                    on_state(false);
                }
                (Some(before), Some(now)) if before != now => self.keys.drop_all(),
                _ => {}
            }
            seen = version;
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (ApiKey, String) {
        let now = chrono::Utc::now();
        let key = ApiKey {
            id: uuid::Uuid::nil(),
            user_id: uuid::Uuid::nil(),
            name: "k".to_owned(),
            prefix: "abcd".to_owned(),
            created_at: now,
            expires_at: None,
            revoked_at: None,
            last_used_at: None,
            created_by: None,
            lineage_id: uuid::Uuid::nil(),
            scopes: walletops_domain::Scopes::ALL,
            limited: false,
        };
        (key, "hash".to_owned())
    }

    #[test]
    fn keys_are_held_only_while_changes_are_heard() {
        let cache = KeyCache::default();
        let at = cache.get("abcd").expect_err("nothing held");
        cache.put("abcd", key(), at);
        assert!(cache.get("abcd").is_err(), "not live: nothing kept");
        cache.set_live(true);
        let at = cache.get("abcd").expect_err("nothing held yet");
        cache.put("abcd", key(), at);
        assert!(cache.get("abcd").is_ok(), "held");
        cache.set_live(false);
        assert!(cache.get("abcd").is_err(), "lost: read from the database");
    }

    #[test]
    fn a_key_read_before_a_change_is_not_kept_after_it() {
        let cache = KeyCache::default();
        cache.set_live(true);
        let at = cache.get("abcd").expect_err("nothing held");
        // A change is heard while the key is read from the database.
        cache.drop_all();
        cache.put("abcd", key(), at);
        assert!(cache.get("abcd").is_err(), "the stale read was not kept");
    }
}
