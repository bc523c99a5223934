//! Creates `api_keys`: one row per API key of a user, found by its unique 4-character prefix.
//! Only the SHA-256 of the key's value is stored, never the value.

use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261123_000001_create_users::Users;

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    UserId,
    Name,
    /// The 4-character lookup prefix; unique, so a lookup finds at most one row.
    Prefix,
    /// Hex SHA-256 of the whole key value: the value itself is never stored.
    SecretHash,
    CreatedAt,
    ExpiresAt,
    RevokedAt,
    LastUsedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ApiKeys::Table)
                    .if_not_exists()
                    .col(pk_uuid(ApiKeys::Id))
                    .col(uuid(ApiKeys::UserId))
                    .col(string_len(ApiKeys::Name, 100))
                    .col(string_len_uniq(ApiKeys::Prefix, 4))
                    .col(string_len(ApiKeys::SecretHash, 64))
                    .col(timestamp_with_time_zone(ApiKeys::CreatedAt))
                    .col(timestamp_with_time_zone_null(ApiKeys::ExpiresAt))
                    .col(timestamp_with_time_zone_null(ApiKeys::RevokedAt))
                    .col(timestamp_with_time_zone_null(ApiKeys::LastUsedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiKeys::Table, ApiKeys::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_api_keys_user")
                    .table(ApiKeys::Table)
                    .col(ApiKeys::UserId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ApiKeys::Table).to_owned())
            .await
    }
}
