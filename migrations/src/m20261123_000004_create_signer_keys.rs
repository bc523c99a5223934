//! Creates `signer_keys`: the private key of each delegated wallet, sealed under the master
//! key (AES-256-GCM). A wallet that has one cannot be deleted from under it.

use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261123_000003_create_wallets::Wallets;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum SignerKeys {
    Table,
    WalletId,
    ChainType,
    Address,
    /// AES-256-GCM nonce (12 bytes), fresh for every encryption.
    Nonce,
    /// The private key sealed under the master key, with the address as associated data.
    Ciphertext,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SignerKeys::Table)
                    .if_not_exists()
                    .col(pk_uuid(SignerKeys::WalletId))
                    .col(string_len(SignerKeys::ChainType, 16))
                    .col(string_len(SignerKeys::Address, 64))
                    .col(blob(SignerKeys::Nonce))
                    .col(blob(SignerKeys::Ciphertext))
                    .col(timestamp_with_time_zone(SignerKeys::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(SignerKeys::Table, SignerKeys::WalletId)
                            .to(Wallets::Table, Wallets::Id)
                            .on_delete(ForeignKeyAction::Restrict),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SignerKeys::Table).to_owned())
            .await
    }
}
