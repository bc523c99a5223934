//! The `[approvals]` section of the configuration.

use serde::{Deserialize, Serialize};

/// How writes held for approval are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// How long a held write waits for a decision before it expires, in seconds (1 hour).
    pub expire_after_secs: u64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            expire_after_secs: 3600,
        }
    }
}

impl ApprovalsConfig {
    /// `expire_after_secs`.
    pub fn expire_after(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::try_from(self.expire_after_secs).unwrap_or(i64::MAX))
    }

    /// Checks the values; an error names the setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=30 * 24 * 3600).contains(&self.expire_after_secs),
            "approvals.expire_after_secs must be 1 to 2592000 (30 days)"
        );
        Ok(())
    }
}
