//! When each key was last used, to a minute, written behind.
//!
//! A request notes its key's use in memory; a writer stores the notes every few seconds,
//! one UPDATE per key used since, so a busy key costs no database write per request, and a
//! key used within the last minute (as its row says) is not even noted. A crash loses the
//! notes of the last few seconds: the dashboard then shows an earlier "last used".

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration as StdDuration,
};

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use walletops_domain::ApiKey;
use walletops_store::Store;

/// How precisely a key's last use is recorded.
pub(super) const RESOLUTION: Duration = Duration::seconds(60);
/// How often noted uses are written.
const WRITE_EVERY: StdDuration = StdDuration::from_secs(5);

/// The uses noted since the last write, and their writer.
#[derive(Debug, Clone)]
pub(super) struct LastUses {
    pending: Arc<Mutex<HashMap<Uuid, DateTime<Utc>>>>,
}

impl LastUses {
    /// Starts the writer over `store` on the current runtime. It stops once every handle
    /// is dropped.
    pub(super) fn start(store: Store) -> Self {
        let pending = Arc::new(Mutex::new(HashMap::new()));
        let weak = Arc::downgrade(&pending);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(WRITE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(pending) = weak.upgrade() else {
                    return;
                };
                write(&store, &pending).await;
            }
        });
        Self { pending }
    }

    /// Notes that `key` was used at `now`, unless its stored last use is within a minute.
    pub(super) fn note(&self, key: &ApiKey, now: DateTime<Utc>) {
        if key.last_used_at.is_some_and(|at| now - at < RESOLUTION) {
            return;
        }
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.id)
            .or_insert(now);
    }
}

/// Writes and forgets the noted uses. A failed write is logged and its notes dropped: a
/// later use notes the key again.
async fn write(store: &Store, pending: &Mutex<HashMap<Uuid, DateTime<Utc>>>) {
    let noted: Vec<(Uuid, DateTime<Utc>)> = pending
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .drain()
        .collect();
    for (id, at) in noted {
        if let Err(e) = store.touch_api_key(id, at, at - RESOLUTION).await {
            tracing::warn!(error = %e, "recording an API key's last use failed");
        }
    }
}
