//! Creates `webhook_endpoints` (the URLs a user has events sent to, with a sealed signing
//! secret) and `webhook_deliveries` (one row per event and endpoint, leased and retried).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// The URLs a user has transaction events delivered to.
#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    Id,
    UserId,
    Url,
    /// The event types it receives, comma-separated (`transaction.confirmed,...`).
    EventTypes,
    /// Its signing secret, sealed under the master key (AES-256-GCM, the endpoint's id as
    /// associated data): the nonce and the ciphertext.
    SecretNonce,
    SecretCiphertext,
    CreatedAt,
}

/// One event for one endpoint: created by the event sequencer in the transaction that
/// numbers the event, then leased, sent and retried by the cores' delivery workers.
#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    /// Also the `webhook-id` header, the same on every attempt.
    Id,
    EndpointId,
    UserId,
    /// The event's sequence number: deliveries of one transaction to one endpoint go out in
    /// this order.
    EventSeq,
    TransactionId,
    /// `transaction.confirmed`, ...
    EventType,
    /// `pending`, `delivered` or `dead`.
    State,
    Attempts,
    /// When it may be tried (again).
    NextAttemptAt,
    /// Past this, a failed attempt dead-letters it.
    RetryUntil,
    LeaseOwner,
    LeaseUntil,
    /// The last attempt's HTTP status (absent: no answer) and error, for the owner to read.
    LastStatus,
    LastError,
    LastAttemptAt,
    DeliveredAt,
    CreatedAt,
}

const ENDPOINTS_USER: &str = "idx_webhook_endpoints_user";
const ONE_PER_EVENT: &str = "idx_webhook_deliveries_endpoint_event";
const DUE: &str = "idx_webhook_deliveries_due";
const PER_TRANSACTION: &str = "idx_webhook_deliveries_transaction";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WebhookEndpoints::Table)
                    .if_not_exists()
                    .col(pk_uuid(WebhookEndpoints::Id))
                    .col(uuid(WebhookEndpoints::UserId))
                    .col(string_len(WebhookEndpoints::Url, 2048))
                    .col(string_len(WebhookEndpoints::EventTypes, 512))
                    .col(binary(WebhookEndpoints::SecretNonce))
                    .col(binary(WebhookEndpoints::SecretCiphertext))
                    .col(timestamp_with_time_zone(WebhookEndpoints::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(ENDPOINTS_USER)
                    .table(WebhookEndpoints::Table)
                    .col(WebhookEndpoints::UserId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WebhookDeliveries::Table)
                    .if_not_exists()
                    .col(pk_uuid(WebhookDeliveries::Id))
                    .col(uuid(WebhookDeliveries::EndpointId))
                    .col(uuid(WebhookDeliveries::UserId))
                    .col(big_integer(WebhookDeliveries::EventSeq))
                    .col(uuid(WebhookDeliveries::TransactionId))
                    .col(string_len(WebhookDeliveries::EventType, 64))
                    .col(string_len(WebhookDeliveries::State, 16))
                    .col(integer(WebhookDeliveries::Attempts))
                    .col(timestamp_with_time_zone(WebhookDeliveries::NextAttemptAt))
                    .col(timestamp_with_time_zone(WebhookDeliveries::RetryUntil))
                    .col(uuid_null(WebhookDeliveries::LeaseOwner))
                    .col(timestamp_with_time_zone_null(WebhookDeliveries::LeaseUntil))
                    .col(integer_null(WebhookDeliveries::LastStatus))
                    .col(string_len_null(WebhookDeliveries::LastError, 512))
                    .col(timestamp_with_time_zone_null(
                        WebhookDeliveries::LastAttemptAt,
                    ))
                    .col(timestamp_with_time_zone_null(
                        WebhookDeliveries::DeliveredAt,
                    ))
                    .col(timestamp_with_time_zone(WebhookDeliveries::CreatedAt))
                    .to_owned(),
            )
            .await?;
        // An event is delivered to an endpoint once: a sequencer that numbered it again
        // (it cannot, but) would fail rather than send it twice.
        manager
            .create_index(
                Index::create()
                    .name(ONE_PER_EVENT)
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::EndpointId)
                    .col(WebhookDeliveries::EventSeq)
                    .unique()
                    .to_owned(),
            )
            .await?;
        // The workers' scan: pending deliveries by when they are due.
        manager
            .create_index(
                Index::create()
                    .name(DUE)
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::State)
                    .col(WebhookDeliveries::NextAttemptAt)
                    .to_owned(),
            )
            .await?;
        // The order check: an earlier pending delivery of the same transaction to the same
        // endpoint holds a later one back.
        manager
            .create_index(
                Index::create()
                    .name(PER_TRANSACTION)
                    .table(WebhookDeliveries::Table)
                    .col(WebhookDeliveries::EndpointId)
                    .col(WebhookDeliveries::TransactionId)
                    .col(WebhookDeliveries::EventSeq)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(WebhookDeliveries::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(WebhookEndpoints::Table).to_owned())
            .await
    }
}
