//! The REST routes. The file opens with the whole contract, one line per route; below it,
//! one thin handler per route, each the same four steps (JSON or query to a request message,
//! headers to metadata, call the core, answer to JSON).

use std::sync::Arc;

use crate::CoreChannel;
use axum::{
    Json,
    extract::{Path, State},
    http::HeaderMap,
    routing::get,
};
use tonic::metadata::{AsciiMetadataValue, BinaryMetadataValue, MetadataKey};

use utoipa_axum::{
    router::{OpenApiRouter, UtoipaMethodRouter},
    routes,
};
use walletops_proto::{
    API_KEY_HEADER, CLIENT_ADDRESS_HEADER, IDEMPOTENCY_KEY_HEADER, UNREADABLE_HEADER,
    request_id::REQUEST_ID_HEADER,
    v1::{
        self as pb, approval_service_client::ApprovalServiceClient,
        deposit_service_client::DepositServiceClient, payout_service_client::PayoutServiceClient,
        wallet_ops_service_client::WalletOpsServiceClient,
        webhook_service_client::WebhookServiceClient,
    },
};

mod approvals;
mod deposits;
mod payouts;
mod webhooks;
mod writes;

use crate::{
    error::{EdgeError, ErrorBody, RestNames, in_rest_names},
    extract::{EdgeJson, QueryParams},
    model::{
        BalancesJson, BalancesQuery, ListWalletsQuery, QuoteBody, QuoteResponseJson,
        TransactionJson, WalletsJson,
    },
};

/// The whole REST contract, one line per route: method and path (served under `/api/v1` and
/// `/v1`), handler, and the core RPC it calls; the last route serves the contract's OpenAPI
/// document and calls none. The method and path of a documented route are also its handler's
/// `#[utoipa::path]`, which the document is made from: `at` refuses a line that disagrees.
#[rustfmt::skip] // A table: one line per route, in aligned columns.
fn v1_routes() -> OpenApiRouter<Edge> {
    OpenApiRouter::new()
        .routes(at("GET /wallets",                    routes!(list_wallets)))    // ListWallets
        .routes(at("GET /wallets/balances",           routes!(get_balances)))    // GetBalances
        .routes(at("GET /wallets/{address}/balances", routes!(get_balances_of))) // GetBalances
        .routes(at("GET /tx/{id}",                    routes!(get_transaction))) // GetTransaction
        .routes(at("GET /tx/events",                  routes!(watch_transactions))) // WatchTransactions
        .routes(at("POST /send",                      routes!(writes::send)))          // Send (SimulateWrite with ?dryRun=true)
        .routes(at("POST /token/approve",             routes!(writes::approve_token))) // ApproveToken (SimulateWrite)
        .routes(at("POST /contracts/send",            routes!(writes::call_contract))) // CallContract (SimulateWrite)
        .routes(at("POST /trade/quote",               routes!(get_quote)))       // GetQuote
        .routes(at("POST /trade/swap",                routes!(writes::swap)))          // Swap (SimulateWrite)
        .routes(at("POST /webhooks",                  routes!(webhooks::create_webhook))) // CreateWebhook
        .routes(at("GET /webhooks",                   routes!(webhooks::list_webhooks)))  // ListWebhooks
        .routes(at("DELETE /webhooks/{id}",           routes!(webhooks::delete_webhook))) // DeleteWebhook
        .routes(at("POST /webhooks/{id}/rotate-secret", routes!(webhooks::rotate_webhook_secret))) // RotateWebhookSecret
        .routes(at("POST /webhooks/{id}/enable",      routes!(webhooks::enable_webhook))) // EnableWebhook
        .routes(at("GET /webhooks/{id}/deliveries",   routes!(webhooks::list_webhook_deliveries))) // ListWebhookDeliveries
        .routes(at("POST /webhooks/{id}/deliveries/replay", routes!(webhooks::replay_webhook_deliveries))) // ReplayWebhookDeliveries
        .routes(at("GET /approvals",                  routes!(approvals::list_approvals))) // ListApprovals
        .routes(at("GET /approvals/{id}",             routes!(approvals::get_approval)))   // GetApproval
        .routes(at("GET /deposits",                   routes!(deposits::list_deposits)))  // ListDeposits
        .routes(at("GET /deposits/events",            routes!(deposits::watch_deposits))) // WatchDeposits
        .routes(at("GET /deposits/{id}",              routes!(deposits::get_deposit)))    // GetDeposit
        .routes(at("POST /payouts",                   routes!(payouts::create_payout)))   // CreatePayout
        .routes(at("GET /payouts/{id}",               routes!(payouts::get_payout)))      // GetPayout
        .routes(at("GET /payouts",                    routes!(payouts::list_payouts)))    // ListPayouts
        .route("/openapi.json", get(openapi_json))                               // none: OpenAPI
}

/// A line of the table: `route`, which must be served at `line` ("METHOD /path") and only
/// there.
fn at(line: &str, route: UtoipaMethodRouter<Edge>) -> UtoipaMethodRouter<Edge> {
    let declared: Vec<String> = route
        .1
        .paths
        .iter()
        .flat_map(|(path, item)| {
            [
                ("GET", &item.get),
                ("PUT", &item.put),
                ("POST", &item.post),
                ("DELETE", &item.delete),
                ("OPTIONS", &item.options),
                ("HEAD", &item.head),
                ("PATCH", &item.patch),
                ("TRACE", &item.trace),
                ("QUERY", &item.query),
            ]
            .into_iter()
            .filter(|(_, operation)| operation.is_some())
            .map(move |(method, _)| format!("{method} {path}"))
        })
        .collect();
    assert_eq!(
        declared,
        [line],
        "the route table and the handler's #[utoipa::path] disagree"
    );
    route
}

/// The v1 routes over `core`; `openapi.json` serves their OpenAPI document, with `/api/v1`
/// paths.
pub(crate) fn v1(core: CoreChannel) -> axum::Router {
    let (router, paths) = v1_routes().split_for_parts();
    router.with_state(Edge(Arc::new(Clients {
        webhooks: WebhookServiceClient::new(core.clone()),
        approvals: ApprovalServiceClient::new(core.clone()),
        deposits: DepositServiceClient::new(core.clone()),
        payouts: PayoutServiceClient::new(core.clone()),
        core: WalletOpsServiceClient::new(core),
        doc: Arc::new(crate::openapi::document(paths)),
    })))
}

/// The OpenAPI document of the REST contract.
pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    let (_, paths) = v1_routes().split_for_parts();
    crate::openapi::document(paths)
}

/// The edge's state: clients of the core's services, and the OpenAPI document it serves.
/// Shared: axum clones the state for every request, and a handler clones (a tower stack
/// each) only the client it calls.
#[derive(Clone)]
pub(crate) struct Edge(Arc<Clients>);

struct Clients {
    core: WalletOpsServiceClient<CoreChannel>,
    webhooks: WebhookServiceClient<CoreChannel>,
    approvals: ApprovalServiceClient<CoreChannel>,
    deposits: DepositServiceClient<CoreChannel>,
    payouts: PayoutServiceClient<CoreChannel>,
    doc: Arc<utoipa::openapi::OpenApi>,
}

impl Edge {
    fn core(&self) -> WalletOpsServiceClient<CoreChannel> {
        self.0.core.clone()
    }
    fn webhooks(&self) -> WebhookServiceClient<CoreChannel> {
        self.0.webhooks.clone()
    }
    fn approvals(&self) -> ApprovalServiceClient<CoreChannel> {
        self.0.approvals.clone()
    }
    fn deposits(&self) -> DepositServiceClient<CoreChannel> {
        self.0.deposits.clone()
    }
    fn payouts(&self) -> PayoutServiceClient<CoreChannel> {
        self.0.payouts.clone()
    }
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge")
            .field("core", &self.0.core)
            .finish_non_exhaustive()
    }
}

/// Wraps `message` in a gRPC request carrying the contract headers as metadata. A header
/// that is not valid metadata is left out; the core then reports it missing. A request the
/// edge could not read still goes to the core, as an empty message that says why, so that
/// the core admits the caller before it answers INVALID_INPUT: no answer but 401 without a
/// valid key, and every request counts against the rate limit.
pub(crate) fn call<T: Default>(
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
    copy_headers(
        headers,
        &[
            API_KEY_HEADER,
            IDEMPOTENCY_KEY_HEADER,
            REQUEST_ID_HEADER,
            CLIENT_ADDRESS_HEADER,
        ],
        &mut req,
    );
    Ok(req)
}

/// Copies the headers `names` that hold visible ASCII into `req`'s metadata.
pub(crate) fn copy_headers<T>(
    headers: &HeaderMap,
    names: &[&'static str],
    req: &mut tonic::Request<T>,
) {
    for &name in names {
        if let Some(value) = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<AsciiMetadataValue>().ok())
        {
            req.metadata_mut()
                .insert(MetadataKey::from_static(name), value);
        }
    }
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
    State(edge): State<Edge>,
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
    let resp = edge.core().list_wallets(call(&headers, req)?).await?;
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
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<BalancesJson>, EdgeError> {
    let req = balances_request(q, |q| q.string("address"));
    let resp = edge.core().get_balances(call(&headers, req)?).await?;
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
    State(edge): State<Edge>,
    Path(address): Path<String>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<Json<BalancesJson>, EdgeError> {
    let req = balances_request(q, |_| Ok(Some(address)));
    let resp = edge.core().get_balances(call(&headers, req)?).await?;
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
    State(edge): State<Edge>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<TransactionJson>, EdgeError> {
    let resp = edge
        .core()
        .get_transaction(call(&headers, Ok(pb::GetTransactionRequest { id }))?)
        .await?;
    let tx = resp.into_inner().transaction.unwrap_or_default();
    Ok(Json(tx.into()))
}

#[utoipa::path(get, path = "/tx/events", tag = "transactions",
    params(
        ("id" = Option<uuid::Uuid>, Query, description = "Only this transaction's changes"),
        ("chain" = Option<String>, Query, description = "Only this chain's changes (slug)"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event id (0: from the oldest kept); absent: from now on"),
    ),
    security(("api_key" = [])),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
         description = "Server-Sent Events, one per status change in commit order: `id` the event id, `event` its type (`transaction.submitted`, `transaction.confirmed`, ...), `data` the transaction as GET /tx/{id} gives it. A stream cut off ends with an `error` event holding the error body."),
        (status = 400, description = "A bad filter or Last-Event-ID", body = ErrorBody),
    ))]
async fn watch_transactions(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
) -> Result<EventStream, EdgeError> {
    use axum::response::sse::Event;
    let req = q.and_then(|q| {
        Ok(pb::WatchTransactionsRequest {
            transaction_id: q.string("id")?,
            chain: q.string("chain")?,
            after_event_id: last_event_id(&headers)?,
        })
    });
    // The record's id is the `id` parameter, the event to resume after a header.
    const WATCH_NAMES: &RestNames = &[
        ("transaction_id", "id"),
        ("after_event_id", "Last-Event-ID"),
    ];
    let events = edge
        .core()
        .watch_transactions(call(&headers, req)?)
        .await
        .map_err(in_rest_names(WATCH_NAMES))?
        .into_inner();
    Ok(sse(events, &headers, |event| {
        let tx = TransactionJson::from(event.transaction.unwrap_or_default());
        Event::default()
            .id(event.event_id.to_string())
            .event(event.r#type)
            .json_data(tx)
            .unwrap_or_default()
    }))
}

/// Server-Sent Events, as the watch routes answer.
pub(super) type EventStream = axum::response::Sse<
    axum::response::sse::KeepAliveStream<
        futures::stream::BoxStream<
            'static,
            Result<axum::response::sse::Event, std::convert::Infallible>,
        >,
    >,
>;

/// A core's stream of events as Server-Sent Events: each by `each`, and a stream cut off
/// ending with an `error` event holding the error body.
pub(super) fn sse<T: 'static>(
    events: impl futures::Stream<Item = Result<T, tonic::Status>> + Send + 'static,
    headers: &HeaderMap,
    each: impl Fn(T) -> axum::response::sse::Event + Send + 'static,
) -> EventStream {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures::StreamExt as _;
    let request_id = headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let events = events.map(move |event| {
        Ok(match event {
            Ok(event) => each(event),
            Err(status) => {
                let (code, error, _) = crate::error::read_status(&status);
                let body = ErrorBody {
                    error,
                    code: code.as_str().to_owned(),
                    request_id: request_id.clone(),
                };
                Event::default()
                    .event("error")
                    .json_data(body)
                    .unwrap_or_default()
            }
        })
    });
    Sse::new(events.boxed()).keep_alive(KeepAlive::default())
}

/// The `Last-Event-ID` header: an event id.
pub(super) fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, EdgeError> {
    headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    EdgeError::invalid("Last-Event-ID", "must be an event id (a number)")
                })
        })
        .transpose()
}

#[utoipa::path(post, path = "/trade/quote", tag = "trade", request_body = QuoteBody,
    security(("api_key" = [])),
    responses(
        (status = 200, description = "The quote", body = QuoteResponseJson),
        (status = 400, description = "Bad input, or QUOTE_FAILED", body = ErrorBody),
        (status = 429, description = "Write budget spent (quotes count as writes)", body = ErrorBody),
    ))]
async fn get_quote(
    State(edge): State<Edge>,
    headers: HeaderMap,
    body: Result<EdgeJson<QuoteBody>, EdgeError>,
) -> Result<Json<QuoteResponseJson>, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    let resp = edge.core().get_quote(call(&headers, req)?).await?;
    Ok(Json(resp.into_inner().into()))
}

async fn openapi_json(State(edge): State<Edge>) -> Json<utoipa::openapi::OpenApi> {
    Json(edge.0.doc.as_ref().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_table_agrees_with_the_handlers() {
        // Building the table runs `at` on every line: it panics on a line whose method or
        // path is not its handler's.
        drop(v1_routes());
    }
}
