//! Adds `api_keys.limited`, set once a key has had a spend limit (and for keys that have one
//! now), so that the writes of a key that never had one skip the limit and approval lookups.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    /// Set when the key first gets a spend limit and never cleared: a key that never had one
    /// has no limit to hold its writes to and no held write, and its writes skip both
    /// lookups.
    Limited,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(boolean(ApiKeys::Limited).default(false))
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE api_keys SET limited = TRUE WHERE id IN (SELECT key_id FROM spend_limits)",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::Limited)
                    .to_owned(),
            )
            .await
    }
}
