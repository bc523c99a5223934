//! The `[provider]` section of the configuration: where the wallet provider's API is, the
//! app's credentials, and how often linked users' wallets are synced.

use serde::{Deserialize, Serialize};

use super::auth::AuthorizationKey;
use walletops_domain::secret::Secret;

/// The wallet provider (the Privy wallet API).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Where the API is; the service appends `/v1/...`.
    pub base_url: url::Url,
    /// The app id, sent as the Basic user and as `privy-app-id`. Empty: no provider, and
    /// only local keystore wallets.
    pub app_id: String,
    /// The app secret, the Basic password. A secret: never logged, never in a message.
    pub app_secret: Secret,
    /// Base64 PKCS#8 P-256 private key (optionally prefixed `wallet-auth:`) that signs every
    /// wallet RPC as `privy-authorization-signature`; empty: none is sent. A secret.
    pub authorization_key: Secret,
    /// How often linked users' wallets are read again from the provider, in seconds.
    pub sync_interval_secs: u64,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            base_url: url::Url::parse("https://api.privy.io").expect("a valid URL literal"),
            app_id: String::new(),
            app_secret: Secret::default(),
            authorization_key: Secret::default(),
            sync_interval_secs: 300,
        }
    }
}

impl ProviderConfig {
    /// Whether a provider is configured at all.
    pub fn is_configured(&self) -> bool {
        !self.app_id.is_empty()
    }

    /// Refuses what no provider call could work with, naming the option (never its value).
    pub fn validate(&self) -> anyhow::Result<()> {
        crate::upstream::check_base_url("provider.base_url", &self.base_url)?;
        anyhow::ensure!(
            self.app_id.is_empty() == self.app_secret.is_empty(),
            "provider.app_id and provider.app_secret go together: set both or neither"
        );
        anyhow::ensure!(
            self.authorization_key.is_empty() || self.is_configured(),
            "provider.authorization_key is set but provider.app_id is not"
        );
        if !self.authorization_key.is_empty() {
            AuthorizationKey::parse(self.authorization_key.expose())?;
        }
        anyhow::ensure!(
            self.sync_interval_secs >= 1,
            "provider.sync_interval_secs must be at least 1"
        );
        Ok(())
    }
}
