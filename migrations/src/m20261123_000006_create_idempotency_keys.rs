//! Creates `idempotency_keys`: one row per Idempotency-Key a user claimed, keyed by user and
//! key, holding what a retry of the same request is answered with until the key expires.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    UserId,
    Key,
    /// The endpoint path, for traceability.
    Path,
    /// SHA-256 of the path and the canonical request.
    RequestHash,
    /// `in_progress`, `succeeded` or `failed`.
    State,
    /// The stored success response, replayed to retries.
    Response,
    /// Why the first request failed, told to retries.
    Error,
    /// The transaction the request created, set in the same database transaction that
    /// stores the signed payload.
    TransactionId,
    CreatedAt,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyKeys::Table)
                    .if_not_exists()
                    .col(uuid(IdempotencyKeys::UserId))
                    .col(uuid(IdempotencyKeys::Key))
                    .col(string_len(IdempotencyKeys::Path, 64))
                    .col(string_len(IdempotencyKeys::RequestHash, 64))
                    .col(string_len(IdempotencyKeys::State, 16))
                    .col(json_null(IdempotencyKeys::Response))
                    .col(text_null(IdempotencyKeys::Error))
                    .col(uuid_null(IdempotencyKeys::TransactionId))
                    .col(timestamp_with_time_zone(IdempotencyKeys::CreatedAt))
                    .col(timestamp_with_time_zone(IdempotencyKeys::ExpiresAt))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKeys::UserId)
                            .col(IdempotencyKeys::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_idempotency_keys_expires")
                    .table(IdempotencyKeys::Table)
                    .col(IdempotencyKeys::ExpiresAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(IdempotencyKeys::Table).to_owned())
            .await
    }
}
