//! Adds `transactions.revision`, which counts a record's changes: every change is conditional
//! on the revision its writer read, so a worker holding a stale copy changes nothing.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Transactions {
    Table,
    /// Counts the changes of a record's status, history or payload. Every such change is
    /// conditional on the revision its writer read, so a worker holding an older copy (two
    /// cores whose leases overlapped, say) changes nothing instead of writing back a history
    /// without the other's entry.
    Revision,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Transactions::Table)
                    .add_column(big_integer(Transactions::Revision).default(0))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Transactions::Table)
                    .drop_column(Transactions::Revision)
                    .to_owned(),
            )
            .await
    }
}
