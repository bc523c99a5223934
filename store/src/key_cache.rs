//! API keys and wallets held in memory for reads, and how a core hears that a key or a
//! wallet changed anywhere: the `key_changes` triggers on `api_keys` and `wallets` (see their
//! migrations) notify channel `walletops_keys` on PostgreSQL, which the core listens on; a
//! SQLite core reads the row's version every `POLL`. A PostgreSQL core reads it too, every
//! `PG_POLL`, through its pool: a listening connection that goes silent (no reset, no
//! notification) cannot keep a revoked key held. A version that moved drops everything
//! held; one that moved with no notification heard by the next read marks the channel lost,
//! and the core listens again on a new connection. A key or wallet changed through this
//! store is dropped at once, after its transaction commits.
//!
//! What is held is used only while the core hears of changes (`live`): from the moment the
//! channel is lost (the listening connection dropped, the version unreadable) every read goes
//! to the database, until the channel is back and everything held has been dropped. Writes
//! never use it: they read the key and the wallet in their own statements.

use std::{
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    time::Duration,
};

use sea_orm::{ConnectionTrait, DatabaseBackend, Statement, sqlx::postgres::PgListener};
use uuid::Uuid;
use walletops_domain::{ApiKey, ChainFamily, Wallet, WalletAddress};

use crate::Store;

/// The PostgreSQL channel the trigger notifies.
const CHANNEL: &str = "walletops_keys";
/// How often a SQLite core reads the version (a change must reach it within a second; each
/// read is CPU an idle service spends), and the pause before listening again on PostgreSQL.
const POLL: Duration = Duration::from_millis(500);
/// How often a PostgreSQL core reads the version beside its listening connection.
const PG_POLL: Duration = Duration::from_secs(1);
/// What the listening connection calls itself (`pg_stat_activity.application_name`, set
/// in `listen`).
pub const LISTENER_NAME: &str = "walletops-key-changes";
/// Keys, and wallets, held at most.
const HELD: u64 = 100_000;

/// How a read names the wallet it reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum WalletKey {
    /// The user's default wallet of a family.
    Default(Uuid, ChainFamily),
    /// The wallet at an address.
    At(WalletAddress),
}

/// Keys and their stored hashes by prefix, and wallets as reads name them.
#[derive(Debug)]
pub(crate) struct KeyCache {
    keys: moka::sync::Cache<String, (ApiKey, String)>,
    wallets: moka::sync::Cache<WalletKey, Wallet>,
    /// Moves on every drop: a key read from the database before a drop is not kept after it.
    generation: AtomicU64,
    /// Whether the core hears of changes.
    live: AtomicBool,
}

impl Default for KeyCache {
    fn default() -> Self {
        Self {
            keys: moka::sync::Cache::builder().max_capacity(HELD).build(),
            wallets: moka::sync::Cache::builder().max_capacity(HELD).build(),
            generation: AtomicU64::new(0),
            live: AtomicBool::new(false),
        }
    }
}

impl KeyCache {
    /// The key of `prefix` if held (and the cache is live); else the generation to `put`
    /// what the database says under.
    pub(crate) fn get(&self, prefix: &str) -> Result<(ApiKey, String), u64> {
        self.held(&self.keys, prefix)
    }

    /// Keeps `key` read at `generation`, unless a drop came since.
    pub(crate) fn put(&self, prefix: &str, key: (ApiKey, String), generation: u64) {
        self.keep(&self.keys, prefix.to_owned(), key, generation);
    }

    /// `get` of a wallet.
    pub(crate) fn wallet(&self, key: &WalletKey) -> Result<Wallet, u64> {
        self.held(&self.wallets, key)
    }

    /// `put` of a wallet.
    pub(crate) fn put_wallet(&self, key: WalletKey, wallet: Wallet, generation: u64) {
        self.keep(&self.wallets, key, wallet, generation);
    }

    fn held<K, Q, V>(&self, cache: &moka::sync::Cache<K, V>, key: &Q) -> Result<V, u64>
    where
        K: std::hash::Hash + Eq + Send + Sync + std::borrow::Borrow<Q> + 'static,
        Q: std::hash::Hash + Eq + ?Sized,
        V: Clone + Send + Sync + 'static,
    {
        let generation = self.generation.load(Ordering::Acquire);
        if !self.live.load(Ordering::Acquire) {
            return Err(generation);
        }
        cache.get(key).ok_or(generation)
    }

    fn keep<K, V>(&self, cache: &moka::sync::Cache<K, V>, key: K, value: V, generation: u64)
    where
        K: std::hash::Hash + Eq + Send + Sync + Clone + 'static,
        V: Clone + Send + Sync + 'static,
    {
        if !self.live.load(Ordering::Acquire) {
            return;
        }
        cache.insert(key.clone(), value);
        // A drop between the read and the insert may have missed it.
        if self.generation.load(Ordering::Acquire) != generation {
            cache.invalidate(&key);
        }
    }

    /// Drops every key and wallet held.
    pub(crate) fn drop_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.keys.invalidate_all();
        self.wallets.invalidate_all();
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
                Ok(listener) => {
                    self.keys.set_live(true);
                    on_state(true);
                    let why = self.hear(listener).await;
                    self.keys.set_live(false);
                    on_state(false);
                    tracing::warn!(
                        why,
                        "lost the key-change channel: keys are read from the database until it is back"
                    );
                }
                Err(e) => tracing::warn!(error = %e, "listening for key changes failed"),
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Drops what is held on each notification of `listener`, and on each move of the
    /// version read every `PG_POLL`, until the channel is lost: why.
    async fn hear(&self, mut listener: PgListener) -> &'static str {
        let mut tick = tokio::time::interval(PG_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = self.version().await;
        // Notifications since the last read, and whether the last read saw the version move
        // without one.
        let (mut heard, mut unheard_move) = (false, false);
        loop {
            tokio::select! {
                notified = listener.try_recv() => match notified {
                    Ok(Some(_)) => {
                        heard = true;
                        self.keys.drop_all();
                    }
                    // `None`: the connection was lost, and notifications with it.
                    _ => return "the listening connection was lost",
                },
                _ = tick.tick() => {
                    let Some(version) = self.version().await else {
                        return "the version is unreadable";
                    };
                    let moved = seen.is_some_and(|s| s != version);
                    if moved {
                        self.keys.drop_all();
                    }
                    // A move may be read just before its notification arrives: the channel
                    // is lost when none came by the next read either.
                    if unheard_move && !heard {
                        return "the version moved without a notification";
                    }
                    unheard_move = moved && !heard;
                    heard = false;
                    seen = Some(version);
                }
            }
        }
    }

    /// The key-change version, `None` when it cannot be read.
    async fn version(&self) -> Option<i64> {
        let read = Statement::from_string(
            self.sea().get_database_backend(),
            "SELECT version FROM key_changes WHERE id = 1",
        );
        match self.sea().query_one_raw(read).await {
            Ok(Some(row)) => row.try_get::<i64>("", "version").ok(),
            _ => None,
        }
    }

    async fn poll(&self, on_state: &(dyn Fn(bool) + Send + Sync)) {
        let mut seen: Option<i64> = None;
        loop {
            let version = self.version().await;
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
