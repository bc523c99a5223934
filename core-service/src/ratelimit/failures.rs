//! Failed attempts (API keys, dashboard sign-ins, sign-in links) counted per subject over a
//! sliding window: a client address, a key prefix, a (user name, client) pair. Once a
//! subject has `limit` failures in the window, attempts are refused until the oldest failure
//! leaves it, or, for a limit that backs off, until a delay doubling with each further
//! failure has passed since the newest. Kept where the request budgets are: in this
//! process, or in Redis for every core.

use std::{
    collections::{HashMap, VecDeque},
    sync::{LazyLock, Mutex, PoisonError},
    time::{Duration, Instant},
};

use super::{REDIS_TIMEOUT, RateLimiter, Windows};
use crate::error::{Result, WalletOpsError};

/// For each subject (KEYS), the failures in the window; `wait`: the milliseconds until the
/// subject with `limit` of them may try again (the longest wait), 0 when none has. ARGV[3],
/// when not 0, is the first delay of a backoff.
macro_rules! wait_lua {
    () => {
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local first = tonumber(ARGV[3])
local wait = 0
for _, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local n = redis.call('ZCARD', key)
  if n >= limit then
    if first > 0 then
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      local delay = math.min(window, first * 2 ^ math.min(n - limit, 30))
      wait = math.max(wait, tonumber(newest[2]) + delay - now)
    else
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      wait = math.max(wait, math.max(1, tonumber(oldest[2]) + window - now))
    end
  end
end
wait = math.max(0, math.floor(wait))
"#
    };
}

/// The wait of `wait_lua`: one round trip for every subject of a request.
const REDIS_CHECK: &str = concat!(wait_lua!(), "return wait\n");

/// `REDIS_CHECK`, and when no subject must wait, notes one failure (ARGV[4]) for each in the
/// same step: attempts made at once cannot all pass the check before any is counted.
const REDIS_ATTEMPT: &str = concat!(
    wait_lua!(),
    r#"
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
end
return 0
"#
);

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

/// Takes back one failure (ARGV[1]) of each subject (KEYS).
const REDIS_FORGIVE: &str = r#"
for _, key in ipairs(KEYS) do
  redis.call('ZREM', key, ARGV[1])
end
return 0
"#;

static FORGIVE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDIS_FORGIVE));
static ATTEMPT_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(REDIS_ATTEMPT));
static CHECK_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDIS_CHECK));
static RECORD_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REDIS_RECORD));

/// The longest failure window in use: pruning keeps what is younger.
pub(super) const LONGEST_WINDOW: Duration = Duration::from_secs(3600);

/// The failures of each subject in this process, oldest first, each with its id.
pub(super) type LocalFailures = Mutex<HashMap<String, VecDeque<(Instant, uuid::Uuid)>>>;

/// The most failures a backoff counts past its limit: the delay stops doubling there.
const BACKOFF_STEPS: u32 = 30;

/// One failure counted, which `forgive` can take back.
#[derive(Debug)]
pub struct Counted(uuid::Uuid);

/// How many failures a kind of attempt allows, and over what window.
#[derive(Debug, Clone, Copy)]
pub struct FailureLimit {
    /// What fails, for the refusal's message: `sign-ins`.
    pub what: &'static str,
    /// Failures allowed in the window.
    pub limit: u32,
    /// The window.
    pub window: Duration,
    /// When set, a subject at the limit waits this long after its newest failure, twice as
    /// long after each further one (at most `window`), instead of until its oldest leaves.
    pub backoff: Option<Duration>,
}

impl FailureLimit {
    /// ARGV[1..3] of the scripts that judge a wait: window, limit, first backoff delay.
    fn redis_args(&self) -> [String; 3] {
        [
            self.window.as_millis().to_string(),
            self.limit.to_string(),
            self.backoff.map_or(0, |d| d.as_millis()).to_string(),
        ]
    }

    /// Notes failure `id` at `now` in `log`, keeping only what deciding needs: the limit's
    /// worth of failures, and the backoff's steps past it.
    fn note(&self, log: &mut VecDeque<(Instant, uuid::Uuid)>, now: Instant, id: uuid::Uuid) {
        log.push_back((now, id));
        let kept = self.limit + self.backoff.map_or(0, |_| BACKOFF_STEPS);
        while log.len() > kept as usize {
            log.pop_front();
        }
    }

    /// How long a subject whose failures are `log` must wait at `now`, the failures that
    /// left the window dropped first.
    fn prune_and_wait(&self, log: &mut VecDeque<(Instant, uuid::Uuid)>, now: Instant) -> Duration {
        while log
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) >= self.window)
        {
            log.pop_front();
        }
        self.wait(log, now)
    }

    /// How long a subject whose failures in the window are `log` (oldest first) must wait.
    fn wait(&self, log: &VecDeque<(Instant, uuid::Uuid)>, now: Instant) -> Duration {
        let n = log.len() as u32;
        if n < self.limit {
            return Duration::ZERO;
        }
        let (Some((oldest, _)), Some((newest, _))) = (log.front(), log.back()) else {
            return Duration::ZERO;
        };
        match self.backoff {
            Some(first) => {
                let delay = first
                    .saturating_mul(1 << (n - self.limit).min(BACKOFF_STEPS))
                    .min(self.window);
                delay.saturating_sub(now.duration_since(*newest))
            }
            None => self.window.saturating_sub(now.duration_since(*oldest)),
        }
    }
}

impl RateLimiter {
    /// Failed authentications allowed per client and per key prefix:
    /// `rate_limits.failed_auth_per_minute` in a minute.
    pub fn failed_auth(&self) -> FailureLimit {
        FailureLimit {
            what: "authentications",
            limit: self.limits.failed_auth_per_minute,
            window: Duration::from_secs(60),
            backoff: None,
        }
    }

    /// `outcome`, an attempt cheap to check (a key's hash), counted: a success passes
    /// whatever the count, so that others' failures never refuse a valid credential; an
    /// `UNAUTHORIZED` is counted against `subjects`, and answered `RATE_LIMITED` instead once
    /// they are past the limit.
    pub async fn counted<T>(
        &self,
        limit: FailureLimit,
        subjects: &[String],
        outcome: Result<T>,
    ) -> Result<T> {
        if let Err(WalletOpsError::Unauthorized(_)) = &outcome {
            self.check_failures(limit, subjects).await?;
            self.record_failure(limit, subjects).await;
        }
        outcome
    }

    /// Admits one slow attempt (a password to hash) of `subjects`, counted as a failure in
    /// the same step as the check (`forgive` takes it back on success): attempts made at
    /// once cannot all pass the check before any is counted. `RATE_LIMITED` when one of
    /// them must wait, counted nowhere.
    pub async fn attempt(&self, limit: FailureLimit, subjects: &[String]) -> Result<Counted> {
        let id = uuid::Uuid::now_v7();
        let wait = match &self.windows {
            Windows::Local(_) => {
                let now = Instant::now();
                let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                let mut wait = Duration::ZERO;
                for subject in subjects {
                    let log = failures.entry(subject.clone()).or_default();
                    wait = wait.max(limit.prune_and_wait(log, now));
                }
                if wait.is_zero() {
                    for subject in subjects {
                        limit.note(failures.entry(subject.clone()).or_default(), now, id);
                    }
                }
                wait
            }
            Windows::Redis { connection, .. } => {
                let [window, most, first] = limit.redis_args();
                let args = [window, most, first, id.to_string()];
                match on_redis(connection, &ATTEMPT_SCRIPT, subjects, &args).await {
                    Some(ms) => Duration::from_millis(ms),
                    None => {
                        tracing::warn!("failure throttle unreachable; admitting uncounted");
                        Duration::ZERO
                    }
                }
            }
        };
        if wait.is_zero() {
            return Ok(Counted(id));
        }
        Err(WalletOpsError::Throttled {
            what: limit.what,
            limit: limit.limit,
            window: limit.window,
            retry_after: wait,
        })
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

    /// Counts one failure for each of `subjects`: before the attempt is checked where the
    /// check is slow (a password hash), so that attempts made at once all count; `forgive`
    /// takes it back when the attempt succeeds.
    pub async fn record_failure(&self, limit: FailureLimit, subjects: &[String]) -> Counted {
        let id = uuid::Uuid::now_v7();
        match &self.windows {
            Windows::Local(_) => {
                let now = Instant::now();
                let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                for subject in subjects {
                    limit.note(failures.entry(subject.clone()).or_default(), now, id);
                }
            }
            Windows::Redis { connection, .. } => {
                let args = [limit.window.as_millis().to_string(), id.to_string()];
                if on_redis(connection, &RECORD_SCRIPT, subjects, &args)
                    .await
                    .is_none()
                {
                    tracing::warn!("failure throttle unreachable; failure not counted");
                }
            }
        }
        Counted(id)
    }

    /// Takes back failure `counted` of each of `subjects`: the attempt succeeded.
    pub async fn forgive(&self, counted: Counted, subjects: &[String]) {
        match &self.windows {
            Windows::Local(_) => {
                let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
                for subject in subjects {
                    if let Some(log) = failures.get_mut(subject) {
                        log.retain(|(_, id)| *id != counted.0);
                    }
                }
            }
            Windows::Redis { connection, .. } => {
                let args = [counted.0.to_string()];
                if on_redis(connection, &FORGIVE_SCRIPT, subjects, &args)
                    .await
                    .is_none()
                {
                    tracing::warn!("failure throttle unreachable; failure not taken back");
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
                    wait = wait.max(limit.prune_and_wait(log, now));
                }
                wait
            }
            // One round trip for every subject of the request.
            Windows::Redis { connection, .. } => {
                let args = limit.redis_args();
                match on_redis(connection, &CHECK_SCRIPT, subjects, &args).await {
                    Some(ms) => Duration::from_millis(ms),
                    // As for the budgets: an outage of the limiter is not an outage of
                    // the service.
                    None => {
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
            .retain(|_, log| {
                log.back()
                    .is_some_and(|(t, _)| now.duration_since(*t) < window)
            });
    }
}

/// Runs `script` with `subjects` as its keys and `args`, one round trip; `None` when Redis
/// did not answer in time.
async fn on_redis(
    connection: &redis::aio::ConnectionManager,
    script: &redis::Script,
    subjects: &[String],
    args: &[String],
) -> Option<u64> {
    let mut invocation = script.prepare_invoke();
    for subject in subjects {
        invocation.key(redis_key(subject));
    }
    for arg in args {
        invocation.arg(arg);
    }
    let mut connection = connection.clone();
    tokio::time::timeout(
        REDIS_TIMEOUT,
        invocation.invoke_async::<u64>(&mut connection),
    )
    .await
    .ok()?
    .ok()
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
        backoff: None,
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

    const BACKOFF: FailureLimit = FailureLimit {
        what: "sign-ins",
        limit: 2,
        window: Duration::from_secs(3600),
        backoff: Some(Duration::from_secs(10)),
    };

    fn waits(outcome: Result<()>) -> Duration {
        match outcome {
            Err(WalletOpsError::Throttled { retry_after, .. }) => retry_after,
            Ok(()) => Duration::ZERO,
            other => panic!("expected throttled, got {other:?}"),
        }
    }

    /// From the limit on, the wait doubles with each failure; a forgiven failure no longer
    /// counts.
    async fn backs_off(limiter: RateLimiter) {
        let pair = [format!("pair:{}", uuid::Uuid::now_v7())];
        limiter.record_failure(BACKOFF, &pair).await;
        assert_eq!(
            waits(limiter.check_failures(BACKOFF, &pair).await),
            Duration::ZERO
        );
        let second = limiter.record_failure(BACKOFF, &pair).await;
        let first_wait = waits(limiter.check_failures(BACKOFF, &pair).await);
        assert!((Duration::from_secs(9)..=Duration::from_secs(10)).contains(&first_wait));
        limiter.record_failure(BACKOFF, &pair).await;
        let next_wait = waits(limiter.check_failures(BACKOFF, &pair).await);
        assert!((Duration::from_secs(19)..=Duration::from_secs(20)).contains(&next_wait));
        limiter.forgive(second, &pair).await;
        let forgiven = waits(limiter.check_failures(BACKOFF, &pair).await);
        assert!(forgiven <= Duration::from_secs(10), "{forgiven:?}");
    }

    /// A success passes whatever the count; failures past the limit are RATE_LIMITED.
    async fn counts_only_failures(limiter: RateLimiter) {
        let subject = [format!("client:{}", uuid::Uuid::now_v7())];
        for _ in 0..2 {
            let failed = limiter
                .counted(
                    SIGN_INS,
                    &subject,
                    Err::<(), _>(WalletOpsError::Unauthorized("no")),
                )
                .await;
            assert!(matches!(failed, Err(WalletOpsError::Unauthorized(_))));
        }
        let failed = limiter
            .counted(
                SIGN_INS,
                &subject,
                Err::<(), _>(WalletOpsError::Unauthorized("no")),
            )
            .await;
        assert!(matches!(failed, Err(WalletOpsError::Throttled { .. })));
        assert!(limiter.counted(SIGN_INS, &subject, Ok(())).await.is_ok());
    }

    /// Attempts made at once: only the limit's worth pass, each counted as it passes.
    async fn attempts_at_once_are_counted_as_they_pass(limiter: RateLimiter) {
        let subject = [format!("pair:{}", uuid::Uuid::now_v7())];
        let tries = (0..10).map(|_| limiter.attempt(SIGN_INS, &subject));
        let passed = futures::future::join_all(tries)
            .await
            .into_iter()
            .filter(Result::is_ok)
            .count();
        assert_eq!(passed, 2);
    }

    fn limits() -> RateLimits {
        RateLimits {
            writes_per_minute: 3,
            reads_per_minute: 5,
            failed_auth_per_minute: 20,
            ..RateLimits::default()
        }
    }

    #[tokio::test]
    async fn failures_throttle_in_this_process() {
        throttles(RateLimiter::new(limits())).await;
        backs_off(RateLimiter::new(limits())).await;
        counts_only_failures(RateLimiter::new(limits())).await;
        attempts_at_once_are_counted_as_they_pass(RateLimiter::new(limits())).await;
    }

    /// Needs the Redis at `WALLETOPS_TEST_REDIS` (default the local one).
    #[tokio::test]
    async fn failures_throttle_through_redis() {
        let url = std::env::var("WALLETOPS_TEST_REDIS")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
        let limiter = || async {
            RateLimiter::redis(limits(), &url)
                .await
                .expect("Redis is required for the rate-limit tests")
        };
        throttles(limiter().await).await;
        backs_off(limiter().await).await;
        counts_only_failures(limiter().await).await;
        attempts_at_once_are_counted_as_they_pass(limiter().await).await;
    }
}
