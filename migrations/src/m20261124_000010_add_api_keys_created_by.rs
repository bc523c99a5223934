//! Adds `api_keys.created_by`: the key that created a key, so that revoking a key also
//! revokes the keys made with it.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    /// The key that created this one through `ApiKeyService` (none: the CLI, the admin API or
    /// the first start did). Revoking a key revokes the keys it created, so that a leaked key
    /// cannot outlive its revocation through keys made with it.
    CreatedBy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(uuid_null(ApiKeys::CreatedBy))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::CreatedBy)
                    .to_owned(),
            )
            .await
    }
}
