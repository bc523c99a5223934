//! Adds `api_keys.lineage_id`: the first key of the line a key was made in through
//! `ApiKeyService` (its maker's, its maker's maker's, up to a key the owner made), NULL for
//! a key the owner made, which begins its own line. A line shares one daily budget per
//! limit, so keys made with keys cannot multiply what their maker may move.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    LineageId,
}

const BY_LINEAGE: &str = "idx_api_keys_lineage";

/// Keys made with keys made with keys, deeper than any line is made in practice: each pass
/// of the backfill reaches one generation further.
const GENERATIONS: usize = 16;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(uuid_null(ApiKeys::LineageId))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(BY_LINEAGE)
                    .table(ApiKeys::Table)
                    .col(ApiKeys::LineageId)
                    .to_owned(),
            )
            .await?;
        for _ in 0..GENERATIONS {
            manager
                .get_connection()
                .execute_unprepared(
                    "UPDATE api_keys SET lineage_id = (SELECT COALESCE(m.lineage_id, m.id) \
                     FROM api_keys m WHERE m.id = api_keys.created_by) \
                     WHERE created_by IS NOT NULL",
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(BY_LINEAGE)
                    .table(ApiKeys::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::LineageId)
                    .to_owned(),
            )
            .await
    }
}
