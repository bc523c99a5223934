//! The OpenAPI document of the REST contract: its front matter and security scheme, the
//! documentation-only types the handlers' `#[utoipa::path]` attributes name, and the
//! statuses every operation can answer with. The paths themselves come from the handlers.

use utoipa::{
    Modify, OpenApi,
    openapi::security::{ApiKey, ApiKeyValue, SecurityScheme},
};
use walletops_proto::API_KEY_HEADER;

use crate::{error::ErrorBody, model::SubmissionJson};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "WalletOps",
        description = "Act on your own custodial wallets on EVM chains and Solana: list wallets, \
            read balances, send, approve, call contracts, quote and swap. Every endpoint needs \
            the `x-api-key` header; writes need an `Idempotency-Key` (a UUID). Every response \
            carries `x-request-id`. Paths are served under `/api/v1` and, as an alias, `/v1`.",
        version = "1"
    ),
    modifiers(&ApiKeyScheme),
    components(schemas(ErrorBody, crate::model::Asset)),
    tags(
        (name = "wallets", description = "Wallets and balances"),
        (name = "transactions", description = "Transfers, approvals, contract calls, lookups"),
        (name = "trade", description = "Swap quotes and swaps"),
        (name = "webhooks", description = "Signed deliveries of transaction and deposit events (Standard Webhooks)"),
        (name = "deposits", description = "Money that arrived at the caller's wallets, found on chain"),
        (name = "payouts", description = "Many recipients paid from one wallet in one request, each exactly once"),
        (name = "approvals", description = "Writes held for a person's approval (a key's approval threshold)"),
    )
)]
struct ApiDoc;

struct ApiKeyScheme;

impl Modify for ApiKeyScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new(API_KEY_HEADER))),
        );
    }
}

/// The whole document: the front matter, with `paths` (the routes' operations) under
/// `/api/v1`, and the common statuses added to every operation.
pub(crate) fn document(paths: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi().nest("/api/v1", paths);
    add_common_responses(&mut doc);
    doc
}

/// Statuses any operation can answer with, whatever it does, each with the error body.
const COMMON_RESPONSES: [(&str, &str); 5] = [
    (
        "400",
        "INVALID_INPUT: a value breaks its format (the message and the details name the \
         field); CHAIN_UNKNOWN",
    ),
    (
        "401",
        "UNAUTHORIZED: missing, invalid, expired or revoked API key",
    ),
    (
        "429",
        "RATE_LIMITED: the user's budget for the minute is spent; see Retry-After",
    ),
    ("500", "INTERNAL_ERROR"),
    (
        "503",
        "SERVICE_UNAVAILABLE: the core cannot be reached, or the request timed out and its \
         outcome is unknown (retry a write with the same Idempotency-Key)",
    ),
];

/// Adds `COMMON_RESPONSES` to every operation that does not document the status itself.
fn add_common_responses(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    for item in doc.paths.paths.values_mut() {
        for op in [&mut item.get, &mut item.post, &mut item.delete]
            .into_iter()
            .flatten()
        {
            for (status, description) in COMMON_RESPONSES {
                op.responses
                    .responses
                    .entry(status.to_owned())
                    .or_insert_with(|| {
                        ResponseBuilder::new()
                            .description(description)
                            .content(
                                "application/json",
                                ContentBuilder::new()
                                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                                    .build(),
                            )
                            .build()
                            .into()
                    });
            }
        }
    }
}

/// The headers every call may carry, for the OpenAPI document.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
pub(crate) struct WriteHeaders {
    /// A UUID; a retry with the same key and body returns the first response.
    #[param(rename = "Idempotency-Key", value_type = uuid::Uuid)]
    idempotency_key: String,
}

/// What the three chain writes (`/send`, `/token/approve`, `/contracts/send`) answer.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Documents the responses; the handlers build them.
pub(crate) enum WriteResponses {
    #[response(status = 200, description = "Accepted")]
    Accepted(SubmissionJson),
    #[response(
        status = 202,
        description = "Held for approval: the write moves more than the key's approval threshold; `status` is PENDING_APPROVAL, `id` and `approval` are the approval (GET /approvals/{id}). Nothing is signed until a person approves it"
    )]
    Held(SubmissionJson),
    #[response(
        status = 400,
        description = "Bad input, unknown chain or insufficient funds"
    )]
    BadInput(ErrorBody),
    #[response(
        status = 403,
        description = "Not the caller's wallet, or not delegated, or over the key's spend limits"
    )]
    Forbidden(ErrorBody),
    #[response(
        status = 409,
        description = "Idempotency-Key used with another request, or its request failed"
    )]
    KeyReused(ErrorBody),
    #[response(
        status = 502,
        description = "SEND_FAILED: the simulation reverted (reason in the message) or the node refused the transaction; PROVIDER_RPC_ERROR: the node did not answer"
    )]
    NodeRefused(ErrorBody),
}
