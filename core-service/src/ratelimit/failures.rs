//! Failed attempts (dashboard sign-ins) counted per subject over a sliding window: a user
//! name, a client address. Once a subject has `limit` failures in the window, attempts are
//! refused before they are checked, until the oldest failure leaves it. Kept where the
//! request budgets are: in this process, or in Redis for every core.

use std::{
    collections::{HashMap, VecDeque},
    sync::{LazyLock, Mutex, PoisonError},
    time::{Duration, Instant},
};

use super::{REDIS_TIMEOUT, RateLimiter, Windows};
use crate::error::{Result, WalletOpsError};

/// For each subject (KEYS), the failures in the window; the milliseconds until the subject
/// with `limit` of them may try again (the longest wait), 0 when none has: one round trip
/// for every subject of a request.
const REDIS_CHECK: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local wait = 0
for _, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= limit then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    wait = math.max(wait, math.max(1, tonumber(oldest[2]) + window - now))
  end
end
return wait
"#;

/// Notes one failure now for each subject (KEYS).
const REDIS_RECORD: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('PEXPIRE', key, tonumber(ARGV[1]))
end
return 0
"#;

static CHECK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDIS_CHECK));
static RECORD_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDIS_RECORD));

/// The longest failure window in use: pruning keeps what is younger.
pub(super) const LONGEST_WINDOW: Duration = Duration::from_secs(3600);

/// The failures of each subject in this process.
pub(super) type LocalFailures = Mutex<HashMap<String, VecDeque<Instant>>>;

/// How many failures a kind of attempt allows, and over what window.
#[derive(Debug, Clone, Copy)]
pub struct FailureLimit {
    /// What fails, for the refusal's message: `sign-ins`.
    pub what: &'static str,
    /// Failures allowed in the window.
    pub limit: u32,
    /// The window.
    pub window: Duration,
}

impl RateLimiter {
    /// Failed authentications allowed per client and per key prefix:
    /// `rate_limits.failed_auth_per_minute` in a minute.
    pub fn failed_auth(&self) -> FailureLimit {
        FailureLimit {
            what: "authentications",
            limit: self.limits.failed_auth_per_minute,
            window: Duration::from_secs(60),
        }
    }

    /// `RATE_LIMITED` when any of `subjects` has `limit.limit` failures in the window.
    pub async fn check_failures(&self, limit: FailureLimit, subjects: &[String]) -> Result<()> {
        let wait = self.failure_wait(limit, subjects).await;
        if wait.is_zero() {
            return Ok(());
        }
        Err(WalletOpsError::Throttled {
            what: limit.what,
            limit: limit.limit,
            window: limit.window,
            retry_after: wait,
        })
    }

    /// Counts one failure for each of `subjects`.
    pub async fn record_failure(&self, limit: FailureLimit, subjects: &[String]) {
        match &self.windows {
            Windows::Local(_) => {
                let now = Instant::now();
                let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                for subject in subjects {
                    let log = failures.entry(subject.clone()).or_default();
                    log.push_back(now);
                    // Never more than the limit is needed to decide.
                    while log.len() > limit.limit as usize {
                        log.pop_front();
                    }
                }
            }
            Windows::Redis { connection, .. } => {
                let mut invocation = RECORD_SCRIPT.prepare_invoke();
                for subject in subjects {
                    invocation.key(redis_key(subject));
                }
                invocation
                    .arg(limit.window.as_millis() as u64)
                    .arg(uuid::Uuid::now_v7().to_string());
                let mut connection = connection.clone();
                let done = tokio::time::timeout(
                    REDIS_TIMEOUT,
                    invocation.invoke_async::<u64>(&mut connection),
                )
                .await;
                if !matches!(done, Ok(Ok(_))) {
                    tracing::warn!("failure throttle unreachable; failure not counted");
                }
            }
        }
    }

    /// How long the longest-waiting of `subjects` must wait; zero: they may try.
    async fn failure_wait(&self, limit: FailureLimit, subjects: &[String]) -> Duration {
        match &self.windows {
            Windows::Local(_) => {
                let now = Instant::now();
                let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                let mut wait = Duration::ZERO;
                for subject in subjects {
                    let Some(log) = failures.get_mut(subject) else {
                        continue;
                    };
                    while log
                        .front()
                        .is_some_and(|t| now.duration_since(*t) >= limit.window)
                    {
                        log.pop_front();
                    }
                    if log.len() >= limit.limit as usize {
                        let left = log.front().map_or(limit.window, |oldest| {
                            limit.window.saturating_sub(now.duration_since(*oldest))
                        });
                        wait = wait.max(left);
                    }
                }
                wait
            }
            // One round trip for every subject of the request.
            Windows::Redis { connection, .. } => {
                let mut invocation = CHECK_SCRIPT.prepare_invoke();
                for subject in subjects {
                    invocation.key(redis_key(subject));
                }
                invocation
                    .arg(limit.window.as_millis() as u64)
                    .arg(limit.limit);
                let mut connection = connection.clone();
                match tokio::time::timeout(
                    REDIS_TIMEOUT,
                    invocation.invoke_async::<u64>(&mut connection),
                )
                .await
                {
                    Ok(Ok(ms)) => Duration::from_millis(ms),
                    // As for the budgets: an outage of the limiter is not an outage of
                    // the service.
                    _ => {
                        tracing::warn!("failure throttle unreachable; admitting");
                        Duration::ZERO
                    }
                }
            }
        }
    }

    /// Forgets subjects whose failures have all left `window`.
    pub(super) fn prune_failures(&self, window: Duration) {
        let now = Instant::now();
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, log| log.back().is_some_and(|t| now.duration_since(*t) < window));
    }
}

fn redis_key(subject: &str) -> String {
    format!("walletops:failures:{subject}")
}

#[cfg(test)]
mod tests {
    use super::super::RateLimits;
    use super::*;

    const SIGN_INS: FailureLimit = FailureLimit {
        what: "sign-ins",
        limit: 2,
        window: Duration::from_secs(900),
    };

    async fn throttles(limiter: RateLimiter) {
        let name = format!("user:{}", uuid::Uuid::now_v7());
        let (address, other) = (
            format!("addr:{}", uuid::Uuid::now_v7()),
            format!("addr:{}", uuid::Uuid::now_v7()),
        );
        let subjects = [name.clone(), address.clone()];
        limiter
            .check_failures(SIGN_INS, &subjects)
            .await
            .expect("none yet");
        limiter.record_failure(SIGN_INS, &subjects).await;
        limiter
            .check_failures(SIGN_INS, &subjects)
            .await
            .expect("one");
        limiter.record_failure(SIGN_INS, &subjects).await;
        match limiter.check_failures(SIGN_INS, &subjects).await {
            Err(WalletOpsError::Throttled { retry_after, .. }) => {
                assert!(retry_after > Duration::from_secs(890), "{retry_after:?}");
            }
            other => panic!("expected throttled, got {other:?}"),
        }
        // The name is throttled from any address; another name from another address is not.
        assert!(
            limiter
                .check_failures(SIGN_INS, &[name, other.clone()])
                .await
                .is_err()
        );
        limiter
            .check_failures(SIGN_INS, &[format!("user:{}", uuid::Uuid::now_v7()), other])
            .await
            .expect("others apart");
    }

    fn limits() -> RateLimits {
        RateLimits {
            writes_per_minute: 3,
            reads_per_minute: 5,
            failed_auth_per_minute: 20,
        }
    }

    #[tokio::test]
    async fn failures_throttle_in_this_process() {
        throttles(RateLimiter::new(limits())).await;
    }

    /// Needs the Redis at `WALLETOPS_TEST_REDIS` (default the local one).
    #[tokio::test]
    async fn failures_throttle_through_redis() {
        let url = std::env::var("WALLETOPS_TEST_REDIS")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
        let limiter = RateLimiter::redis(limits(), &url)
            .await
            .expect("Redis is required for the rate-limit tests");
        throttles(limiter).await;
    }
}
