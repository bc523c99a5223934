//! The REST contract's JSON shapes, and their translation to and from `walletops.v1`
//! messages, one file per resource. Field names are the spec's; request structs default
//! every field, so a missing field reaches the core and is reported there with the other
//! violations.
//!
//! - `wallets`: `GET /wallets`.
//! - `balances`: `GET /wallets/balances` and `GET /wallets/{address}/balances`.
//! - `transactions`: `GET /tx/{id}`.
//! - `writes`: `POST /send`, `POST /token/approve`, `POST /contracts/send`, and the
//!   submission they answer.
//! - `trade`: `POST /trade/quote` and `POST /trade/swap`.
//! - `webhooks`: `/webhooks`, their secrets and deliveries.
//! - `approvals`: `/approvals`, writes held for a person's approval.
//! - `values`: JSON values to and from protobuf `Value`s.

mod approvals;
mod balances;
mod trade;
mod transactions;
mod wallets;
mod webhooks;
mod writes;

use chrono::{DateTime, SecondsFormat};

pub(crate) use approvals::{ApprovalJson, ApprovalsJson, ApprovalsQuery, approval_state};
pub(crate) use balances::{BalancesJson, BalancesQuery};
pub(crate) use trade::{QuoteBody, QuoteResponseJson, SwapBody};
pub(crate) use transactions::TransactionJson;
pub use transactions::transaction_json;
pub(crate) use wallets::{ListWalletsQuery, WalletsJson};
pub(crate) use webhooks::{
    CreateWebhookBody, DeliveriesJson, DeliveriesQuery, ReplayBody, ReplayJson, WebhookJson,
    WebhookSecretJson, WebhooksJson, delivery_state,
};
pub(crate) use writes::{ApproveBody, Asset, ContractCallBody, SendBody, SubmissionJson};

/// ISO 8601 with milliseconds, UTC (`2026-11-23T02:15:19.123Z`), as the spec asks.
fn iso(ts: Option<prost_types::Timestamp>) -> Option<String> {
    let ts = ts?;
    DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or_default())
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn iso_or_empty(ts: Option<prost_types::Timestamp>) -> String {
    iso(ts).unwrap_or_default()
}

/// A protobuf enum value's name without its type's `prefix` (`TRANSACTION_STATUS_SUBMITTED`
/// is `SUBMITTED`); `UNSPECIFIED` for a value this edge does not know.
fn short_name<E>(name: Result<&str, E>, prefix: &str) -> String {
    name.map_or_else(
        |_| "UNSPECIFIED".to_owned(),
        |n| n.trim_start_matches(prefix).to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_with_millis_utc() {
        let ts = prost_types::Timestamp {
            seconds: 1_795_400_119,
            nanos: 123_456_789,
        };
        assert_eq!(iso(Some(ts)).as_deref(), Some("2026-11-23T02:15:19.123Z"));
    }
}
