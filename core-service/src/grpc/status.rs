//! The one mapping from `WalletOpsError` to `tonic::Status`: `google.rpc.ErrorInfo` with the
//! contract code as `reason` and `walletops` as `domain`, `BadRequest` field violations for
//! `INVALID_INPUT`, `RetryInfo` for `RATE_LIMITED`. Internal detail goes to the log here and
//! never into the status.

use std::{collections::HashMap, time::Duration};

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};
use walletops_proto::{ERROR_DOMAIN, ErrorCode};

use crate::error::WalletOpsError;

/// The gRPC code for each contract code. No `_ =>` arm: a new code must choose here.
fn grpc_code(code: ErrorCode) -> Code {
    use ErrorCode as C;
    match code {
        C::Unauthorized => Code::Unauthenticated,
        C::Forbidden | C::WalletNotDelegated | C::UserNotLinked => Code::PermissionDenied,
        C::NotFound | C::WalletNotFound => Code::NotFound,
        C::RateLimited => Code::ResourceExhausted,
        C::InvalidInput | C::ChainUnknown | C::WalletIdRequired => Code::InvalidArgument,
        C::IdempotentBodyMismatch | C::IdempotentReplay => Code::AlreadyExists,
        C::QuoteFailed | C::InsufficientFunds => Code::FailedPrecondition,
        C::ProviderRpcError | C::ServiceUnavailable => Code::Unavailable,
        C::SendFailed => Code::Aborted,
        C::InternalError => Code::Internal,
    }
}

impl From<WalletOpsError> for Status {
    fn from(err: WalletOpsError) -> Self {
        let code = err.code();
        let mut metadata = HashMap::new();
        match &err {
            WalletOpsError::RateLimited { kind, limit, .. } => {
                metadata.insert("budget".to_owned(), (*kind).to_owned());
                metadata.insert("requestsPerMinute".to_owned(), limit.to_string());
            }
            WalletOpsError::Internal(source) => {
                tracing::error!(error = ?source, "internal error");
            }
            WalletOpsError::Unauthorized(reason) => {
                tracing::info!(reason, "authentication failed");
            }
            _ => {}
        }
        let mut details = ErrorDetails::with_error_info(code.as_str(), ERROR_DOMAIN, metadata);
        match &err {
            WalletOpsError::InvalidInput(violations) => {
                details.set_bad_request(
                    violations
                        .iter()
                        .map(|v| FieldViolation::new(v.field.clone(), v.description.clone()))
                        .collect::<Vec<_>>(),
                );
            }
            WalletOpsError::ChainUnknown(_) => {
                details.set_bad_request(vec![FieldViolation::new("chain", err.to_string())]);
            }
            WalletOpsError::RateLimited { retry_after, .. }
            | WalletOpsError::ReplaysCapped { retry_after, .. }
            | WalletOpsError::Throttled { retry_after, .. } => {
                details.set_retry_info(Some(Duration::from_secs(
                    walletops_proto::retry_after_secs(*retry_after),
                )));
            }
            _ => {}
        }
        // A node's error (a connection refused, say) names the URL it called, and hosted
        // providers put their API key in it.
        let message = walletops_chains::without_urls(&err.to_string());
        Status::with_error_details(grpc_code(code), message, details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_carry_the_contract_details() {
        let status: Status = WalletOpsError::RateLimited {
            kind: "write",
            whose: "per user",
            limit: 15,
            retry_after: Duration::from_millis(1200),
        }
        .into();
        assert_eq!(status.code(), Code::ResourceExhausted);
        let details = status.get_error_details();
        let info = details.error_info().expect("error info");
        assert_eq!(info.reason, "RATE_LIMITED");
        assert_eq!(info.domain, "walletops");
        assert_eq!(
            details.retry_info().expect("retry").retry_delay,
            Some(Duration::from_secs(2))
        );

        let status: Status = WalletOpsError::invalid("chain", "required").into();
        let details = status.get_error_details();
        let bad = details.bad_request().expect("bad request");
        assert_eq!(bad.field_violations[0].field, "chain");
        assert!(status.message().contains("chain"));

        let status: Status = WalletOpsError::ChainUnknown("dogechain".to_owned()).into();
        let details = status.get_error_details();
        assert_eq!(details.error_info().expect("info").reason, "CHAIN_UNKNOWN");
        let bad = details.bad_request().expect("bad request");
        assert_eq!(bad.field_violations[0].field, "chain");
        assert!(status.message().starts_with("chain: "));

        let status: Status = WalletOpsError::Internal(anyhow::anyhow!("SELECT secret")).into();
        assert_eq!(status.message(), "internal error");
    }
}
