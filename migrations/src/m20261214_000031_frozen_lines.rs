//! Creates `frozen_lines`: the key lines whose writes are refused because one of them moved
//! more on chain than its simulation reserved, until their owner unfreezes them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// One frozen key line.
#[derive(DeriveIden)]
enum FrozenLines {
    Table,
    /// The line: its first key's id.
    LineId,
    UserId,
    FrozenAt,
    /// What moved beyond the reservation, in words.
    Reason,
    /// The write that moved it.
    TransactionId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(FrozenLines::Table)
                    .if_not_exists()
                    .col(uuid(FrozenLines::LineId).primary_key())
                    .col(uuid(FrozenLines::UserId))
                    .col(timestamp_with_time_zone(FrozenLines::FrozenAt))
                    .col(text(FrozenLines::Reason))
                    .col(uuid(FrozenLines::TransactionId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(FrozenLines::Table).to_owned())
            .await
    }
}
