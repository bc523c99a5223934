//! Indexes `transactions` by chain, sender and nonce, so that finding the records at one
//! wallet's nonce (the monitor, the idempotency purge) does not read the whole table.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Transactions {
    Table,
    ChainId,
    FromAddress,
    Nonce,
}

/// The records at one wallet's nonce are looked up by the monitor (a nonce found taken, a
/// filler that finds the dropped record mined) and by every idempotency purge (a key stays
/// while its ended record's nonce has an open record): without this index each lookup reads
/// the whole table, which only grows.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("idx_transactions_nonce")
                    .table(Transactions::Table)
                    .col(Transactions::ChainId)
                    .col(Transactions::FromAddress)
                    .col(Transactions::Nonce)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("idx_transactions_nonce")
                    .table(Transactions::Table)
                    .to_owned(),
            )
            .await
    }
}
