//! Creates `evm_nonces`: the nonce ledger, one row per EVM chain and address with the next
//! nonce to hand out, so that concurrent signers never share a nonce.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum EvmNonces {
    Table,
    ChainId,
    Address,
    /// The next nonce to hand out. Written only inside the transaction that signs with it.
    NextNonce,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(EvmNonces::Table)
                    .if_not_exists()
                    .col(big_integer(EvmNonces::ChainId))
                    .col(string_len(EvmNonces::Address, 64))
                    .col(big_integer(EvmNonces::NextNonce))
                    .col(timestamp_with_time_zone(EvmNonces::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(EvmNonces::ChainId)
                            .col(EvmNonces::Address),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(EvmNonces::Table).to_owned())
            .await
    }
}
