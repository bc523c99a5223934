//! Master-key rotation: every sealed wallet key, webhook secret and the keystore check
//! re-sealed under a new master key in one transaction, and the guard that keeps a core
//! still running on the old key from sealing anything new under it.

use sea_orm::{ActiveModelTrait, ActiveValue::Set, EntityTrait, IntoActiveModel, QuerySelect};

use super::{
    Store,
    entities::{keystore_check, signer_keys, webhook_endpoints},
    records::sealed_row,
};
use crate::error::{Result, StoreError};
use walletops_domain::{SealedKey, WalletAddress};

/// The keystore check, read under a lock that a rotation's write waits for (a share lock on
/// PostgreSQL; SQLite's writers are serialized already).
pub(super) async fn locked_check<C: sea_orm::ConnectionTrait>(
    conn: &C,
    exclusive: bool,
) -> Result<Option<SealedKey>> {
    let query = keystore_check::Entity::find_by_id(1);
    let query = if exclusive {
        query.lock_exclusive()
    } else {
        query.lock_shared()
    };
    Ok(query.one(conn).await?.map(|m| SealedKey {
        nonce: m.nonce,
        ciphertext: m.ciphertext,
    }))
}

/// Refuses, in `conn`'s transaction, what a core whose master key was rotated away sealed
/// (`ours` says whether the database's keystore check opens under its key): the rotation,
/// which re-sealed the rest, would never see it.
pub(super) async fn refuse_rotated_away<C: sea_orm::ConnectionTrait>(
    conn: &C,
    ours: impl Fn(&SealedKey) -> bool,
) -> Result<()> {
    match locked_check(conn, false).await? {
        Some(check) if !ours(&check) => Err(StoreError::RotatedAway),
        _ => Ok(()),
    }
}

impl Store {
    /// Re-seals every wallet key with `reseal`, every webhook secret with `reseal_webhook`,
    /// and replaces the keystore check with
    /// `new_check`, in one transaction, once `opens_check` says the current check opens
    /// under the old key. Returns how many wallet keys were re-sealed.
    pub async fn rotate_keystore(
        &self,
        opens_check: impl Fn(&SealedKey) -> bool,
        reseal: impl Fn(&WalletAddress, &SealedKey) -> anyhow::Result<SealedKey>,
        reseal_webhook: impl Fn(uuid::Uuid, &SealedKey) -> anyhow::Result<SealedKey>,
        new_check: SealedKey,
    ) -> Result<usize> {
        let txn = self.begin_sea().await?;
        let check = locked_check(&txn, true)
            .await?
            .ok_or_else(|| StoreError::NoKeystoreCheck)?;
        if !opens_check(&check) {
            return Err(StoreError::CheckDoesNotOpen);
        }
        let mut row = keystore_check::Entity::find_by_id(1)
            .one(&txn)
            .await?
            .ok_or_else(|| StoreError::Corrupt(anyhow::anyhow!("keystore check vanished")))?
            .into_active_model();
        row.nonce = Set(new_check.nonce);
        row.ciphertext = Set(new_check.ciphertext);
        row.update(&txn).await?;
        let keys = signer_keys::Entity::find().all(&txn).await?;
        let count = keys.len();
        for m in keys {
            let mut active = m.clone().into_active_model();
            let (address, sealed) = sealed_row(m)?;
            let resealed = reseal(&address, &sealed).map_err(StoreError::Corrupt)?;
            active.nonce = Set(resealed.nonce);
            active.ciphertext = Set(resealed.ciphertext);
            active.update(&txn).await?;
        }
        for m in webhook_endpoints::Entity::find().all(&txn).await? {
            let sealed = SealedKey {
                nonce: m.secret_nonce.clone(),
                ciphertext: m.secret_ciphertext.clone(),
            };
            let resealed = reseal_webhook(m.id, &sealed).map_err(StoreError::Corrupt)?;
            let mut active = m.into_active_model();
            active.secret_nonce = Set(resealed.nonce);
            active.secret_ciphertext = Set(resealed.ciphertext);
            active.update(&txn).await?;
        }
        txn.commit().await?;
        Ok(count)
    }
}
