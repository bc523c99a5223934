//! Gives each webhook endpoint its maker and its standing: who registered it (an API key, a
//! dashboard session, or the owner at the command line), whether and why it is disabled (its
//! key revoked, or failing too long), and since when it has been failing; and each delivery
//! the time it was last replayed, which the hourly replay cap counts.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    /// The API key that registered it; revoking that key (or a key it descends from)
    /// disables it. Absent: registered by the owner.
    CreatedByKey,
    /// The dashboard session that registered it, if one did.
    CreatedBySession,
    /// When it was disabled: no delivery is made or sent to it until its owner enables it.
    DisabledAt,
    /// `key_revoked` or `failing`.
    DisabledReason,
    /// The first failed attempt since its last delivered one.
    FailingSince,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    /// When its owner last replayed it.
    ReplayedAt,
    UserId,
}

const BY_KEY: &str = "idx_webhook_endpoints_created_by_key";
const REPLAYED: &str = "idx_webhook_deliveries_user_replayed";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one at a time.
        for column in [
            uuid_null(WebhookEndpoints::CreatedByKey),
            uuid_null(WebhookEndpoints::CreatedBySession),
            timestamp_with_time_zone_null(WebhookEndpoints::DisabledAt),
            string_len_null(WebhookEndpoints::DisabledReason, 32),
            timestamp_with_time_zone_null(WebhookEndpoints::FailingSince),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookEndpoints::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookDeliveries::Table)
                    .add_column(timestamp_with_time_zone_null(WebhookDeliveries::ReplayedAt))
                    .to_owned(),
            )
            .await?;
        // A revocation finds the endpoints of the keys it revokes.
        manager
            .create_index(
                Index::create()
                    .name(BY_KEY)
                    .table(WebhookEndpoints::Table)
                    .col(WebhookEndpoints::CreatedByKey)
                    .to_owned(),
            )
            .await?;
        // The replay cap counts a user's replays of the last hour.
        manager
            .create_index(
                Index::create()
                    .name(REPLAYED)
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::UserId)
                    .col(WebhookDeliveries::ReplayedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(REPLAYED)
                    .table(WebhookDeliveries::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name(BY_KEY)
                    .table(WebhookEndpoints::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookDeliveries::Table)
                    .drop_column(WebhookDeliveries::ReplayedAt)
                    .to_owned(),
            )
            .await?;
        for column in [
            WebhookEndpoints::FailingSince,
            WebhookEndpoints::DisabledReason,
            WebhookEndpoints::DisabledAt,
            WebhookEndpoints::CreatedBySession,
            WebhookEndpoints::CreatedByKey,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookEndpoints::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
