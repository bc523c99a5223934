//! Creates `transaction_events`: the outbox of transaction status changes, one row per change,
//! written with the change and numbered in commit order by the sequencer.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The outbox of transaction status changes: a row written in the same database
/// transaction as the change it tells of, so that a crash neither loses one nor keeps one
/// for a change that did not commit.
#[derive(DeriveIden)]
enum TransactionEvents {
    Table,
    /// Insertion order; assigned when the row is written, which is not the order in which
    /// concurrent writers commit.
    Id,
    /// Commit order: assigned once the row is visible, by the sequencer, one at a time, so
    /// that a reader resuming after sequence number N misses nothing committed earlier.
    /// NULL until sequenced.
    Seq,
    TransactionId,
    UserId,
    /// The chain's slug.
    Chain,
    /// The status the record entered (`submitted`, `confirmed`, ...).
    Status,
    CreatedAt,
}

const BY_SEQ: &str = "idx_transaction_events_seq";
const UNSEQUENCED: &str = "idx_transaction_events_unsequenced";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(TransactionEvents::Table)
                    .if_not_exists()
                    .col(big_pk_auto(TransactionEvents::Id))
                    .col(big_integer_null(TransactionEvents::Seq))
                    .col(uuid(TransactionEvents::TransactionId))
                    .col(uuid(TransactionEvents::UserId))
                    .col(string_len(TransactionEvents::Chain, 64))
                    .col(string_len(TransactionEvents::Status, 32))
                    .col(timestamp_with_time_zone(TransactionEvents::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_SEQ)
                    .table(TransactionEvents::Table)
                    .col(TransactionEvents::Seq)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // The sequencer's scan: rows still without a sequence number, by id.
        manager
            .create_index(
                Index::create()
                    .name(UNSEQUENCED)
                    .table(TransactionEvents::Table)
                    .col(TransactionEvents::Seq)
                    .col(TransactionEvents::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(TransactionEvents::Table).to_owned())
            .await
    }
}
