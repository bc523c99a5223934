//! Creates `quotes`: the quotes the service gave, so that a swap naming one (`quoteId`) is
//! held to its price by whichever core takes the swap.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// One quote given.
#[derive(DeriveIden)]
enum Quotes {
    Table,
    Id,
    UserId,
    /// The API key that asked; null for a dashboard session.
    KeyId,
    /// The chain's slug.
    Chain,
    /// The tokens as the quote resolved them (EVM lowercase 0x-hex, Solana base58).
    FromToken,
    ToToken,
    /// Base units, decimal.
    Amount,
    DstAmount,
    CreatedAt,
    /// Until when a swap may name it.
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Quotes::Table)
                    .if_not_exists()
                    .col(uuid(Quotes::Id).primary_key())
                    .col(uuid(Quotes::UserId))
                    .col(uuid_null(Quotes::KeyId))
                    .col(string_len(Quotes::Chain, 64))
                    .col(string_len(Quotes::FromToken, 64))
                    .col(string_len(Quotes::ToToken, 64))
                    .col(string_len(Quotes::Amount, 80))
                    .col(string_len(Quotes::DstAmount, 80))
                    .col(timestamp_with_time_zone(Quotes::CreatedAt))
                    .col(timestamp_with_time_zone(Quotes::ExpiresAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("quotes_expires_at")
                    .table(Quotes::Table)
                    .col(Quotes::ExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Quotes::Table).to_owned())
            .await
    }
}
