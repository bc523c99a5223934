//! Adds `spend_limits.approval_above` and creates `approvals`: a key's write over that amount
//! is held there, unsigned, until a person approves or rejects it or its deadline passes.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum SpendLimits {
    Table,
    /// A write of the key that moves more than this (base units) waits for a person's
    /// approval; NULL: none does.
    ApprovalAbove,
}

/// A write of a key held for a person's approval: the request as the key sent it, not
/// signed, until it is approved (then run under its own idempotency key), rejected, or left
/// past its deadline.
#[derive(DeriveIden)]
enum Approvals {
    Table,
    Id,
    UserId,
    KeyId,
    /// The write's Idempotency-Key: a retry answers from the approval, and the approved
    /// write claims it when it is signed.
    IdempotencyKey,
    /// The endpoint path (`/send`, ...).
    Path,
    /// The request's canonical protobuf encoding.
    Request,
    RequestHash,
    Chain,
    Asset,
    /// What the write moves, base units.
    Amount,
    /// The key's threshold it exceeded, base units.
    Threshold,
    /// What the write does, in a sentence for the person who decides.
    Summary,
    /// pending, approved, rejected, expired, submitted, failed.
    State,
    CreatedAt,
    ExpiresAt,
    DecidedBy,
    DecidedAt,
    Reason,
    /// The record the approved write made.
    TransactionId,
    /// Why the approved write was not made.
    Error,
    /// Until when a core runs the approved write (one core at a time).
    LeaseUntil,
}

const BY_KEY: &str = "idx_approvals_user_idempotency_key";
const BY_USER: &str = "idx_approvals_user_created";
const BY_STATE: &str = "idx_approvals_state_expires";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(SpendLimits::Table)
                    .add_column(string_len_null(SpendLimits::ApprovalAbove, 80))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Approvals::Table)
                    .if_not_exists()
                    .col(pk_uuid(Approvals::Id))
                    .col(uuid(Approvals::UserId))
                    .col(uuid(Approvals::KeyId))
                    .col(uuid(Approvals::IdempotencyKey))
                    .col(string_len(Approvals::Path, 32))
                    .col(blob(Approvals::Request))
                    .col(string_len(Approvals::RequestHash, 64))
                    .col(string_len(Approvals::Chain, 64))
                    .col(string_len(Approvals::Asset, 64))
                    .col(string_len(Approvals::Amount, 80))
                    .col(string_len(Approvals::Threshold, 80))
                    .col(text(Approvals::Summary))
                    .col(string_len(Approvals::State, 16))
                    .col(timestamp_with_time_zone(Approvals::CreatedAt))
                    .col(timestamp_with_time_zone(Approvals::ExpiresAt))
                    .col(string_len_null(Approvals::DecidedBy, 200))
                    .col(timestamp_with_time_zone_null(Approvals::DecidedAt))
                    .col(text_null(Approvals::Reason))
                    .col(uuid_null(Approvals::TransactionId))
                    .col(text_null(Approvals::Error))
                    .col(timestamp_with_time_zone_null(Approvals::LeaseUntil))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_KEY)
                    .table(Approvals::Table)
                    .col(Approvals::UserId)
                    .col(Approvals::IdempotencyKey)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_USER)
                    .table(Approvals::Table)
                    .col(Approvals::UserId)
                    .col(Approvals::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_STATE)
                    .table(Approvals::Table)
                    .col(Approvals::State)
                    .col(Approvals::ExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Approvals::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(SpendLimits::Table)
                    .drop_column(SpendLimits::ApprovalAbove)
                    .to_owned(),
            )
            .await
    }
}
