//! Adds `approvals.wallet`: the sending wallet a held write resolved to when it was held. A
//! write that named no `from` went out from the default wallet of that moment; once
//! approved it is made from the same wallet, even if the default changed meanwhile, so the
//! approver's decision holds for the wallet they saw. NULL for writes held before this,
//! which resolve their wallet again as they did.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Approvals {
    Table,
    Wallet,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Approvals::Table)
                    .add_column(string_len_null(Approvals::Wallet, 64))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Approvals::Table)
                    .drop_column(Approvals::Wallet)
                    .to_owned(),
            )
            .await
    }
}
