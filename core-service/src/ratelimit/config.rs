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
    /// tokens) per client address and per key prefix per minute; past it, requests are
    /// refused before the database is read.
    pub failed_auth_per_minute: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            writes_per_minute: 15,
            reads_per_minute: 60,
            failed_auth_per_minute: 20,
        }
    }
}
