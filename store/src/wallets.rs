//! Wallets and their sealed signer keys: a wallet is stored together with the key that signs
//! for it, at most one per user and family is the default, and the keystore check guards which
//! master key may seal new ones.

use chrono::Utc;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
    QueryOrder, sea_query::Expr,
};
use uuid::Uuid;

use super::{
    Store,
    entities::{keystore_check, signer_keys, wallets},
    is_unique_violation,
    records::{sealed_row, stored_address},
};
use crate::{
    error::{Result, StoreError},
    key_cache::WalletKey,
};
use walletops_domain::{
    ChainFamily, EMBEDDED_PROVIDER_TYPE, HSM_PROVIDER_TYPE, LOCAL_CLIENT_TYPE, NewKey, NewWallet,
    SealedKey, Wallet, WalletAddress, WalletFilter,
};

impl TryFrom<wallets::Model> for Wallet {
    type Error = StoreError;

    fn try_from(m: wallets::Model) -> Result<Self> {
        let address = stored_address(&m.chain_type, &m.address)
            .map_err(|e| StoreError::Corrupt(anyhow::anyhow!("wallet {}: {e}", m.id)))?;
        Ok(Wallet {
            id: m.id,
            user_id: m.user_id,
            address,
            provider_type: m.provider_type,
            client_type: m.client_type,
            provider_wallet_id: m.provider_wallet_id,
            is_default: m.is_default,
            automation_enabled: m.automation_enabled,
            linked: m.linked,
            created_at: m.created_at,
            removed_at: m.removed_at,
        })
    }
}

fn to_wallets(rows: Vec<wallets::Model>) -> Result<Vec<Wallet>> {
    rows.into_iter().map(Wallet::try_from).collect()
}

/// Clears the default flag of `user_id`'s other wallets of `family`, inside `conn`'s
/// transaction, before one of them becomes the default (the partial unique index allows one).
pub(super) async fn clear_default<C: ConnectionTrait>(
    conn: &C,
    user_id: Uuid,
    family: ChainFamily,
) -> Result<()> {
    wallets::Entity::update_many()
        .col_expr(wallets::Column::IsDefault, Expr::value(false))
        .filter(wallets::Column::UserId.eq(user_id))
        .filter(wallets::Column::ChainType.eq(family.as_str()))
        .exec(conn)
        .await?;
    Ok(())
}

impl Store {
    /// The wallets of `user_id` that pass `filter`, oldest first.
    pub async fn list_wallets(&self, user_id: Uuid, filter: WalletFilter) -> Result<Vec<Wallet>> {
        let mut q = wallets::Entity::find().filter(wallets::Column::UserId.eq(user_id));
        if let Some(family) = filter.family {
            q = q.filter(wallets::Column::ChainType.eq(family.as_str()));
        }
        if filter.default_only {
            q = q.filter(wallets::Column::IsDefault.eq(true));
        }
        if filter.automation_only {
            q = q.filter(wallets::Column::AutomationEnabled.eq(true));
        }
        to_wallets(
            q.order_by_asc(wallets::Column::CreatedAt)
                .order_by_asc(wallets::Column::Id)
                .all(self.sea())
                .await?,
        )
    }

    /// Every wallet of `family`, whoever owns it, but those removed at the provider: the
    /// wallets a deposit scan watches.
    pub async fn wallets_of_family(&self, family: ChainFamily) -> Result<Vec<Wallet>> {
        to_wallets(
            wallets::Entity::find()
                .filter(wallets::Column::ChainType.eq(family.as_str()))
                .filter(wallets::Column::RemovedAt.is_null())
                .order_by_asc(wallets::Column::CreatedAt)
                .all(self.sea())
                .await?,
        )
    }

    /// `user_id`'s default wallet of `family`, for a request that only reads: from memory
    /// while this core hears of wallet changes (`watch_key_changes`), which drop what it holds.
    pub async fn default_wallet_for_read(
        &self,
        user_id: Uuid,
        family: ChainFamily,
    ) -> Result<Option<Wallet>> {
        let read = self.default_wallet(user_id, family);
        self.wallet_for_read(WalletKey::Default(user_id, family), read)
            .await
    }

    /// `user_id`'s default wallet of `family`, if it has one.
    pub async fn default_wallet(
        &self,
        user_id: Uuid,
        family: ChainFamily,
    ) -> Result<Option<Wallet>> {
        let filter = WalletFilter {
            family: Some(family),
            default_only: true,
            automation_only: false,
        };
        Ok(self.list_wallets(user_id, filter).await?.into_iter().next())
    }

    /// `find_wallet` for a request that only reads, as `default_wallet_for_read`.
    pub async fn find_wallet_for_read(&self, address: &WalletAddress) -> Result<Option<Wallet>> {
        self.wallet_for_read(WalletKey::At(*address), self.find_wallet(address))
            .await
    }

    /// The wallet named `key` if held; else what `read` finds in the database, kept.
    async fn wallet_for_read(
        &self,
        key: WalletKey,
        read: impl Future<Output = Result<Option<Wallet>>>,
    ) -> Result<Option<Wallet>> {
        let generation = match self.keys.wallet(&key) {
            Ok(held) => return Ok(Some(held)),
            Err(generation) => generation,
        };
        let found = read.await?;
        if let Some(wallet) = &found {
            self.keys.put_wallet(key, wallet.clone(), generation);
        }
        Ok(found)
    }

    /// The wallet at `address`, whoever owns it.
    pub async fn find_wallet(&self, address: &WalletAddress) -> Result<Option<Wallet>> {
        wallets::Entity::find()
            .filter(wallets::Column::ChainType.eq(address.family().as_str()))
            .filter(wallets::Column::Address.eq(address.to_string()))
            .one(self.sea())
            .await?
            .map(Wallet::try_from)
            .transpose()
    }

    /// Stores a new delegated wallet and its sealed key in one transaction: a wallet is never
    /// stored without the key that signs for it (an HSM wallet's key is in the HSM, labelled
    /// with the wallet's id).
    /// `ours` says whether the database's keystore check opens under the master key that
    /// sealed `new.key`: a core whose key was rotated away must not seal new wallets under
    /// it (the rotation, which re-sealed the others, would never see this one).
    pub async fn insert_wallet(
        &self,
        new: NewWallet,
        ours: impl Fn(&SealedKey) -> bool,
    ) -> Result<Wallet> {
        let family = new.address.family();
        let address = new.address.to_string();
        let txn = self.begin_sea().await?;
        super::rotation::refuse_rotated_away(&txn, ours).await?;
        // Two concurrent creations would both find no default and both make one.
        super::users::lock_user(&txn, new.user_id).await?;
        let has_default = wallets::Entity::find()
            .filter(wallets::Column::UserId.eq(new.user_id))
            .filter(wallets::Column::ChainType.eq(family.as_str()))
            .filter(wallets::Column::IsDefault.eq(true))
            .one(&txn)
            .await?
            .is_some();
        // The test of concurrent creations lingers here without blocking its thread.
        #[cfg(feature = "failpoints")]
        if fail::eval("wallet-after-default-read", |_| ()).is_some() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let is_default = new.make_default || !has_default;
        if is_default {
            clear_default(&txn, new.user_id, family).await?;
        }
        let now = Utc::now();
        let (id, provider_type) = match &new.key {
            NewKey::Sealed(_) => (Uuid::now_v7(), EMBEDDED_PROVIDER_TYPE),
            NewKey::Hsm { id } => (*id, HSM_PROVIDER_TYPE),
        };
        let row = wallets::ActiveModel {
            id: Set(id),
            user_id: Set(new.user_id),
            chain_type: Set(family.as_str().to_owned()),
            address: Set(address.clone()),
            provider_type: Set(provider_type.to_owned()),
            client_type: Set(LOCAL_CLIENT_TYPE.to_owned()),
            // The key's label in the HSM too.
            provider_wallet_id: Set(Some(id.to_string())),
            is_default: Set(is_default),
            automation_enabled: Set(true),
            linked: Set(true),
            created_at: Set(now),
            removed_at: Set(None),
        };
        let wallet = match row.insert(&txn).await {
            Ok(m) => Wallet::try_from(m)?,
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::Corrupt(anyhow::anyhow!(
                    "generated address {} already stored",
                    new.address
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if let NewKey::Sealed(key) = new.key {
            signer_keys::ActiveModel {
                wallet_id: Set(id),
                chain_type: Set(family.as_str().to_owned()),
                address: Set(address),
                nonce: Set(key.nonce),
                ciphertext: Set(key.ciphertext),
                created_at: Set(now),
            }
            .insert(&txn)
            .await?;
        }
        txn.commit().await?;
        self.keys.drop_all();
        Ok(wallet)
    }

    /// Makes `wallet` its owner's default for its family.
    pub async fn make_default_wallet(&self, wallet: &Wallet) -> Result<()> {
        let txn = self.begin_sea().await?;
        super::users::lock_user(&txn, wallet.user_id).await?;
        clear_default(&txn, wallet.user_id, wallet.family()).await?;
        wallets::Entity::update_many()
            .col_expr(wallets::Column::IsDefault, Expr::value(true))
            .filter(wallets::Column::Id.eq(wallet.id))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        self.keys.drop_all();
        Ok(())
    }

    /// Delegates `wallet` to the server signer, or withdraws the delegation.
    pub async fn set_wallet_automation(&self, wallet: &Wallet, enabled: bool) -> Result<()> {
        wallets::Entity::update_many()
            .col_expr(wallets::Column::AutomationEnabled, Expr::value(enabled))
            .filter(wallets::Column::Id.eq(wallet.id))
            .exec(self.sea())
            .await?;
        self.keys.drop_all();
        Ok(())
    }

    /// The wallet with id `id`.
    pub async fn wallet_by_id(&self, id: Uuid) -> Result<Option<Wallet>> {
        wallets::Entity::find_by_id(id)
            .one(self.sea())
            .await?
            .map(Wallet::try_from)
            .transpose()
    }
}

impl Store {
    /// One sealed key of the database, if it holds any: the address it was sealed for and
    /// the key, for checking that the master key opens them.
    pub async fn any_sealed_key(&self) -> Result<Option<(WalletAddress, SealedKey)>> {
        let Some(m) = signer_keys::Entity::find()
            .order_by_asc(signer_keys::Column::CreatedAt)
            .one(self.sea())
            .await?
        else {
            return Ok(None);
        };
        sealed_row(m).map(Some)
    }

    /// The keystore check of this database: `proposed` when it had none, which is then
    /// stored, or the one a core stored before (a lost race included).
    pub async fn claim_keystore_check(&self, proposed: SealedKey) -> Result<SealedKey> {
        keystore_check::Entity::insert(keystore_check::ActiveModel {
            id: Set(1),
            nonce: Set(proposed.nonce),
            ciphertext: Set(proposed.ciphertext),
            created_at: Set(Utc::now()),
        })
        .on_conflict_do_nothing()
        .exec_without_returning(self.sea())
        .await?;
        let stored = keystore_check::Entity::find_by_id(1)
            .one(self.sea())
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(anyhow::anyhow!("the keystore check was not stored"))
            })?;
        Ok(SealedKey {
            nonce: stored.nonce,
            ciphertext: stored.ciphertext,
        })
    }

    /// The sealed private key of wallet `wallet_id`, with the address it was sealed for.
    pub async fn sealed_key(&self, wallet_id: Uuid) -> Result<Option<(WalletAddress, SealedKey)>> {
        let Some(m) = signer_keys::Entity::find_by_id(wallet_id)
            .one(self.sea())
            .await?
        else {
            return Ok(None);
        };
        sealed_row(m).map(Some)
    }
}
