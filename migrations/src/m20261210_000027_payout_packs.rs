//! Adds `payout_items.pack`: on Solana, the index of the first item of the transaction an
//! item is paid in (items of one asset are packed several to a transaction). Fixed when the
//! payout is stored, so a core that makes the payout again after a crash, or another core,
//! packs the same items under the same key whatever its code would pack today. NULL: the
//! item is a transaction of its own (EVM).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum PayoutItems {
    Table,
    Pack,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(PayoutItems::Table)
                    .add_column(integer_null(PayoutItems::Pack))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(PayoutItems::Table)
                    .drop_column(PayoutItems::Pack)
                    .to_owned(),
            )
            .await
    }
}
