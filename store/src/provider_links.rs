//! Users linked to the wallet provider, and their provider wallets kept in step with the
//! provider's listing.

use chrono::Utc;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel,
    QueryFilter, sea_query::Expr,
};
use uuid::Uuid;

use super::{
    Store,
    entities::{users, wallets},
    is_unique_violation,
    users::lock_user,
    wallets::clear_default,
};
use crate::error::{Result, StoreError};
use walletops_domain::{ChainFamily, LOCAL_CLIENT_TYPE, ProviderWallet, SyncReport, User};

/// Marks `user_id`'s provider wallets unlinked, inside `conn`'s transaction.
async fn unlink_provider_wallets<C: ConnectionTrait>(conn: &C, user_id: Uuid) -> Result<()> {
    wallets::Entity::update_many()
        .col_expr(wallets::Column::Linked, Expr::value(false))
        .filter(wallets::Column::UserId.eq(user_id))
        .filter(wallets::Column::ClientType.ne(LOCAL_CLIENT_TYPE))
        .exec(conn)
        .await?;
    Ok(())
}

impl Store {
    /// Links `user_id` to provider user `provider_user_id`; one already linked to another
    /// WalletOps user is `INVALID_INPUT` on `providerUserId`.
    pub async fn link_user(&self, user_id: Uuid, provider_user_id: &str) -> Result<()> {
        let updated = users::Entity::update_many()
            .col_expr(
                users::Column::ProviderUserId,
                Expr::value(provider_user_id.to_owned()),
            )
            .filter(users::Column::Id.eq(user_id))
            .exec(self.sea())
            .await;
        match updated {
            Ok(done) if done.rows_affected == 0 => Err(StoreError::NoSuchUser),
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(StoreError::ProviderUserTaken),
            Err(e) => Err(e.into()),
        }
    }

    /// Unlinks `user_id` from the provider: its provider wallets stay listed, but cannot be
    /// written from (USER_NOT_LINKED) until it is linked again.
    pub async fn unlink_user(&self, user_id: Uuid) -> Result<()> {
        let txn = self.begin_sea().await?;
        lock_user(&txn, user_id).await?;
        users::Entity::update_many()
            .col_expr(
                users::Column::ProviderUserId,
                Expr::value(Option::<String>::None),
            )
            .filter(users::Column::Id.eq(user_id))
            .exec(&txn)
            .await?;
        unlink_provider_wallets(&txn, user_id).await?;
        txn.commit().await?;
        self.keys.drop_all();
        Ok(())
    }

    /// Every user linked to the provider, oldest first.
    pub async fn linked_users(&self) -> Result<Vec<User>> {
        let mut users = self.list_users().await?;
        users.retain(|u| u.provider_user_id.is_some());
        Ok(users)
    }

    /// Brings `user_id`'s provider wallets in step with `listed`, the provider's listing, in
    /// one database transaction: new wallets are added, known ones updated (delegation,
    /// wallet id, kind), ones no longer listed marked removed (never deleted: their
    /// transactions stay readable). The first embedded wallet of a family becomes the
    /// user's default for it. `None` for `listed`: the provider has no such user any more,
    /// and every provider wallet of the user is unlinked.
    pub async fn sync_provider_wallets(
        &self,
        user_id: Uuid,
        listed: Option<&[ProviderWallet]>,
    ) -> Result<SyncReport> {
        let txn = self.begin_sea().await?;
        lock_user(&txn, user_id).await?;
        let now = Utc::now();
        let mut report = SyncReport::default();
        let known = wallets::Entity::find()
            .filter(wallets::Column::UserId.eq(user_id))
            .filter(wallets::Column::ClientType.ne(LOCAL_CLIENT_TYPE))
            .all(&txn)
            .await?;
        let Some(listed) = listed else {
            unlink_provider_wallets(&txn, user_id).await?;
            txn.commit().await?;
            self.keys.drop_all();
            return Ok(report);
        };
        for family in [ChainFamily::Evm, ChainFamily::Solana] {
            if listed
                .iter()
                .any(|w| w.family() == family && w.is_default())
            {
                clear_default(&txn, user_id, family).await?;
            }
        }
        for wallet in listed {
            let address = wallet.address.to_string();
            let found = wallets::Entity::find()
                .filter(wallets::Column::ChainType.eq(wallet.family().as_str()))
                .filter(wallets::Column::Address.eq(address.clone()))
                .one(&txn)
                .await?;
            let has_default = listed
                .iter()
                .any(|w| w.family() == wallet.family() && w.is_default());
            match found {
                Some(row) if row.user_id != user_id || row.client_type == LOCAL_CLIENT_TYPE => {
                    tracing::warn!(%user_id, address, "a provider wallet's address is held by another wallet; left alone");
                    report.conflicts += 1;
                }
                Some(row) => {
                    let is_default = if has_default {
                        wallet.is_default()
                    } else {
                        row.is_default
                    };
                    let mut active = row.into_active_model();
                    active.provider_type = Set(wallet.connector_type.clone());
                    active.client_type = Set(wallet.client_type.clone());
                    active.provider_wallet_id = Set(wallet.wallet_id.clone());
                    active.automation_enabled = Set(wallet.automation_enabled());
                    active.is_default = Set(is_default);
                    active.linked = Set(true);
                    active.removed_at = Set(None);
                    active.update(&txn).await?;
                    report.updated += 1;
                }
                None => {
                    wallets::ActiveModel {
                        id: Set(Uuid::now_v7()),
                        user_id: Set(user_id),
                        chain_type: Set(wallet.family().as_str().to_owned()),
                        address: Set(address),
                        provider_type: Set(wallet.connector_type.clone()),
                        client_type: Set(wallet.client_type.clone()),
                        provider_wallet_id: Set(wallet.wallet_id.clone()),
                        is_default: Set(wallet.is_default()),
                        automation_enabled: Set(wallet.automation_enabled()),
                        linked: Set(true),
                        created_at: Set(now),
                        removed_at: Set(None),
                    }
                    .insert(&txn)
                    .await?;
                    report.added += 1;
                }
            }
        }
        for row in known {
            if row.removed_at.is_some()
                || listed.iter().any(|w| w.address.to_string() == row.address)
            {
                continue;
            }
            let mut active = row.into_active_model();
            active.removed_at = Set(Some(now));
            active.automation_enabled = Set(false);
            active.is_default = Set(false);
            active.update(&txn).await?;
            report.removed += 1;
        }
        txn.commit().await?;
        self.keys.drop_all();
        Ok(report)
    }
}
