//! Whether a caller admitted earlier may still act: what runs on after its admission (an
//! event stream) asks again, so that a revoked or expired key, or an ended session, ends it.

use super::{Caller, Credential, KeyState};
use crate::error::{Result, WalletOpsError};

impl super::ApiKeys {
    /// `UNAUTHORIZED` unless `caller`'s key is still active, or its session still open (not
    /// ended, within its absolute lifetime; a stream keeps a session in use, so its idle
    /// timeout does not end it).
    pub async fn still_stands(&self, caller: &Caller) -> Result<()> {
        let now = crate::clock::now();
        let stands = match &caller.credential {
            Credential::Key { id, .. } => self.store.api_key(*id).await?.is_some_and(|k| {
                k.user_id == caller.user_id
                    && matches!(k.state(now), KeyState::Active | KeyState::ExpiringSoon)
            }),
            Credential::Session { id } => self
                .store
                .session(*id)
                .await?
                .is_some_and(|s| s.ended_at.is_none() && s.expires_at > now),
        };
        if stands {
            Ok(())
        } else {
            Err(WalletOpsError::Unauthorized(
                "the key or session this stream was opened with was revoked, expired or ended",
            ))
        }
    }
}
