//! Links users to the wallet provider: adds `users.provider_user_id` (unique, one user per
//! provider user) and `wallets.removed_at`, set when a provider wallet leaves the listing.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Users {
    Table,
    /// The user's id at the wallet provider (`did:privy:…`), when linked: its provider
    /// wallets are synced from there and signed for through the provider.
    ProviderUserId,
}

#[derive(DeriveIden)]
enum Wallets {
    Table,
    /// When a provider wallet disappeared from the provider's listing. It is kept (its
    /// transactions stay readable) but never signed for again.
    RemovedAt,
}

const USERS_PROVIDER_USER_ID: &str = "users_provider_user_id";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Users::Table)
                    .add_column(string_len_null(Users::ProviderUserId, 255))
                    .to_owned(),
            )
            .await?;
        // One WalletOps user per provider user: two would share the same wallets.
        manager
            .create_index(
                Index::create()
                    .name(USERS_PROVIDER_USER_ID)
                    .table(Users::Table)
                    .col(Users::ProviderUserId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Wallets::Table)
                    .add_column(timestamp_with_time_zone_null(Wallets::RemovedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Wallets::Table)
                    .drop_column(Wallets::RemovedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name(USERS_PROVIDER_USER_ID)
                    .table(Users::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Users::Table)
                    .drop_column(Users::ProviderUserId)
                    .to_owned(),
            )
            .await
    }
}
