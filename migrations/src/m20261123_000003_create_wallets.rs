//! Creates `wallets`: one row per wallet of a user, unique by chain family and address, with
//! a partial unique index so that a user has at most one default wallet per family.

use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261123_000001_create_users::Users;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
pub(crate) enum Wallets {
    Table,
    Id,
    UserId,
    /// `ethereum` or `solana`.
    ChainType,
    Address,
    ProviderType,
    ClientType,
    ProviderWalletId,
    IsDefault,
    /// Delegated to the server signer.
    AutomationEnabled,
    /// Linked to the signing provider.
    Linked,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Wallets::Table)
                    .if_not_exists()
                    .col(pk_uuid(Wallets::Id))
                    .col(uuid(Wallets::UserId))
                    .col(string_len(Wallets::ChainType, 16))
                    .col(string_len(Wallets::Address, 64))
                    .col(string_len(Wallets::ProviderType, 32))
                    .col(string_len(Wallets::ClientType, 32))
                    .col(string_len_null(Wallets::ProviderWalletId, 128))
                    .col(boolean(Wallets::IsDefault))
                    .col(boolean(Wallets::AutomationEnabled))
                    .col(boolean(Wallets::Linked))
                    .col(timestamp_with_time_zone(Wallets::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Wallets::Table, Wallets::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_wallets_chain_address")
                    .table(Wallets::Table)
                    .col(Wallets::ChainType)
                    .col(Wallets::Address)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_wallets_user")
                    .table(Wallets::Table)
                    .col(Wallets::UserId)
                    .to_owned(),
            )
            .await?;
        // At most one default wallet per user and chain family, enforced by the database so
        // that two concurrent updates cannot both leave a default behind. Both SQLite and
        // PostgreSQL support partial unique indexes.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX idx_wallets_one_default \
                 ON wallets (user_id, chain_type) WHERE is_default",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Wallets::Table).to_owned())
            .await
    }
}
