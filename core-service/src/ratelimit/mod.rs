//! Per-user request budgets: `writes_per_minute` writes (GetQuote included) and
//! `reads_per_minute` reads, counted over all of a user's keys.
//!
//! The budget is a sliding window: a request is admitted when fewer than N requests of its
//! kind were admitted in the 60 seconds before it, and a refused caller is told to retry when
//! the oldest of those leaves the window. That is the contract's "N per minute" exactly. A
//! token bucket (GCRA, as in `governor`) refills one request every 60/N seconds instead, so
//! the 16th write of a minute could pass whenever the first fifteen took more than four
//! seconds; that is why this module does not use one.
//!
//! The window lives in this process by default. With `redis_url` set it lives in Redis, in
//! one sorted set per user and budget updated by one Lua script (one round trip, atomic,
//! timed by the Redis clock), so every core draws from the same budget. If Redis fails or
//! does not answer within half a second, requests are admitted (and a warning logged): an
//! outage of the limiter must not become an outage of the service.

mod config;
mod failures;

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use uuid::Uuid;

pub use config::RateLimits;
pub use failures::FailureLimit;

use crate::error::{Result, WalletOpsError};

/// The window every budget is counted over.
const WINDOW: Duration = Duration::from_secs(60);

/// How long the limiter waits for Redis before admitting the request unchecked.
const REDIS_TIMEOUT: Duration = Duration::from_millis(500);

/// Which budget a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    /// Reads: listing wallets, balances, transactions, keys.
    Read,
    /// Writes: every state-changing RPC, and GetQuote.
    Write,
}

impl Budget {
    fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// The sliding window in Redis: drop entries older than the window, count, and either add
/// this request or answer the milliseconds until the oldest entry leaves.
const REDIS_WINDOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"#;

/// Where the windows are kept.
enum Windows {
    /// In this process.
    Local(Mutex<HashMap<(Uuid, Budget), VecDeque<Instant>>>),
    /// In Redis, shared by every core.
    Redis {
        connection: redis::aio::ConnectionManager,
        script: redis::Script,
    },
}

/// Admits or refuses requests per user and budget.
pub struct RateLimiter {
    limits: RateLimits,
    windows: Windows,
    /// Failed attempts per subject, when the windows are in this process.
    failures: failures::LocalFailures,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.windows {
            Windows::Local(_) => "local",
            Windows::Redis { .. } => "redis",
        };
        f.debug_struct("RateLimiter")
            .field("limits", &self.limits)
            .field("windows", &kind)
            .finish()
    }
}

impl RateLimiter {
    /// A limiter that counts in this process.
    pub fn new(limits: RateLimits) -> Self {
        Self {
            limits,
            windows: Windows::Local(Mutex::new(HashMap::new())),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// A limiter that counts in the Redis at `url`, shared by every core that uses it.
    pub async fn redis(limits: RateLimits, url: &str) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        // Without timeouts a Redis that stops answering (paused, its host gone without a
        // reset) holds every request until the request timeout: the limiter would become
        // the outage it must not be.
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(REDIS_TIMEOUT)
            .set_connection_timeout(REDIS_TIMEOUT)
            // Reconnecting goes on behind the requests, each of which still waits at most
            // `REDIS_TIMEOUT` (below); a start with Redis down gives up after two retries.
            .set_number_of_retries(2)
            .set_max_delay(2_000);
        let connection = redis::aio::ConnectionManager::new_with_config(client, config).await?;
        Ok(Self {
            limits,
            windows: Windows::Redis {
                connection,
                script: redis::Script::new(REDIS_WINDOW),
            },
            failures: Mutex::new(HashMap::new()),
        })
    }

    fn limit(&self, budget: Budget) -> u32 {
        match budget {
            Budget::Read => self.limits.reads_per_minute,
            Budget::Write => self.limits.writes_per_minute,
        }
    }

    fn refused(&self, budget: Budget, retry_after: Duration) -> WalletOpsError {
        WalletOpsError::RateLimited {
            kind: budget.as_str(),
            limit: self.limit(budget),
            retry_after,
        }
    }

    /// Admits one request of `user` against `budget`, or answers `RATE_LIMITED` with the
    /// time until one would be admitted.
    pub async fn admit(&self, user: Uuid, budget: Budget) -> Result<()> {
        match &self.windows {
            Windows::Local(admitted) => self.admit_at(admitted, user, budget, Instant::now()),
            Windows::Redis { connection, script } => {
                let key = format!("walletops:ratelimit:{user}:{}", budget.as_str());
                let mut connection = connection.clone();
                let mut invocation = script.key(key);
                invocation
                    .arg(WINDOW.as_millis() as u64)
                    .arg(self.limit(budget))
                    .arg(Uuid::now_v7().to_string());
                // The response timeout covers a command on an open connection only: a call
                // made while the manager reconnects waits for that, however long it takes.
                let wait = tokio::time::timeout(
                    REDIS_TIMEOUT,
                    invocation.invoke_async::<u64>(&mut connection),
                )
                .await;
                match wait {
                    Ok(Ok(0)) => Ok(()),
                    Ok(Ok(ms)) => Err(self.refused(budget, Duration::from_millis(ms))),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "rate limiter unreachable; admitting");
                        Ok(())
                    }
                    Err(_) => {
                        tracing::warn!("rate limiter did not answer in time; admitting");
                        Ok(())
                    }
                }
            }
        }
    }

    fn admit_at(
        &self,
        admitted: &Mutex<HashMap<(Uuid, Budget), VecDeque<Instant>>>,
        user: Uuid,
        budget: Budget,
        now: Instant,
    ) -> Result<()> {
        let limit = self.limit(budget);
        let mut admitted = admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let log = admitted.entry((user, budget)).or_default();
        while log
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            log.pop_front();
        }
        if log.len() < limit as usize {
            log.push_back(now);
            return Ok(());
        }
        // The log holds exactly `limit` entries here; the oldest frees a place when it leaves.
        let retry_after = log.front().map_or(WINDOW, |oldest| {
            WINDOW.saturating_sub(now.duration_since(*oldest))
        });
        Err(WalletOpsError::RateLimited {
            kind: budget.as_str(),
            limit,
            retry_after,
        })
    }

    /// Forgets users with nothing in the window, and subjects with no failure in the longest
    /// failure window, so memory follows active users only (Redis expires its own keys).
    pub fn prune(&self) {
        self.prune_failures(failures::LONGEST_WINDOW);
        let Windows::Local(admitted) = &self.windows else {
            return;
        };
        let now = Instant::now();
        let mut admitted = admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        admitted.retain(|_, log| log.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> RateLimiter {
        RateLimiter::new(RateLimits {
            writes_per_minute: 3,
            reads_per_minute: 5,
            failed_auth_per_minute: 20,
        })
    }

    #[test]
    fn refuses_past_the_budget_until_the_oldest_leaves_the_window() {
        let l = limiter();
        let Windows::Local(w) = &l.windows else {
            panic!("local")
        };
        let user = Uuid::now_v7();
        let t0 = Instant::now();
        for i in 0..3 {
            l.admit_at(w, user, Budget::Write, t0 + Duration::from_secs(i))
                .expect("within budget");
        }
        let refused = l.admit_at(w, user, Budget::Write, t0 + Duration::from_secs(10));
        match refused {
            Err(WalletOpsError::RateLimited {
                retry_after, limit, ..
            }) => {
                assert_eq!(limit, 3);
                assert_eq!(retry_after, Duration::from_secs(50));
            }
            other => panic!("expected RATE_LIMITED, got {other:?}"),
        }
        // Reads and other users draw from their own budgets.
        l.admit_at(w, user, Budget::Read, t0).expect("reads apart");
        l.admit_at(w, Uuid::now_v7(), Budget::Write, t0)
            .expect("other user apart");
        // Once the first write is a minute old, one more is admitted, and only one.
        l.admit_at(w, user, Budget::Write, t0 + WINDOW)
            .expect("window moved");
        assert!(l.admit_at(w, user, Budget::Write, t0 + WINDOW).is_err());
    }

    /// Redis answers the milliseconds until a place frees; the refusal carries them as its
    /// delay. Needs the Redis at `WALLETOPS_TEST_REDIS` (default the local one).
    #[tokio::test]
    async fn redis_refusals_carry_the_time_until_a_place_frees() {
        let url = std::env::var("WALLETOPS_TEST_REDIS")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
        let l = RateLimiter::redis(
            RateLimits {
                writes_per_minute: 3,
                reads_per_minute: 5,
                failed_auth_per_minute: 20,
            },
            &url,
        )
        .await
        .expect("Redis is required for the rate-limit tests");
        let user = Uuid::now_v7();
        for _ in 0..3 {
            l.admit(user, Budget::Write).await.expect("within budget");
        }
        match l.admit(user, Budget::Write).await {
            Err(WalletOpsError::RateLimited { retry_after, .. }) => assert!(
                retry_after > WINDOW - Duration::from_secs(5) && retry_after <= WINDOW,
                "{retry_after:?}"
            ),
            other => panic!("expected RATE_LIMITED, got {other:?}"),
        }
        l.admit(user, Budget::Read).await.expect("reads apart");
    }

    #[tokio::test]
    async fn prune_forgets_idle_users() {
        let l = limiter();
        let Windows::Local(w) = &l.windows else {
            panic!("local")
        };
        let (idle, active) = (Uuid::now_v7(), Uuid::now_v7());
        let long_ago = Instant::now()
            .checked_sub(WINDOW + Duration::from_secs(1))
            .expect("the clock is past a minute");
        l.admit_at(w, idle, Budget::Read, long_ago)
            .expect("admit idle");
        l.admit(active, Budget::Read).await.expect("admit active");
        l.prune();
        let kept: Vec<Uuid> = w.lock().expect("lock").keys().map(|(u, _)| *u).collect();
        assert_eq!(kept, [active]);
    }
}
