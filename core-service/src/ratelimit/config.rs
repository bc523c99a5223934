//! The `[rate_limits]` section of the configuration.

use serde::{Deserialize, Serialize};

/// Requests per user per minute, counted over all of the user's keys.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimits {
    /// Writes (every write RPC, and GetQuote) per minute.
    pub writes_per_minute: u32,
    /// Reads per minute.
    pub reads_per_minute: u32,
    /// Failed authentications (bad, unknown, expired or revoked API keys, wrong admin
    /// tokens) per client address and per key prefix per minute; past it, failures are
    /// answered 429 instead of 401 (a valid key always passes).
    pub failed_auth_per_minute: u32,
    /// The share of the user's budgets one line of keys (a key and the keys made from it)
    /// may use, in percent, when the user has more than one line: one key cannot take all.
    pub key_share_percent: u32,
    /// What writes get while Redis (`redis_url`) cannot count them: refused (503), or
    /// admitted uncounted. Reads are always admitted.
    pub writes_when_redis_fails: WhenRedisFails,
}

/// What writes get while Redis is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenRedisFails {
    /// 503 `SERVICE_UNAVAILABLE`: no key writes past a budget no one counts.
    Refuse,
    /// Admitted uncounted: an outage of the limiter is not one of the service.
    Admit,
}

impl RateLimits {
    /// A line's share of `limit`: at least one request.
    pub fn key_share(&self, limit: u32) -> u32 {
        (u64::from(limit) * u64::from(self.key_share_percent))
            .div_ceil(100)
            .clamp(1, u64::from(limit.max(1))) as u32
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            writes_per_minute: 15,
            reads_per_minute: 60,
            failed_auth_per_minute: 20,
            key_share_percent: 50,
            writes_when_redis_fails: WhenRedisFails::Refuse,
        }
    }
}
