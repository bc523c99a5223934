//! The wallets delegated to the guard contract (EIP-7702), per chain: a limited key's write
//! from such a wallet runs through the guard's `execute`, with on-chain checks.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, sea_query::OnConflict};
use uuid::Uuid;

use super::{Store, entities::wallet_guards as guards};
use crate::error::Result;

/// A wallet's guard on one chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletGuard {
    /// The guarded wallet.
    pub wallet_id: Uuid,
    /// The chain's slug.
    pub chain: String,
    /// The guard contract the wallet delegates to, checksummed.
    pub guard: String,
    /// The delegating transaction.
    pub hash: String,
    /// When the delegation was sent.
    pub enabled_at: DateTime<Utc>,
}

impl From<guards::Model> for WalletGuard {
    fn from(m: guards::Model) -> Self {
        Self {
            wallet_id: m.wallet_id,
            chain: m.chain,
            guard: m.guard,
            hash: m.hash,
            enabled_at: m.enabled_at,
        }
    }
}

impl Store {
    /// The guard of `wallet_id` on `chain`, if it has one.
    pub async fn wallet_guard(&self, wallet_id: Uuid, chain: &str) -> Result<Option<WalletGuard>> {
        Ok(guards::Entity::find_by_id((wallet_id, chain.to_owned()))
            .one(self.sea())
            .await?
            .map(Into::into))
    }

    /// Notes `guard` as the guard of its wallet on its chain (replacing an earlier one).
    pub async fn set_wallet_guard(&self, guard: &WalletGuard) -> Result<()> {
        guards::Entity::insert(guards::ActiveModel {
            wallet_id: Set(guard.wallet_id),
            chain: Set(guard.chain.clone()),
            guard: Set(guard.guard.clone()),
            hash: Set(guard.hash.clone()),
            enabled_at: Set(guard.enabled_at),
        })
        .on_conflict(
            OnConflict::columns([guards::Column::WalletId, guards::Column::Chain])
                .update_columns([
                    guards::Column::Guard,
                    guards::Column::Hash,
                    guards::Column::EnabledAt,
                ])
                .to_owned(),
        )
        .exec(self.sea())
        .await?;
        Ok(())
    }

    /// Forgets the guard of `wallet_id` on `chain`: its writes run unguarded again. Whether
    /// it had one.
    pub async fn remove_wallet_guard(&self, wallet_id: Uuid, chain: &str) -> Result<bool> {
        let gone = guards::Entity::delete_many()
            .filter(guards::Column::WalletId.eq(wallet_id))
            .filter(guards::Column::Chain.eq(chain))
            .exec(self.sea())
            .await?;
        Ok(gone.rows_affected > 0)
    }
}
