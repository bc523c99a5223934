//! How a tool call becomes a core call and its answer: the HTTP request's headers as the
//! REST routes read them, the key that makes a write idempotent, and the REST JSON (or the
//! contract's error body) as the tool's result.

use axum::http::{HeaderMap, HeaderValue, request::Parts};
use rmcp::{
    RoleServer,
    model::{CallToolResult, ContentBlock, RequestId},
    service::RequestContext,
};
use serde::Serialize;
use walletops_proto::{
    IDEMPOTENCY_KEY_HEADER, TOOL_CALL_HEADER, request_id::REQUEST_ID_HEADER, v1 as pb,
};

use super::{chain_data, gate};
use crate::{
    error::{EdgeError, ErrorBody},
    model::SubmissionJson,
    routes::{call, copy_headers},
};

/// The headers of the HTTP request behind `ctx`, as the REST routes read them: a bearer
/// token counts as `x-api-key`; no `Idempotency-Key` (writes take theirs from their input).
/// Over stdio there is no request: no headers, no key.
pub(super) fn headers(ctx: &RequestContext<RoleServer>) -> HeaderMap {
    let mut headers = gate::keyed(
        ctx.extensions
            .get::<Parts>()
            .map(|p| p.headers.clone())
            .unwrap_or_default(),
    );
    headers.remove(IDEMPOTENCY_KEY_HEADER);
    headers.remove(TOOL_CALL_HEADER);
    headers
}

/// The header that keys a write: the input's idempotency key as `Idempotency-Key`, or, with
/// none, the tool call it came in (the session, the JSON-RPC id, the tool and its arguments)
/// as `TOOL_CALL_HEADER`, from which the core derives the key. A client without a session
/// must give one: its JSON-RPC ids repeat from request to request, and a key derived from
/// them would take a second, intended payment for a retry of the first.
fn keyed_by(
    given: Option<&str>,
    ctx: &RequestContext<RoleServer>,
    tool: &str,
    arguments: &impl Serialize,
) -> Result<(&'static str, HeaderValue), EdgeError> {
    if let Some(given) = given.map(str::trim).filter(|k| !k.is_empty()) {
        let key = HeaderValue::from_str(given)
            .map_err(|_| EdgeError::invalid("idempotencyKey", "not a UUID"))?;
        return Ok((IDEMPOTENCY_KEY_HEADER, key));
    }
    let Some(session) = ctx
        .extensions
        .get::<Parts>()
        .and_then(|p| p.headers.get(gate::SESSION_HEADER))
        .and_then(|v| v.to_str().ok())
    else {
        return Err(EdgeError::invalid(
            "idempotencyKey",
            "required without an MCP session: give a new UUID for each payment you mean, and the same one when you retry it",
        ));
    };
    let id = match &ctx.id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => s.to_string(),
    };
    let arguments = serde_json::to_string(arguments).unwrap_or_default();
    let call: String = url::form_urlencoded::byte_serialize(
        format!("{session}/{id}/{tool}/{arguments}").as_bytes(),
    )
    .collect();
    let call = HeaderValue::from_str(&call)
        .map_err(|_| EdgeError::invalid("idempotencyKey", "the call cannot name a key"))?;
    Ok((TOOL_CALL_HEADER, call))
}

/// `call` for a write tool: the REST request's metadata, and the tool call that keys it.
pub(super) fn tool_call<T: Default>(
    headers: &HeaderMap,
    message: Result<T, EdgeError>,
) -> Result<tonic::Request<T>, EdgeError> {
    let mut req = call(headers, message)?;
    copy_headers(headers, &[TOOL_CALL_HEADER], &mut req);
    Ok(req)
}

/// A tool's answer: the REST JSON of `result`, or the contract's error body as a tool error
/// (the model reads its `code`).
pub(super) fn answer<T: Serialize>(
    result: Result<T, EdgeError>,
    headers: &HeaderMap,
) -> CallToolResult {
    match result {
        Ok(value) => {
            let body = serde_json::to_value(value).unwrap_or_default();
            let mut result = CallToolResult::structured(body.clone());
            chain_data::mark(&mut result, &body);
            result
        }
        Err(e) => {
            let told = e.told();
            let code = told.code;
            let body = ErrorBody {
                error: told.message,
                code: code.as_str().to_owned(),
                request_id: headers
                    .get(REQUEST_ID_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned(),
            };
            let mut result = CallToolResult::error(vec![ContentBlock::text(
                serde_json::to_string(&body).unwrap_or_default(),
            )]);
            result.structured_content = serde_json::to_value(&body).ok();
            // These errors quote the node's or the contract's words.
            let from_chain = matches!(
                code,
                walletops_proto::ErrorCode::SendFailed
                    | walletops_proto::ErrorCode::InsufficientFunds
                    | walletops_proto::ErrorCode::ProviderRpcError
            );
            if let Some(body) = result.structured_content.clone().filter(|_| from_chain) {
                chain_data::mark(&mut result, &body);
            }
            result
        }
    }
}

/// Runs write `tool` (its arguments `arguments`): its idempotency key, `given` or made from
/// the call, is set, then `send` calls the core with the headers; the submission, or the
/// error.
pub(super) async fn write<F, Fut>(
    ctx: &RequestContext<RoleServer>,
    tool: &str,
    given: Option<&str>,
    arguments: String,
    send: F,
) -> CallToolResult
where
    F: FnOnce(HeaderMap) -> Fut,
    Fut: Future<Output = Result<Option<pb::Submission>, EdgeError>>,
{
    let mut headers = headers(ctx);
    let result = match keyed_by(given, ctx, tool, &arguments) {
        Ok((name, value)) => {
            headers.insert(name, value);
            send(headers.clone()).await.map(SubmissionJson::from)
        }
        Err(e) => Err(e),
    };
    let held = result.as_ref().is_ok_and(SubmissionJson::is_held);
    let mut answered = answer(result, &headers);
    if held {
        answered.content.push(ContentBlock::text(
            "pending_approval: this write moves more than your key's approval threshold, so \
             it was not signed. A person approves or rejects it in WalletOps; follow it with \
             get_approval and the id above. Do not send it again under a new key.",
        ));
    }
    answered
}

/// An input as the arguments it was read from (for the key a call makes).
pub(super) fn input_json<T: std::fmt::Debug>(input: &T) -> String {
    format!("{input:?}")
}
