//! Per-user request budgets: `writes_per_minute` writes (GetQuote included) and
//! `reads_per_minute` reads, counted over all of a user's keys. When a user has more than
//! one line of keys, each line may also use at most `key_share_percent` of them, so that one
//! key (an agent's, a leaked one) cannot take all. The dashboard draws from budgets of its
//! own: the owner's controls are never starved by the keys.
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
//! does not answer within half a second, reads are admitted (and a warning logged), and
//! writes refused unless `writes_when_redis_fails` says to admit them: an outage of the
//! limiter must not let a key write past its budget.

mod config;
mod failures;

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use uuid::Uuid;

pub use config::{RateLimits, WhenRedisFails};
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

/// The sliding windows in Redis, one per key (KEYS), each with its limit (ARGV[2 + i]):
/// drop entries older than the window; when every window has room, add this request
/// (ARGV[2]) to each and answer {0, 0}; else the milliseconds until the fullest frees a
/// place, and which window (1-based) that is.
const REDIS_WINDOW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local wait, full = 0, 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= tonumber(ARGV[2 + i]) then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local left = math.max(1, tonumber(oldest[2]) + window - now)
    if left > wait then wait, full = left, i end
  end
end
if full > 0 then return {wait, full} end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('PEXPIRE', key, window)
end
return {0, 0}
"#;

/// Who draws a request from the budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drawer {
    /// An API key of `user`, of line `line`; `shared` when the user has other lines of keys
    /// (then the line may use only its share).
    Key {
        /// The key's owner.
        user: Uuid,
        /// The key's line (`ApiKey::lineage_id`).
        line: Uuid,
        /// Whether the user has other active lines.
        shared: bool,
    },
    /// A dashboard session of `user`.
    Dashboard {
        /// The signed-in user.
        user: Uuid,
    },
}

/// One window a request is counted in.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    subject: String,
    limit: u32,
    /// Whose budget it is, for the refusal: `per user`, `for this key`.
    whose: &'static str,
}

/// Where the windows are kept.
enum Windows {
    /// In this process, by subject.
    Local(Mutex<HashMap<String, VecDeque<Instant>>>),
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

    /// The windows `drawer` draws a `budget` request from.
    fn windows(&self, drawer: Drawer, budget: Budget) -> Vec<Window> {
        let limit = self.limit(budget);
        let kind = budget.as_str();
        match drawer {
            Drawer::Key { user, line, shared } => {
                let mut windows = vec![Window {
                    subject: format!("{user}:{kind}"),
                    limit,
                    whose: "per user",
                }];
                if shared {
                    windows.push(Window {
                        subject: format!("line:{line}:{kind}"),
                        limit: self.limits.key_share(limit),
                        whose: "for this key (its share of its user's)",
                    });
                }
                windows
            }
            Drawer::Dashboard { user } => vec![Window {
                subject: format!("dashboard:{user}:{kind}"),
                limit,
                whose: "for the dashboard",
            }],
        }
    }

    /// Admits one `budget` request of `drawer`, or answers `RATE_LIMITED` with the time
    /// until one would be admitted.
    pub async fn admit(&self, drawer: Drawer, budget: Budget) -> Result<()> {
        let windows = self.windows(drawer, budget);
        match &self.windows {
            Windows::Local(admitted) => admit_at(admitted, &windows, budget, Instant::now()),
            Windows::Redis { connection, script } => {
                let mut connection = connection.clone();
                let mut invocation = script.prepare_invoke();
                for w in &windows {
                    invocation.key(format!("walletops:ratelimit:{}", w.subject));
                }
                invocation
                    .arg(WINDOW.as_millis() as u64)
                    .arg(Uuid::now_v7().to_string());
                for w in &windows {
                    invocation.arg(w.limit);
                }
                // The response timeout covers a command on an open connection only: a call
                // made while the manager reconnects waits for that, however long it takes.
                let answer = tokio::time::timeout(
                    REDIS_TIMEOUT,
                    invocation.invoke_async::<(u64, usize)>(&mut connection),
                )
                .await;
                match answer {
                    Ok(Ok((0, _))) => Ok(()),
                    Ok(Ok((ms, full))) => {
                        let window = &windows[full.clamp(1, windows.len()) - 1];
                        Err(refused(window, budget, Duration::from_millis(ms)))
                    }
                    Ok(Err(e)) => self.unchecked(drawer, budget, &e.to_string()),
                    Err(_) => self.unchecked(drawer, budget, "no answer in time"),
                }
            }
        }
    }

    /// What a request is answered when Redis cannot count it: reads and the dashboard's
    /// writes are admitted, keys' writes as `writes_when_redis_fails` says.
    fn unchecked(&self, drawer: Drawer, budget: Budget, why: &str) -> Result<()> {
        // The owner's dashboard acts through an outage: revoking a runaway key, say.
        let owner = matches!(drawer, Drawer::Dashboard { .. });
        if budget == Budget::Write
            && !owner
            && self.limits.writes_when_redis_fails == WhenRedisFails::Refuse
        {
            tracing::warn!(error = why, "rate limiter unreachable; refusing a write");
            return Err(WalletOpsError::ServiceUnavailable(
                "the rate limiter (Redis) cannot be reached, so writes are refused until it \
                 can (rate_limits.writes_when_redis_fails); nothing was done"
                    .to_owned(),
            ));
        }
        tracing::warn!(error = why, "rate limiter unreachable; admitting");
        Ok(())
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

/// `RATE_LIMITED` by `window`, free again after `retry_after`.
fn refused(window: &Window, budget: Budget, retry_after: Duration) -> WalletOpsError {
    WalletOpsError::RateLimited {
        kind: budget.as_str(),
        whose: window.whose,
        limit: window.limit,
        retry_after,
    }
}

/// Admits a request at `now` into every one of `windows` when each has room; else refuses
/// it, counted in none, with the wait of the fullest.
fn admit_at(
    admitted: &Mutex<HashMap<String, VecDeque<Instant>>>,
    windows: &[Window],
    budget: Budget,
    now: Instant,
) -> Result<()> {
    let mut admitted = admitted
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut fullest: Option<(Duration, &Window)> = None;
    for w in windows {
        let log = admitted.entry(w.subject.clone()).or_default();
        while log
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            log.pop_front();
        }
        if log.len() >= w.limit as usize {
            // The oldest of the last `limit` entries frees a place when it leaves.
            let oldest = log.get(log.len() - w.limit as usize).copied();
            let wait = oldest.map_or(WINDOW, |t| WINDOW.saturating_sub(now.duration_since(t)));
            if fullest.is_none_or(|(longest, _)| wait > longest) {
                fullest = Some((wait, w));
            }
        }
    }
    if let Some((wait, w)) = fullest {
        return Err(refused(w, budget, wait));
    }
    for w in windows {
        admitted
            .entry(w.subject.clone())
            .or_default()
            .push_back(now);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> RateLimits {
        RateLimits {
            writes_per_minute: 3,
            reads_per_minute: 5,
            ..RateLimits::default()
        }
    }

    fn limiter() -> RateLimiter {
        RateLimiter::new(limits())
    }

    fn key(user: Uuid) -> Drawer {
        Drawer::Key {
            user,
            line: user,
            shared: false,
        }
    }

    /// Admits `drawer`'s `budget` request into `l`'s local windows at `at`.
    fn admit(l: &RateLimiter, drawer: Drawer, budget: Budget, at: Instant) -> Result<()> {
        let Windows::Local(w) = &l.windows else {
            panic!("local")
        };
        admit_at(w, &l.windows(drawer, budget), budget, at)
    }

    fn whose(outcome: Result<()>) -> &'static str {
        match outcome {
            Err(WalletOpsError::RateLimited { whose, .. }) => whose,
            other => panic!("expected RATE_LIMITED, got {other:?}"),
        }
    }

    #[test]
    fn refuses_past_the_budget_until_the_oldest_leaves_the_window() {
        let l = limiter();
        let user = Uuid::now_v7();
        let t0 = Instant::now();
        for i in 0..3 {
            admit(&l, key(user), Budget::Write, t0 + Duration::from_secs(i))
                .expect("within budget");
        }
        let refused = admit(&l, key(user), Budget::Write, t0 + Duration::from_secs(10));
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
        admit(&l, key(user), Budget::Read, t0).expect("reads apart");
        admit(&l, key(Uuid::now_v7()), Budget::Write, t0).expect("other user apart");
        // Once the first write is a minute old, one more is admitted, and only one.
        admit(&l, key(user), Budget::Write, t0 + WINDOW).expect("window moved");
        assert!(admit(&l, key(user), Budget::Write, t0 + WINDOW).is_err());
    }

    #[test]
    fn a_line_of_keys_takes_only_its_share_and_the_dashboard_its_own() {
        let l = limiter();
        let (user, t0) = (Uuid::now_v7(), Instant::now());
        let line = |line| Drawer::Key {
            user,
            line,
            shared: true,
        };
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        // Half of 3, rounded up: 2 for each line.
        admit(&l, line(a), Budget::Write, t0).expect("first of a");
        admit(&l, line(a), Budget::Write, t0).expect("second of a");
        assert_eq!(
            whose(admit(&l, line(a), Budget::Write, t0)),
            "for this key (its share of its user's)"
        );
        // A refusal counts in no window: b still has the user's last write.
        admit(&l, line(b), Budget::Write, t0).expect("b");
        assert_eq!(whose(admit(&l, line(b), Budget::Write, t0)), "per user");
        // The dashboard is not starved by the keys.
        for _ in 0..3 {
            admit(&l, Drawer::Dashboard { user }, Budget::Write, t0).expect("dashboard");
        }
        assert_eq!(
            whose(admit(&l, Drawer::Dashboard { user }, Budget::Write, t0)),
            "for the dashboard"
        );
    }

    #[test]
    fn a_share_is_at_least_one_request() {
        let mut limits = limits();
        limits.key_share_percent = 1;
        assert_eq!(limits.key_share(15), 1);
        limits.key_share_percent = 50;
        assert_eq!(limits.key_share(15), 8);
        limits.key_share_percent = 100;
        assert_eq!(limits.key_share(15), 15);
    }

    /// Redis answers the milliseconds until a place frees; the refusal carries them as its
    /// delay. Needs the Redis at `WALLETOPS_TEST_REDIS` (default the local one).
    #[tokio::test]
    async fn redis_refusals_carry_the_time_until_a_place_frees() {
        let url = std::env::var("WALLETOPS_TEST_REDIS")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
        let l = RateLimiter::redis(limits(), &url)
            .await
            .expect("Redis is required for the rate-limit tests");
        let user = Uuid::now_v7();
        let shared = Drawer::Key {
            user,
            line: Uuid::now_v7(),
            shared: true,
        };
        l.admit(shared, Budget::Write).await.expect("within share");
        l.admit(shared, Budget::Write).await.expect("within share");
        match l.admit(shared, Budget::Write).await {
            Err(WalletOpsError::RateLimited { whose, .. }) => assert!(whose.contains("key")),
            other => panic!("expected RATE_LIMITED, got {other:?}"),
        }
        l.admit(key(user), Budget::Write)
            .await
            .expect("within budget");
        match l.admit(key(user), Budget::Write).await {
            Err(WalletOpsError::RateLimited {
                retry_after, whose, ..
            }) => {
                assert_eq!(whose, "per user");
                assert!(
                    retry_after > WINDOW - Duration::from_secs(5) && retry_after <= WINDOW,
                    "{retry_after:?}"
                );
            }
            other => panic!("expected RATE_LIMITED, got {other:?}"),
        }
        l.admit(key(user), Budget::Read).await.expect("reads apart");
        l.admit(Drawer::Dashboard { user }, Budget::Write)
            .await
            .expect("the dashboard apart");
    }

    #[tokio::test]
    async fn prune_forgets_idle_users() {
        let l = limiter();
        let (idle, active) = (Uuid::now_v7(), Uuid::now_v7());
        let long_ago = Instant::now()
            .checked_sub(WINDOW + Duration::from_secs(1))
            .expect("the clock is past a minute");
        admit(&l, key(idle), Budget::Read, long_ago).expect("admit idle");
        l.admit(key(active), Budget::Read)
            .await
            .expect("admit active");
        l.prune();
        let Windows::Local(w) = &l.windows else {
            panic!("local")
        };
        let kept: Vec<String> = w.lock().expect("lock").keys().cloned().collect();
        assert_eq!(kept, [format!("{active}:read")]);
    }
}
