//! The REST contract's JSON shapes, and their translation to and from `walletops.v1`
//! messages, one file per resource. Field names are the spec's; request structs default
//! every field, so a missing field reaches the core and is reported there with the other
//! violations.
//!
//! - `wallets`: `GET /wallets`.
//! - `balances`: `GET /wallets/balances` and `GET /wallets/{address}/balances`.
//! - `GET /tx/{id}`'s transaction: `walletops_proto::rest`, the core writes it too.
//! - `writes`: `POST /send`, `POST /token/approve`, `POST /contracts/send`, and the
//!   submission they answer.
//! - `trade`: `POST /trade/quote` and `POST /trade/swap`.
//! - `webhooks`: `/webhooks`, their secrets and deliveries.
//! - `approvals`: `/approvals`, writes held for a person's approval.
//! - `deposits`: `/deposits`, money that arrived at the caller's wallets.
//! - `payouts`: `/payouts`, many recipients paid from one wallet.
//! - `effects`: a write's dry run (`?dryRun=true`).
//! - `values`: JSON values to and from protobuf `Value`s.

mod approvals;
mod balances;
mod deposits;
mod effects;
mod payouts;
mod trade;
mod wallets;
mod webhooks;
mod writes;

use walletops_proto::rest::{iso, iso_or_empty, short_name};

pub(crate) use approvals::{ApprovalJson, ApprovalsJson, ApprovalsQuery, approval_state};
pub(crate) use balances::{BalancesJson, BalancesQuery};
pub(crate) use deposits::{DepositsJson, DepositsQuery, deposit_state};
pub(crate) use effects::DryRunJson;
pub(crate) use payouts::PayoutBody;
pub(crate) use trade::{QuoteBody, QuoteResponseJson, SwapBody};
pub(crate) use walletops_proto::rest::DepositJson;
pub(crate) use walletops_proto::rest::PayoutJson;
pub(crate) use walletops_proto::rest::TransactionJson;
pub(crate) use wallets::{ListWalletsQuery, WalletsJson};
pub(crate) use webhooks::{
    CreateWebhookBody, DeliveriesJson, DeliveriesQuery, ReplayBody, ReplayJson, WebhookJson,
    WebhookSecretJson, WebhooksJson, delivery_state,
};
pub(crate) use writes::{ApproveBody, Asset, ContractCallBody, SendBody, SubmissionJson};
