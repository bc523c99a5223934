//! The `[webhooks]` section of the configuration.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How webhooks are delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Accept endpoints whose host resolves to loopback, private or link-local addresses
    /// (receivers inside the operator's network; tests). Off: such URLs are refused, at
    /// registration and at every delivery.
    pub allow_private_targets: bool,
    /// How long a delivery is retried before it is dead-lettered, in seconds (24 hours).
    pub retry_for_secs: u64,
    /// The wait before the first retry, in milliseconds; each later wait doubles, with
    /// jitter, up to `max_retry_interval_secs`.
    pub first_retry_ms: u64,
    /// The longest wait between two attempts, in seconds.
    pub max_retry_interval_secs: u64,
    /// How long an endpoint has to answer an attempt, in seconds.
    pub timeout_secs: u64,
    /// The most deliveries to one endpoint in flight at once, over every core: an endpoint
    /// that is slow or never answers holds this many, and the others go on being served.
    pub max_in_flight_per_endpoint: u64,
    /// An endpoint whose every attempt has failed for this long, in seconds, is disabled
    /// (5 days), until its owner enables it again.
    pub disable_after_secs: u64,
    /// The most deliveries one replay call puts back in line.
    pub replay_max_per_call: u64,
    /// The most deliveries a user may replay in any hour.
    pub replay_max_per_hour: u64,
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            retry_for_secs: 24 * 3600,
            first_retry_ms: 5_000,
            max_retry_interval_secs: 3600,
            timeout_secs: 10,
            max_in_flight_per_endpoint: 4,
            disable_after_secs: 5 * 24 * 3600,
            replay_max_per_call: 100,
            replay_max_per_hour: 1000,
        }
    }
}

impl WebhooksConfig {
    /// `retry_for_secs`.
    pub fn retry_for(&self) -> Duration {
        Duration::from_secs(self.retry_for_secs)
    }

    /// `timeout_secs`.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.max(1))
    }

    /// `disable_after_secs`.
    pub fn disable_after(&self) -> Duration {
        Duration::from_secs(self.disable_after_secs)
    }

    /// Checks the values; an error names the setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.retry_for_secs > 0,
            "webhooks.retry_for_secs must be at least 1"
        );
        anyhow::ensure!(
            self.first_retry_ms > 0,
            "webhooks.first_retry_ms must be at least 1"
        );
        anyhow::ensure!(
            self.max_retry_interval_secs.saturating_mul(1000) >= self.first_retry_ms,
            "webhooks.max_retry_interval_secs must not be shorter than webhooks.first_retry_ms"
        );
        anyhow::ensure!(
            (1..=60).contains(&self.timeout_secs),
            "webhooks.timeout_secs must be 1 to 60"
        );
        anyhow::ensure!(
            (1..=64).contains(&self.max_in_flight_per_endpoint),
            "webhooks.max_in_flight_per_endpoint must be 1 to 64"
        );
        anyhow::ensure!(
            self.disable_after_secs > 0,
            "webhooks.disable_after_secs must be at least 1"
        );
        anyhow::ensure!(
            (1..=500).contains(&self.replay_max_per_call),
            "webhooks.replay_max_per_call must be 1 to 500"
        );
        anyhow::ensure!(
            self.replay_max_per_hour >= self.replay_max_per_call,
            "webhooks.replay_max_per_hour must not be below webhooks.replay_max_per_call"
        );
        Ok(())
    }
}
