//! The error side of the edge: the one table from contract code to HTTP status, and the
//! contract's error body `{error, code, requestId}` with `requestId` equal to the
//! `x-request-id` header. A `tonic::Status` from the core is read through its
//! `google.rpc.ErrorInfo` reason; the edge decides nothing else about errors.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header::RETRY_AFTER},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use tonic_types::StatusExt;
use utoipa::ToSchema;
use walletops_proto::ErrorCode;

tokio::task_local! {
    /// The request id of the request being answered, for error bodies.
    pub(crate) static REQUEST_ID: String;
}

/// The one table from contract code to HTTP status. Exhaustive on purpose: no `_ =>`.
pub fn http_status(code: ErrorCode) -> StatusCode {
    use {ErrorCode as C, StatusCode as S};
    match code {
        C::Unauthorized => S::UNAUTHORIZED,
        C::Forbidden | C::UserNotLinked | C::WalletNotDelegated => S::FORBIDDEN,
        C::NotFound | C::WalletNotFound => S::NOT_FOUND,
        C::RateLimited => S::TOO_MANY_REQUESTS,
        C::InvalidInput
        | C::QuoteFailed
        | C::ChainUnknown
        | C::InsufficientFunds
        | C::WalletIdRequired => S::BAD_REQUEST,
        C::IdempotentBodyMismatch | C::IdempotentReplay => S::CONFLICT,
        C::ProviderRpcError | C::SendFailed => S::BAD_GATEWAY,
        C::ServiceUnavailable => S::SERVICE_UNAVAILABLE,
        C::InternalError => S::INTERNAL_SERVER_ERROR,
    }
}

/// The contract's error body.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// Human-readable message.
    pub error: String,
    /// Contract code, e.g. `INVALID_INPUT`.
    #[schema(example = "INVALID_INPUT")]
    pub code: String,
    /// The request id, also in the `x-request-id` header.
    pub request_id: String,
}

/// An error answer of the edge.
#[derive(Debug)]
pub(crate) enum EdgeError {
    /// The core refused or failed the call.
    Core(tonic::Status),
    /// The edge could not read the request into its message (malformed JSON, a bad query
    /// value): the core is called all the same, to admit the caller first, and answers it.
    Unreadable {
        /// The field, parameter or header at fault.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The edge found no route.
    Local {
        /// Contract code.
        code: ErrorCode,
        /// Message naming the field.
        message: String,
        /// HTTP status, when it is not the table's (405).
        status: Option<StatusCode>,
    },
}

impl EdgeError {
    /// `INVALID_INPUT` naming `field`. The problem is cut short: parsers quote the input,
    /// which goes to the core in a metadata header of limited size.
    pub(crate) fn invalid(field: &str, problem: impl std::fmt::Display) -> Self {
        const MOST_CHARS: usize = 200;
        let mut problem = problem.to_string();
        if let Some((cut, _)) = problem.char_indices().nth(MOST_CHARS) {
            problem.truncate(cut);
            problem.push('…');
        }
        Self::Unreadable {
            field: field.chars().take(MOST_CHARS).collect(),
            problem,
        }
    }
}

impl From<tonic::Status> for EdgeError {
    fn from(status: tonic::Status) -> Self {
        Self::Core(status)
    }
}

/// How a route's REST request spells the fields its core request spells otherwise: pairs
/// of (the core's name, the REST name), e.g. `("event_types", "eventTypes")`.
pub(crate) type RestNames = [(&'static str, &'static str)];

/// Turns a core refusal into the edge's error, naming its fields as the REST request does
/// (`names`): the core knows the gRPC request it was given, the route knows where each of
/// its fields came from (a body field, a query parameter, the path, a header).
pub(crate) fn in_rest_names(names: &'static RestNames) -> impl Fn(tonic::Status) -> EdgeError {
    move |status| EdgeError::Core(renamed(status, names))
}

/// `status` with the fields of its INVALID_INPUT violations renamed by `names`, in its
/// `BadRequest` and in its message, which the core makes from them.
fn renamed(status: tonic::Status, names: &RestNames) -> tonic::Status {
    let mut details = status.get_error_details();
    let invalid = details
        .error_info()
        .is_some_and(|i| i.reason == ErrorCode::InvalidInput.as_str());
    let Some(bad) = details.bad_request().filter(|_| invalid) else {
        return status;
    };
    let mut changed = false;
    let violations: Vec<tonic_types::FieldViolation> = bad
        .field_violations
        .iter()
        .map(|v| {
            let field = match names.iter().find(|(core, _)| *core == v.field) {
                Some((_, rest)) => {
                    changed = true;
                    (*rest).to_owned()
                }
                None => v.field.clone(),
            };
            tonic_types::FieldViolation::new(field, v.description.clone())
        })
        .collect();
    if !changed {
        return status;
    }
    let message = format!(
        "invalid input: {}",
        violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect::<Vec<_>>()
            .join("; ")
    );
    details.set_bad_request(violations);
    tonic::Status::with_error_details(status.code(), message, details)
}

/// Whether `status` was made by the channel, the core never having answered it.
fn from_transport(status: &tonic::Status) -> bool {
    std::iter::successors(std::error::Error::source(status), |e| e.source())
        .any(|e| e.is::<tonic::transport::Error>())
        && status.code() == tonic::Code::Unknown
}

/// The contract code, message and retry delay a core status carries.
pub(crate) fn read_status(status: &tonic::Status) -> (ErrorCode, String, Option<u64>) {
    let details = status.get_error_details();
    let retry = details
        .retry_info()
        .and_then(|r| r.retry_delay)
        .map(walletops_proto::retry_after_secs);
    match details
        .error_info()
        .and_then(|i| i.reason.parse::<ErrorCode>().ok())
    {
        Some(code) => (code, status.message().to_owned(), retry),
        // No contract code: the core never answered (down, unreachable, timed out).
        None => match status.code() {
            // A connection refused mid-handshake (a core that asks for a client certificate
            // the edge lacks) surfaces as an unknown status with a transport error.
            _ if status.code() == tonic::Code::Unavailable || from_transport(status) => {
                tracing::warn!(error = %status, "core unavailable");
                (
                    ErrorCode::ServiceUnavailable,
                    // Also a connection that broke mid-call: a write may have been signed.
                    "the WalletOps core is unavailable; retry shortly, a write with the same Idempotency-Key (it is never carried out twice)".to_owned(),
                    None,
                )
            }
            // The call ran out of time, the core's or the edge's: a write may have been
            // signed and will then still be sent. Told "unavailable", a caller could take
            // it for "not done" and pay again under a new key.
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
                tracing::warn!(error = %status, "core call timed out");
                (
                    ErrorCode::ServiceUnavailable,
                    "the request timed out and its outcome is unknown: a write may still be carried out; retry it with the same Idempotency-Key to learn its outcome".to_owned(),
                    None,
                )
            }
            _ => {
                tracing::error!(error = %status, "core answered without a contract code");
                (ErrorCode::InternalError, "internal error".to_owned(), None)
            }
        },
    }
}

/// An error as the contract tells it.
#[derive(Debug)]
pub(crate) struct Told {
    /// The contract's code.
    pub(crate) code: ErrorCode,
    /// The message for the caller.
    pub(crate) message: String,
    /// A rate limit's retry delay, in whole seconds.
    pub(crate) retry_after: Option<u64>,
    /// The HTTP status.
    pub(crate) status: StatusCode,
}

impl EdgeError {
    /// The error as the contract tells it.
    pub(crate) fn told(self) -> Told {
        let (code, message, retry, status) = match self {
            Self::Core(s) => {
                let (code, message, retry) = read_status(&s);
                (code, message, retry, None)
            }
            Self::Unreadable { field, problem } => (
                ErrorCode::InvalidInput,
                format!("invalid input: {field}: {problem}"),
                None,
                None,
            ),
            Self::Local {
                code,
                message,
                status,
            } => (code, message, None, status),
        };
        Told {
            code,
            message,
            retry_after: retry,
            status: status.unwrap_or_else(|| http_status(code)),
        }
    }
}

impl IntoResponse for EdgeError {
    fn into_response(self) -> Response {
        let Told {
            code,
            message,
            retry_after,
            status,
        } = self.told();
        let request_id = REQUEST_ID.try_with(Clone::clone).unwrap_or_default();
        let body = ErrorBody {
            error: message,
            code: code.as_str().to_owned(),
            request_id,
        };
        let mut response = (status, Json(body)).into_response();
        if code == ErrorCode::RateLimited {
            // Retry-After is required on every 429, even if the core sent no RetryInfo.
            let secs = retry_after.unwrap_or(60);
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(RETRY_AFTER, v);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn retry_after_is_the_cores_retry_delay_in_whole_seconds() {
        let limited = |retry: Option<std::time::Duration>| {
            let mut details = tonic_types::ErrorDetails::with_error_info(
                "RATE_LIMITED",
                "walletops",
                std::collections::HashMap::new(),
            );
            if retry.is_some() {
                details.set_retry_info(retry);
            }
            let status = tonic::Status::with_error_details(
                tonic::Code::ResourceExhausted,
                "rate limit exceeded",
                details,
            );
            let response = EdgeError::from(status).into_response();
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let secs = std::time::Duration::from_secs;
        assert_eq!(limited(Some(secs(50))).as_deref(), Some("50"));
        // Rounded up, never 0: a client retrying at once would only be refused again.
        assert_eq!(
            limited(Some(std::time::Duration::from_millis(49_200))).as_deref(),
            Some("50")
        );
        assert_eq!(limited(Some(secs(0))).as_deref(), Some("1"));
        // A 429 always says when: a whole window without a delay from the core.
        assert_eq!(limited(None).as_deref(), Some("60"));
    }

    #[test]
    fn a_core_refusal_names_the_fields_as_rest_spells_them() {
        let mut details = tonic_types::ErrorDetails::with_error_info(
            "INVALID_INPUT",
            "walletops",
            std::collections::HashMap::new(),
        );
        details.set_bad_request(vec![
            tonic_types::FieldViolation::new("url", "must be an http or https URL"),
            tonic_types::FieldViolation::new("event_types", "unknown event type"),
        ]);
        let status = tonic::Status::with_error_details(
            tonic::Code::InvalidArgument,
            "invalid input: url: must be an http or https URL; event_types: unknown event type",
            details,
        );
        let told = in_rest_names(&[("event_types", "eventTypes")])(status).told();
        assert_eq!(told.code, ErrorCode::InvalidInput);
        assert_eq!(
            told.message,
            "invalid input: url: must be an http or https URL; eventTypes: unknown event type"
        );
    }

    #[test]
    fn every_code_has_a_status_from_the_spec_or_the_design() {
        let expected = [
            ("UNAUTHORIZED", 401),
            ("FORBIDDEN", 403),
            ("NOT_FOUND", 404),
            ("RATE_LIMITED", 429),
            ("INVALID_INPUT", 400),
            ("IDEMPOTENT_BODY_MISMATCH", 409),
            ("IDEMPOTENT_REPLAY", 409),
            ("QUOTE_FAILED", 400),
            ("WALLET_NOT_FOUND", 404),
            ("USER_NOT_LINKED", 403),
            ("WALLET_NOT_DELEGATED", 403),
            ("WALLET_ID_REQUIRED", 400),
            ("CHAIN_UNKNOWN", 400),
            ("INSUFFICIENT_FUNDS", 400),
            ("PROVIDER_RPC_ERROR", 502),
            ("SEND_FAILED", 502),
            ("SERVICE_UNAVAILABLE", 503),
            ("INTERNAL_ERROR", 500),
        ];
        assert_eq!(expected.len(), ErrorCode::VARIANTS.len());
        for (code, status) in expected {
            let code: ErrorCode = code.parse().expect("known code");
            assert_eq!(http_status(code).as_u16(), status, "{code}");
        }
    }
}
