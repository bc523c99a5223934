//! The write routes (`POST /send`, `/token/approve`, `/contracts/send`, `/trade/swap`): each
//! calls its write RPC, or with `?dryRun=true` `SimulateWrite` with the same request, which
//! needs no Idempotency-Key and signs nothing.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use utoipa::IntoParams;
use walletops_proto::v1::{self as pb, simulate_write_request::Write};

use super::{Edge, call};
use crate::{
    error::{EdgeError, ErrorBody},
    extract::{EdgeJson, QueryParams},
    model::{ApproveBody, ContractCallBody, DryRunJson, SendBody, SubmissionJson, SwapBody},
    openapi::{WriteHeaders, WriteResponses},
};

/// `?dryRun=true`: simulate the write and answer what it would do (200 with the effects, the
/// verdict and the fee); nothing is signed, claimed or stored; no Idempotency-Key needed.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub(crate) struct DryRunQuery {
    /// `true` to simulate the write instead of making it.
    #[param(rename = "dryRun")]
    dry_run: Option<bool>,
}

/// Whether `?dryRun=true` was asked: `None` for a real write; an unreadable query goes to
/// `SimulateWrite`, which admits the caller before it names the parameter.
fn dry_run(q: Result<QueryParams, EdgeError>) -> Option<Result<(), EdgeError>> {
    match q.and_then(|q| q.boolean("dryRun")) {
        Ok(Some(true)) => Some(Ok(())),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    }
}

/// The dry run of `write`.
async fn simulate(
    edge: &Edge,
    headers: &HeaderMap,
    write: Result<Write, EdgeError>,
) -> Result<Response, EdgeError> {
    let req = write.map(|w| pb::SimulateWriteRequest { write: Some(w) });
    let resp = edge.core().simulate_write(call(headers, req)?).await?;
    Ok(Json(DryRunJson::from(resp.into_inner())).into_response())
}

#[utoipa::path(post, path = "/send", tag = "transactions", request_body = SendBody,
    params(WriteHeaders, DryRunQuery), security(("api_key" = [])),
    responses(WriteResponses))]
pub(super) async fn send(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
    body: Result<EdgeJson<SendBody>, EdgeError>,
) -> Result<Response, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    if let Some(asked) = dry_run(q) {
        return simulate(&edge, &headers, asked.and(req.map(Write::Send))).await;
    }
    let resp = edge.core().send(call(&headers, req)?).await?;
    Ok(submitted(resp.into_inner().submission).into_response())
}

#[utoipa::path(post, path = "/token/approve", tag = "transactions", request_body = ApproveBody,
    params(WriteHeaders, DryRunQuery), security(("api_key" = [])),
    responses(WriteResponses))]
pub(super) async fn approve_token(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
    body: Result<EdgeJson<ApproveBody>, EdgeError>,
) -> Result<Response, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    if let Some(asked) = dry_run(q) {
        return simulate(&edge, &headers, asked.and(req.map(Write::ApproveToken))).await;
    }
    let resp = edge.core().approve_token(call(&headers, req)?).await?;
    Ok(submitted(resp.into_inner().submission).into_response())
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
    params(WriteHeaders, DryRunQuery), security(("api_key" = [])),
    responses(WriteResponses))]
pub(super) async fn call_contract(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
    body: Result<EdgeJson<ContractCallBody>, EdgeError>,
) -> Result<Response, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    if let Some(asked) = dry_run(q) {
        return simulate(&edge, &headers, asked.and(req.map(Write::CallContract))).await;
    }
    let resp = edge.core().call_contract(call(&headers, req)?).await?;
    Ok(submitted(resp.into_inner().submission).into_response())
}

#[utoipa::path(post, path = "/trade/swap", tag = "trade", request_body = SwapBody,
    params(WriteHeaders, DryRunQuery), security(("api_key" = [])),
    responses(
        (status = 200, description = "Accepted: the swap was signed, stored and sent; follow it with GET /tx/{id}", body = SubmissionJson),
        (status = 400, description = "Bad input, unknown chain, INSUFFICIENT_FUNDS, or QUOTE_FAILED (the aggregator refused or failed; an ERC20 sale the router may not spend yet names the token and spender to approve). QUOTE_FAILED claims no Idempotency-Key", body = ErrorBody),
        (status = 403, description = "Not the caller's wallet, or not delegated", body = ErrorBody),
        (status = 409, description = "Idempotency-Key reused", body = ErrorBody),
        (status = 502, description = "SEND_FAILED: the swap guard refused the aggregator's transaction (naming the check) or the node refused it; nothing was signed for a guard refusal", body = ErrorBody),
        (status = 503, description = "SERVICE_UNAVAILABLE: no aggregator configured for the chain (trade.evm.api_key)", body = ErrorBody),
    ))]
pub(super) async fn swap(
    State(edge): State<Edge>,
    headers: HeaderMap,
    q: Result<QueryParams, EdgeError>,
    body: Result<EdgeJson<SwapBody>, EdgeError>,
) -> Result<Response, EdgeError> {
    let req = body.map(|EdgeJson(body)| body.into());
    if let Some(asked) = dry_run(q) {
        return simulate(&edge, &headers, asked.and(req.map(Write::Swap))).await;
    }
    let resp = edge.core().swap(call(&headers, req)?).await?;
    Ok(submitted(resp.into_inner().submission).into_response())
}

/// A write's answer: 200 with the submission, or 202 with the approval it is held for.
fn submitted(submission: Option<pb::Submission>) -> (StatusCode, Json<SubmissionJson>) {
    let json = SubmissionJson::from(submission);
    let status = if json.is_held() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    (status, Json(json))
}
