//! Creates `deposits` (credits to users' wallets found on chain), `deposit_cursors` (where
//! each chain's scan stands, and which core scans it) and `deposit_blocks` (the hashes of the
//! blocks scanned lately, to find a reorganization); adds `transaction_events.subject`, so
//! that deposit events share the outbox, its numbering and its webhook deliveries.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// One credit of one asset to one wallet by one transaction.
#[derive(DeriveIden)]
enum Deposits {
    Table,
    /// A UUIDv5 of where it happened (chain, transaction, asset, wallet, rank): found
    /// twice, it is inserted once.
    Id,
    UserId,
    WalletId,
    Chain,
    Address,
    TxHash,
    /// `native`, a token address (lowercase) or a mint.
    Asset,
    /// Base units.
    Amount,
    FromAddress,
    /// Block number (EVM) or slot (Solana).
    Block,
    BlockHash,
    /// pending, confirmed, reverted, ignored.
    State,
    IgnoredReason,
    CreatedAt,
    UpdatedAt,
}

/// Where a chain's scan stands. The row `(chain, '')` holds the chain's lease and, on EVM,
/// the next block to scan; on Solana a row per scanned address holds its newest signature.
#[derive(DeriveIden)]
enum DepositCursors {
    Table,
    Chain,
    Address,
    /// EVM: the next block to scan.
    NextBlock,
    /// Solana: the newest signature seen for the address.
    LastSignature,
    LeaseOwner,
    LeaseUntil,
    UpdatedAt,
}

/// The hashes of blocks scanned lately: a scan that finds the node's hash of one differing
/// has met a reorganization and goes back to where they agree.
#[derive(DeriveIden)]
enum DepositBlocks {
    Table,
    Chain,
    Number,
    Hash,
}

#[derive(DeriveIden)]
enum TransactionEvents {
    Table,
    /// `transaction` (the id is a record's) or `deposit` (a deposit's).
    Subject,
}

const BY_USER: &str = "idx_deposits_user_created";
const BY_CHAIN_STATE: &str = "idx_deposits_chain_state_block";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Deposits::Table)
                    .if_not_exists()
                    .col(pk_uuid(Deposits::Id))
                    .col(uuid(Deposits::UserId))
                    .col(uuid(Deposits::WalletId))
                    .col(string_len(Deposits::Chain, 64))
                    .col(string_len(Deposits::Address, 64))
                    .col(string_len(Deposits::TxHash, 100))
                    .col(string_len(Deposits::Asset, 64))
                    .col(string_len(Deposits::Amount, 80))
                    .col(string_len_null(Deposits::FromAddress, 64))
                    .col(big_integer(Deposits::Block))
                    .col(string_len_null(Deposits::BlockHash, 100))
                    .col(string_len(Deposits::State, 16))
                    .col(text_null(Deposits::IgnoredReason))
                    .col(timestamp_with_time_zone(Deposits::CreatedAt))
                    .col(timestamp_with_time_zone(Deposits::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_USER)
                    .table(Deposits::Table)
                    .col(Deposits::UserId)
                    .col(Deposits::CreatedAt)
                    .to_owned(),
            )
            .await?;
        // The scanner's confirmation and reorganization passes: a chain's deposits in a
        // state, by block.
        manager
            .create_index(
                Index::create()
                    .name(BY_CHAIN_STATE)
                    .table(Deposits::Table)
                    .col(Deposits::Chain)
                    .col(Deposits::State)
                    .col(Deposits::Block)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DepositCursors::Table)
                    .if_not_exists()
                    .col(string_len(DepositCursors::Chain, 64))
                    .col(string_len(DepositCursors::Address, 64))
                    .col(big_integer_null(DepositCursors::NextBlock))
                    .col(string_len_null(DepositCursors::LastSignature, 100))
                    .col(uuid_null(DepositCursors::LeaseOwner))
                    .col(timestamp_with_time_zone_null(DepositCursors::LeaseUntil))
                    .col(timestamp_with_time_zone(DepositCursors::UpdatedAt))
                    .primary_key(
                        Index::create()
                            .col(DepositCursors::Chain)
                            .col(DepositCursors::Address),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DepositBlocks::Table)
                    .if_not_exists()
                    .col(string_len(DepositBlocks::Chain, 64))
                    .col(big_integer(DepositBlocks::Number))
                    .col(string_len(DepositBlocks::Hash, 100))
                    .primary_key(
                        Index::create()
                            .col(DepositBlocks::Chain)
                            .col(DepositBlocks::Number),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(TransactionEvents::Table)
                    .add_column(string_len(TransactionEvents::Subject, 16).default("transaction"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(TransactionEvents::Table)
                    .drop_column(TransactionEvents::Subject)
                    .to_owned(),
            )
            .await?;
        for table in [
            Deposits::Table.into_iden(),
            DepositCursors::Table.into_iden(),
            DepositBlocks::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
