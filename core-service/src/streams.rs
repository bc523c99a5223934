//! The event streams a core holds open (`WatchTransactions`, `GET /tx/events`): at most
//! `[streams]` `per_key` per API key and `per_user` per user at once, each for at most
//! `max_lifetime_secs` (a watcher resumes after the last event it got), and each re-checking
//! its caller's key or session while it runs (`events::watch`). The counts are this core's:
//! behind a load balancer each core holds its own.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Result, WalletOpsError};

/// `[streams]`: how many event streams may be open, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamsConfig {
    /// Streams one API key may hold open at once.
    pub per_key: usize,
    /// Streams one user may hold open at once, all keys and sessions together.
    pub per_user: usize,
    /// The longest a stream stays open; the watcher resumes after its last event.
    pub max_lifetime_secs: u64,
}

impl Default for StreamsConfig {
    fn default() -> Self {
        Self {
            per_key: 5,
            per_user: 20,
            max_lifetime_secs: 3600,
        }
    }
}

impl StreamsConfig {
    /// The longest a stream stays open.
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs(self.max_lifetime_secs)
    }

    /// Startup checks: each limit at least 1.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, value) in [
            ("streams.per_key", self.per_key as u64),
            ("streams.per_user", self.per_user as u64),
            ("streams.max_lifetime_secs", self.max_lifetime_secs),
        ] {
            anyhow::ensure!(value >= 1, "{name} must be at least 1");
        }
        Ok(())
    }
}

/// The streams open on this core, by user and by key.
#[derive(Debug, Default)]
struct Open {
    by_user: HashMap<Uuid, usize>,
    by_key: HashMap<Uuid, usize>,
}

/// The streams this core holds open, within `StreamsConfig`.
#[derive(Debug)]
pub struct Streams {
    config: StreamsConfig,
    open: Arc<Mutex<Open>>,
}

/// One open stream's place: given back when dropped, with its stream.
#[derive(Debug)]
pub struct Slot {
    open: Arc<Mutex<Open>>,
    user: Uuid,
    key: Option<Uuid>,
}

impl Streams {
    /// Streams within `config`.
    pub fn new(config: StreamsConfig) -> Self {
        Self {
            config,
            open: Arc::default(),
        }
    }

    /// A place for one more stream of `user` (through `key`, none for a session), or
    /// `Crowded` naming the limit it would pass.
    pub fn open(&self, user: Uuid, key: Option<Uuid>) -> Result<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let of_user = open.by_user.get(&user).copied().unwrap_or(0);
        let of_key = key.map_or(0, |k| open.by_key.get(&k).copied().unwrap_or(0));
        let crowded = |what: &str, most: usize| {
            WalletOpsError::Crowded(format!(
                "{what} holds {most} event streams open already, the most it may (streams.{}); end one first",
                if what == "this API key" {
                    "per_key"
                } else {
                    "per_user"
                }
            ))
        };
        if key.is_some() && of_key >= self.config.per_key {
            return Err(crowded("this API key", self.config.per_key));
        }
        if of_user >= self.config.per_user {
            return Err(crowded("this user", self.config.per_user));
        }
        *open.by_user.entry(user).or_default() += 1;
        if let Some(key) = key {
            *open.by_key.entry(key).or_default() += 1;
        }
        Ok(Slot {
            open: self.open.clone(),
            user,
            key,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let release = |counts: &mut HashMap<Uuid, usize>, id: Uuid| {
            if let Some(n) = counts.get_mut(&id) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(&id);
                }
            }
        };
        release(&mut open.by_user, self.user);
        if let Some(key) = self.key {
            release(&mut open.by_key, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_counted_per_key_and_per_user_and_given_back() {
        let streams = Streams::new(StreamsConfig {
            per_key: 2,
            per_user: 3,
            max_lifetime_secs: 60,
        });
        let (user, a, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let first = streams.open(user, Some(a)).expect("one");
        let _second = streams.open(user, Some(a)).expect("two");
        let third = streams.open(user, Some(a));
        assert!(matches!(&third, Err(WalletOpsError::Crowded(why)) if why.contains("per_key")));
        let _other_key = streams.open(user, Some(b)).expect("another key's");
        let session = streams.open(user, None);
        assert!(matches!(&session, Err(WalletOpsError::Crowded(why)) if why.contains("per_user")));
        drop(first);
        streams.open(user, Some(a)).expect("given back");
        streams.open(Uuid::new_v4(), None).expect("another user's");
    }
}
