//! Creates `spend_limits` (what one API key may spend of one asset on one chain, per write and
//! per day) and `spend_reservations` (the amounts its writes hold against those limits).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// What one API key may spend of one asset on one chain.
#[derive(DeriveIden)]
enum SpendLimits {
    Table,
    KeyId,
    /// The chain's slug.
    Chain,
    /// `native`, or the token's address (EVM, lowercase) or mint (Solana).
    Asset,
    /// The most one write may move, in base units (a decimal integer); NULL: no such limit.
    MaxPerTransaction,
    /// The most all writes of a rolling 24 hours may move, in base units; NULL: none.
    DailyBudget,
    CreatedAt,
    UpdatedAt,
}

/// An amount a write of a limited key holds against its budget: reserved in the transaction
/// that signs the write and claims its idempotency key, released when the record ends
/// without moving it (FAILED, DROPPED).
#[derive(DeriveIden)]
enum SpendReservations {
    Table,
    Id,
    KeyId,
    Chain,
    Asset,
    /// Base units, a decimal integer.
    Amount,
    TransactionId,
    CreatedAt,
    ReleasedAt,
}

const LIMITS_KEY: &str = "idx_spend_limits_key";
const RESERVED_BY_ASSET: &str = "idx_spend_reservations_key_asset";
const RESERVED_BY_TRANSACTION: &str = "idx_spend_reservations_transaction";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SpendLimits::Table)
                    .if_not_exists()
                    .col(uuid(SpendLimits::KeyId))
                    .col(string_len(SpendLimits::Chain, 64))
                    .col(string_len(SpendLimits::Asset, 64))
                    .col(string_len_null(SpendLimits::MaxPerTransaction, 80))
                    .col(string_len_null(SpendLimits::DailyBudget, 80))
                    .col(timestamp_with_time_zone(SpendLimits::CreatedAt))
                    .col(timestamp_with_time_zone(SpendLimits::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(SpendLimits::KeyId)
                            .col(SpendLimits::Chain)
                            .col(SpendLimits::Asset),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(LIMITS_KEY)
                    .table(SpendLimits::Table)
                    .col(SpendLimits::KeyId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SpendReservations::Table)
                    .if_not_exists()
                    .col(pk_uuid(SpendReservations::Id))
                    .col(uuid(SpendReservations::KeyId))
                    .col(string_len(SpendReservations::Chain, 64))
                    .col(string_len(SpendReservations::Asset, 64))
                    .col(string_len(SpendReservations::Amount, 80))
                    .col(uuid(SpendReservations::TransactionId))
                    .col(timestamp_with_time_zone(SpendReservations::CreatedAt))
                    .col(timestamp_with_time_zone_null(SpendReservations::ReleasedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(RESERVED_BY_ASSET)
                    .table(SpendReservations::Table)
                    .col(SpendReservations::KeyId)
                    .col(SpendReservations::Chain)
                    .col(SpendReservations::Asset)
                    .col(SpendReservations::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(RESERVED_BY_TRANSACTION)
                    .table(SpendReservations::Table)
                    .col(SpendReservations::TransactionId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SpendReservations::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(SpendLimits::Table).to_owned())
            .await
    }
}
