//! Adds `transactions.valid_until_height`: the last Solana block height at which a signed
//! payload's blockhash is valid, after which an unseen transfer may be re-signed.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Transactions {
    Table,
    /// Solana: the last block height at which the signed payload's blockhash is valid. Past
    /// it, a signature never seen can never be processed, and only then may the transfer be
    /// re-signed with a new blockhash.
    ValidUntilHeight,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Transactions::Table)
                    .add_column(big_integer_null(Transactions::ValidUntilHeight))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Transactions::Table)
                    .drop_column(Transactions::ValidUntilHeight)
                    .to_owned(),
            )
            .await
    }
}
