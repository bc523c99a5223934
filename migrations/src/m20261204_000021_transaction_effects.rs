//! Adds what a record's transaction does to its wallet: the effects simulated before it was
//! signed, those read from the chain once it was final, and how the two differ.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Transactions {
    Table,
    /// The effects its simulation showed before it was signed (JSON); NULL: none known.
    SimulatedEffects,
    /// The effects read from the chain once it was final (JSON); NULL: not final, or not read.
    FinalEffects,
    /// How the two differ, in words; NULL: they agree, or one is not known.
    EffectsDifference,
}

/// The columns added, one per statement: SQLite adds one at a time.
fn columns() -> [Transactions; 3] {
    [
        Transactions::SimulatedEffects,
        Transactions::FinalEffects,
        Transactions::EffectsDifference,
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in columns() {
            manager
                .alter_table(
                    Table::alter()
                        .table(Transactions::Table)
                        .add_column(text_null(column))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in columns() {
            manager
                .alter_table(
                    Table::alter()
                        .table(Transactions::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
