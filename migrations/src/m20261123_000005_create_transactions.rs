//! Creates `transactions`: one row per signed write (send, approve, contract call, swap),
//! with its signed payload, every hash broadcast, its status history and the monitor's lease.

use sea_orm_migration::{prelude::*, schema::*};

use crate::{m20261123_000001_create_users::Users, m20261123_000003_create_wallets::Wallets};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum Transactions {
    Table,
    Id,
    UserId,
    WalletId,
    /// Chain slug.
    Chain,
    ChainId,
    /// `send`, `approve`, `contract_call` or `swap`.
    Kind,
    FromAddress,
    ToAddress,
    Asset,
    Token,
    Amount,
    /// The canonical request, for audit.
    Request,
    Status,
    /// JSON array of `{status, at, note}`.
    StatusHistory,
    Hash,
    Nonce,
    /// The signed bytes, stored before the first broadcast so a rebroadcast sends the same.
    SignedPayload,
    /// JSON array of every hash broadcast for this record (replacements add to it), oldest
    /// first: any of them may be the one that is mined.
    Hashes,
    /// The idempotency key that created the record, if any.
    IdempotencyKey,
    Error,
    /// When the current signed payload was last sent to the node.
    LastBroadcastAt,
    /// The core whose monitor holds the record, and until when.
    LeaseOwner,
    LeaseUntil,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Transactions::Table)
                    .if_not_exists()
                    .col(pk_uuid(Transactions::Id))
                    .col(uuid(Transactions::UserId))
                    .col(uuid(Transactions::WalletId))
                    .col(string_len(Transactions::Chain, 64))
                    .col(big_integer(Transactions::ChainId))
                    .col(string_len(Transactions::Kind, 32))
                    .col(string_len(Transactions::FromAddress, 64))
                    .col(string_len(Transactions::ToAddress, 64))
                    .col(string_len_null(Transactions::Asset, 16))
                    .col(string_len_null(Transactions::Token, 64))
                    .col(string_len_null(Transactions::Amount, 80))
                    .col(json(Transactions::Request))
                    .col(string_len(Transactions::Status, 32))
                    .col(json(Transactions::StatusHistory))
                    .col(string_len_null(Transactions::Hash, 128))
                    .col(big_integer_null(Transactions::Nonce))
                    .col(blob_null(Transactions::SignedPayload))
                    .col(json(Transactions::Hashes))
                    .col(uuid_null(Transactions::IdempotencyKey))
                    .col(text_null(Transactions::Error))
                    .col(timestamp_with_time_zone_null(Transactions::LastBroadcastAt))
                    .col(uuid_null(Transactions::LeaseOwner))
                    .col(timestamp_with_time_zone_null(Transactions::LeaseUntil))
                    .col(timestamp_with_time_zone(Transactions::CreatedAt))
                    .col(timestamp_with_time_zone(Transactions::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Transactions::Table, Transactions::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Restrict),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(Transactions::Table, Transactions::WalletId)
                            .to(Wallets::Table, Wallets::Id)
                            .on_delete(ForeignKeyAction::Restrict),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_transactions_user")
                    .table(Transactions::Table)
                    .col(Transactions::UserId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_transactions_status")
                    .table(Transactions::Table)
                    .col(Transactions::Status)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Transactions::Table).to_owned())
            .await
    }
}
