//! Creates `keystore_check`: one row per database, a fixed text sealed under the first core's
//! master key, which every later core's key must open before it seals wallets.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum KeystoreCheck {
    Table,
    /// Always 1: one row per database.
    Id,
    /// AES-256-GCM nonce (12 bytes).
    Nonce,
    /// A fixed text sealed under the master key of the first core that started on this
    /// database: every later core's key must open it, so that two cores started at once on an
    /// empty database, each with a key it generated, cannot both seal wallets.
    Ciphertext,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(KeystoreCheck::Table)
                    .if_not_exists()
                    .col(integer(KeystoreCheck::Id).primary_key())
                    .col(blob(KeystoreCheck::Nonce))
                    .col(blob(KeystoreCheck::Ciphertext))
                    .col(timestamp_with_time_zone(KeystoreCheck::CreatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(KeystoreCheck::Table).to_owned())
            .await
    }
}
