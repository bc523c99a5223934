//! Creates `payouts` (a batch of recipients paid from one wallet, stored under its
//! Idempotency-Key) and `payout_items` (each recipient, and what became of its write).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// A payout: stored whole, with its items, before any of them is made.
#[derive(DeriveIden)]
enum Payouts {
    Table,
    Id,
    UserId,
    /// The key that made it; NULL: a dashboard session.
    KeyId,
    /// Unique per user: a replay answers the same payout.
    IdempotencyKey,
    RequestHash,
    Chain,
    FromAddress,
    /// running, completed.
    State,
    CreatedAt,
    CompletedAt,
    /// Until when a core makes and follows its items (one core at a time).
    LeaseOwner,
    LeaseUntil,
}

/// One recipient of a payout.
#[derive(DeriveIden)]
enum PayoutItems {
    Table,
    PayoutId,
    /// Its place in the request, from 0.
    Idx,
    ToAddress,
    /// native, erc20, spl.
    Asset,
    Token,
    /// Base units.
    Amount,
    Reference,
    /// queued, submitted, held, failed.
    Made,
    /// The transaction record (submitted) or the approval (held).
    MadeId,
    Error,
}

const BY_KEY: &str = "idx_payouts_user_idempotency_key";
const BY_STATE: &str = "idx_payouts_state";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Payouts::Table)
                    .if_not_exists()
                    .col(pk_uuid(Payouts::Id))
                    .col(uuid(Payouts::UserId))
                    .col(uuid_null(Payouts::KeyId))
                    .col(uuid(Payouts::IdempotencyKey))
                    .col(string_len(Payouts::RequestHash, 64))
                    .col(string_len(Payouts::Chain, 64))
                    .col(string_len(Payouts::FromAddress, 64))
                    .col(string_len(Payouts::State, 16))
                    .col(timestamp_with_time_zone(Payouts::CreatedAt))
                    .col(timestamp_with_time_zone_null(Payouts::CompletedAt))
                    .col(uuid_null(Payouts::LeaseOwner))
                    .col(timestamp_with_time_zone_null(Payouts::LeaseUntil))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_KEY)
                    .table(Payouts::Table)
                    .col(Payouts::UserId)
                    .col(Payouts::IdempotencyKey)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_STATE)
                    .table(Payouts::Table)
                    .col(Payouts::State)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(PayoutItems::Table)
                    .if_not_exists()
                    .col(uuid(PayoutItems::PayoutId))
                    .col(integer(PayoutItems::Idx))
                    .col(string_len(PayoutItems::ToAddress, 64))
                    .col(string_len(PayoutItems::Asset, 16))
                    .col(string_len_null(PayoutItems::Token, 64))
                    .col(string_len(PayoutItems::Amount, 80))
                    .col(string_len_null(PayoutItems::Reference, 200))
                    .col(string_len(PayoutItems::Made, 16))
                    .col(uuid_null(PayoutItems::MadeId))
                    .col(text_null(PayoutItems::Error))
                    .primary_key(
                        Index::create()
                            .col(PayoutItems::PayoutId)
                            .col(PayoutItems::Idx),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(PayoutItems::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Payouts::Table).to_owned())
            .await
    }
}
