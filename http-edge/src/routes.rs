//! The REST routes: one handler per contract path, each the same four steps (JSON or query
//! to a request message, headers to metadata, call the core, answer to JSON).

use axum::{
    Json,
    extract::{Path, State},
    http::HeaderMap,
};
use tonic::{
    metadata::{AsciiMetadataValue, BinaryMetadataValue, MetadataKey},
    transport::Channel,
};
use utoipa::{
    Modify, OpenApi,
    openapi::security::{ApiKey, ApiKeyValue, SecurityScheme},
};
use utoipa_axum::{router::OpenApiRouter, routes};
use walletops_proto::{
    API_KEY_HEADER, IDEMPOTENCY_KEY_HEADER, UNREADABLE_HEADER,
    request_id::REQUEST_ID_HEADER,
    v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient},
};

use crate::{
    error::{EdgeError, ErrorBody},
    extract::{EdgeJson, QueryParams},
    model::*,
};

/// The edge's state: a client of the core.
#[derive(Debug, Clone)]
pub(crate) struct Edge {
    core: WalletOpsServiceClient<Channel>,
}

/// Wraps `message` in a gRPC request carrying the contract headers as metadata. A header
/// that is not valid metadata is left out; the core then reports it missing. A request the
/// edge could not read still goes to the core, as an empty message that says why, so that
/// the core admits the caller before it answers INVALID_INPUT: no answer but 401 without a
/// valid key, and every request counts against the rate limit.
fn call<T: Default>(
    headers: &HeaderMap,
    message: Result<T, EdgeError>,
) -> Result<tonic::Request<T>, EdgeError> {
    let (message, unreadable) = match message {
        Ok(message) => (message, None),
        Err(EdgeError::Unreadable { field, problem }) => (
            T::default(),
            Some(serde_json::json!({"field": field, "problem": problem})),
        ),
        Err(other) => return Err(other),
    };
    let mut req = tonic::Request::new(message);
    if let Some(why) = unreadable {
        req.metadata_mut().insert_bin(
            MetadataKey::from_static(UNREADABLE_HEADER),
            BinaryMetadataValue::from_bytes(why.to_string().as_bytes()),
        );
    }
    for name in [API_KEY_HEADER, IDEMPOTENCY_KEY_HEADER, REQUEST_ID_HEADER] {
        if let Some(value) = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<AsciiMetadataValue>().ok())
        {
            req.metadata_mut()
                .insert(MetadataKey::from_static(name), value);
        }
    }
    Ok(req)
}

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

fn v1_router() -> OpenApiRouter<Edge> {
    OpenApiRouter::new()
        .routes(routes!(list_wallets))
        .routes(routes!(get_balances))
        .routes(routes!(get_balances_of))
        .routes(routes!(get_transaction))
        .routes(routes!(send))
        .routes(routes!(approve_token))
        .routes(routes!(call_contract))
        .routes(routes!(get_quote))
        .routes(routes!(swap))
}

/// The v1 routes over `core`, and their OpenAPI document with `/api/v1` paths.
pub(crate) fn v1(core: Channel) -> (axum::Router, utoipa::openapi::OpenApi) {
    let (router, _) = v1_router().split_for_parts();
    let router = router.with_state(Edge {
        core: WalletOpsServiceClient::new(core),
    });
    (router, openapi())
}

/// The OpenAPI document of the REST contract.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    let (_, paths) = v1_router().split_for_parts();
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
        for op in [&mut item.get, &mut item.post].into_iter().flatten() {
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
struct WriteHeaders {
    /// A UUID; a retry with the same key and body returns the first response.
    #[param(rename = "Idempotency-Key", value_type = uuid::Uuid)]
    idempotency_key: String,
}

#[utoipa::path(get, path = "/wallets", tag = "wallets", params(ListWalletsQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The caller's wallets", body = WalletsJson),
        (status = 400, description = "A bad filter value", body = ErrorBody),
        (status = 401, description = "Missing, invalid, expired or revoked key", body = ErrorBody),
        (status = 429, description = "Read budget spent; see Retry-After", body = ErrorBody),
    ))]
async fn list_wallets(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<WalletsJson>, EdgeError> {
    let req = q.and_then(|q| {
        Ok(pb::ListWalletsRequest {
            chain: q.string("chain")?,
            default_only: q.boolean("defaultOnly")?,
            automation_only: q.boolean("automationOnly")?,
        })
    });
    let resp = edge.core.list_wallets(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().into()))
}

fn balances_request(
    q: Result<QueryParams, EdgeError>,
    address: impl FnOnce(&QueryParams) -> Result<Option<String>, EdgeError>,
) -> Result<pb::GetBalancesRequest, EdgeError> {
    let q = q?;
    Ok(pb::GetBalancesRequest {
        address: address(&q)?,
        chain: q.string("chain")?.unwrap_or_default(),
        tokens: q.list("tokens")?,
        include_zero: q.boolean("includeZero")?,
        fresh: q.boolean("fresh")?,
    })
}

#[utoipa::path(get, path = "/wallets/balances", tag = "wallets",
    params(("address" = Option<String>, Query, description = "One of the caller's wallets; default: the caller's default wallet for the chain",
        pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"), BalancesQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Native and token balances", body = BalancesJson),
        (status = 400, description = "Bad input or unknown chain", body = ErrorBody),
        (status = 403, description = "Another user's wallet", body = ErrorBody),
        (status = 404, description = "No such wallet", body = ErrorBody),
    ))]
async fn get_balances(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<BalancesJson>, EdgeError> {
    let req = balances_request(q, |q| q.string("address"));
    let resp = edge.core.get_balances(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(get, path = "/wallets/{address}/balances", tag = "wallets",
    params(("address" = String, Path, description = "An address of one of the caller's wallets",
        pattern = "^(0x[a-fA-F0-9]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"), BalancesQuery),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "Native and token balances", body = BalancesJson),
        (status = 403, description = "Another user's wallet", body = ErrorBody),
        (status = 404, description = "No such wallet", body = ErrorBody),
    ))]
async fn get_balances_of(
    State(mut edge): State<Edge>,
    Path(address): Path<String>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<BalancesJson>, EdgeError> {
    let req = balances_request(q, |_| Ok(Some(address)));
    let resp = edge.core.get_balances(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(get, path = "/tx/{id}", tag = "transactions",
    params(("id" = uuid::Uuid, Path, description = "Service transaction id")),
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The transaction", body = TransactionJson),
        (status = 404, description = "Unknown id, or not the caller's", body = ErrorBody),
    ))]
async fn get_transaction(
    State(mut edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<TransactionJson>, EdgeError> {
    let resp = edge
        .core
        .get_transaction(call(&headers, Ok(pb::GetTransactionRequest { id }))?)
        .await?;
    let tx = resp.into_inner().transaction.unwrap_or_default();
    Ok(Json(tx.into()))
}

/// What the three chain writes (`/send`, `/token/approve`, `/contracts/send`) answer.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Documents the responses; the handlers build them.
enum WriteResponses {
    #[response(status = 200, description = "Accepted")]
    Accepted(SubmissionJson),
    #[response(
        status = 400,
        description = "Bad input, unknown chain or insufficient funds"
    )]
    BadInput(ErrorBody),
    #[response(
        status = 403,
        description = "Not the caller's wallet, or not delegated"
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

#[utoipa::path(post, path = "/send", tag = "transactions", request_body = SendBody,
    params(WriteHeaders), security(("api_key" = [])),
    responses(WriteResponses))]
async fn send(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<SendBody>, EdgeError>,
) -> Result<Json<SubmissionJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge.core.send(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().submission.into()))
}

#[utoipa::path(post, path = "/token/approve", tag = "transactions", request_body = ApproveBody,
    params(WriteHeaders), security(("api_key" = [])),
    responses(WriteResponses))]
async fn approve_token(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<ApproveBody>, EdgeError>,
) -> Result<Json<SubmissionJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge.core.approve_token(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().submission.into()))
}

#[utoipa::path(post, path = "/contracts/send", tag = "transactions", request_body(
        content = ContractCallBody,
        examples(
            ("function" = (summary = "Function and arguments", value = json!({
                "chain": "base-sepolia", "to": "0x1111111111111111111111111111111111111111",
                "function": "transfer(address,uint256)",
                "args": ["0x2222222222222222222222222222222222222222", "1000000"]}))),
            ("calldata" = (summary = "Raw calldata", value = json!({
                "chain": "base-sepolia", "to": "0x1111111111111111111111111111111111111111",
                "value": "0", "data": "0xd09de08a"}))),
        )),
    params(WriteHeaders), security(("api_key" = [])),
    responses(WriteResponses))]
async fn call_contract(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<ContractCallBody>, EdgeError>,
) -> Result<Json<SubmissionJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge.core.call_contract(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().submission.into()))
}

#[utoipa::path(post, path = "/trade/quote", tag = "trade", request_body = QuoteBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The quote", body = QuoteResponseJson),
        (status = 400, description = "Bad input, or QUOTE_FAILED", body = ErrorBody),
        (status = 429, description = "Write budget spent (quotes count as writes)", body = ErrorBody),
    ))]
async fn get_quote(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<QuoteBody>, EdgeError>,
) -> Result<Json<QuoteResponseJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge.core.get_quote(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().into()))
}

#[utoipa::path(post, path = "/trade/swap", tag = "trade", request_body = SwapBody,
    params(WriteHeaders), security(("api_key" = [])),
    responses(
        (status = 200, description = "Accepted", body = SubmissionJson),
        (status = 400, description = "Bad input or unknown chain", body = ErrorBody),
        (status = 403, description = "Not the caller's wallet, or not delegated", body = ErrorBody),
        (status = 409, description = "Idempotency-Key reused", body = ErrorBody),
    ))]
async fn swap(
    State(mut edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<SwapBody>, EdgeError>,
) -> Result<Json<SubmissionJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge.core.swap(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().submission.into()))
}
