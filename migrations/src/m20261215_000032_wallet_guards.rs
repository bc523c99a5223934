//! Creates `wallet_guards`: the EVM wallets delegated by EIP-7702 to the guard contract, per
//! chain, whose limited keys' writes then run with on-chain checks; and adds
//! `transactions.guarded`, which says a write ran under those checks.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// One guarded wallet on one chain.
#[derive(DeriveIden)]
enum WalletGuards {
    Table,
    WalletId,
    /// The chain's slug.
    Chain,
    /// The guard contract delegated to (checksummed).
    Guard,
    /// The delegating transaction's hash.
    Hash,
    EnabledAt,
}

#[derive(DeriveIden)]
enum Transactions {
    Table,
    /// Whether the write ran through the wallet's guard (`execute` with checks).
    Guarded,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WalletGuards::Table)
                    .if_not_exists()
                    .col(uuid(WalletGuards::WalletId))
                    .col(text(WalletGuards::Chain))
                    .col(text(WalletGuards::Guard))
                    .col(text(WalletGuards::Hash))
                    .col(timestamp_with_time_zone(WalletGuards::EnabledAt))
                    .primary_key(
                        Index::create()
                            .col(WalletGuards::WalletId)
                            .col(WalletGuards::Chain),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Transactions::Table)
                    .add_column(boolean(Transactions::Guarded).default(false))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Transactions::Table)
                    .drop_column(Transactions::Guarded)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(WalletGuards::Table).to_owned())
            .await
    }
}
