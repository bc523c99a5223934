//! The `walletops.v1` contract shared by the core and the edge: the generated protobuf types
//! and gRPC stubs, the encoded descriptor set for reflection, the contract's error codes and
//! the request-id rule. Nothing here knows about storage, chains or HTTP routing.

pub mod channel;
pub mod json;
pub mod payouts_csv;
pub mod request_id;
pub mod rest;

/// Generated `walletops.v1` messages, enums, servers and clients.
#[allow(missing_docs, unreachable_pub, clippy::all)]
pub mod v1 {
    tonic::include_proto!("walletops.v1");
}

/// Encoded `FileDescriptorSet` of every `walletops.v1` file and its imports, for reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/walletops_descriptor.bin"));

/// The `google.rpc.ErrorInfo.domain` of every WalletOps error.
pub const ERROR_DOMAIN: &str = "walletops";

/// Metadata key of the API key, on gRPC and as the HTTP header.
pub const API_KEY_HEADER: &str = "x-api-key";
/// Metadata key of the idempotency key (the HTTP `Idempotency-Key` header, lower-cased).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
/// Metadata key naming an agent's tool call that makes a write without an idempotency key:
/// the MCP edge sets it (the session, the JSON-RPC id, the tool and its arguments,
/// form-urlencoded), and the core derives the write's key from it, so an agent that retries
/// a call as it sent it pays once. The REST edge never forwards it.
pub const TOOL_CALL_HEADER: &str = "x-walletops-tool-call";
/// Metadata key of a dashboard session's token (the session cookie's value).
pub const SESSION_TOKEN_HEADER: &str = "x-session-token";
/// Metadata key of a dashboard session's CSRF token, on every changing request of a session.
pub const CSRF_TOKEN_HEADER: &str = "x-csrf-token";
/// Metadata key of the address of the client a request came from, set by the REST edge, so
/// that failed sign-ins are counted per client and not per edge.
pub const CLIENT_ADDRESS_HEADER: &str = "x-client-address";
/// Metadata key of the admin token, for `AdminService`.
pub const ADMIN_TOKEN_HEADER: &str = "x-admin-token";
/// Binary metadata key the REST edge sets on a request it could not read into its message
/// (the message is then empty): `{"field": ..., "problem": ...}` as JSON. The core answers
/// it with INVALID_INPUT once it has admitted the caller, so that authentication and the
/// rate limit come first for every request, whatever its body.
pub const UNREADABLE_HEADER: &str = "walletops-unreadable-bin";

/// Whole seconds a caller should wait before it retries: rounded up, and never 0 (a
/// `Retry-After: 0` invites an immediate retry that would be refused again). The core rounds
/// its `RetryInfo` and its messages with it, the edge its `Retry-After` header.
pub fn retry_after_secs(wait: std::time::Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// The contract's error codes: the `code` of the REST error body and the
/// `google.rpc.ErrorInfo.reason` of a gRPC status, spelled as the spec spells them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// Missing or invalid auth or API key, or an expired or revoked key.
    Unauthorized,
    /// Authenticated but not allowed.
    Forbidden,
    /// Resource not found.
    NotFound,
    /// Rate limit exceeded.
    RateLimited,
    /// Invalid request parameters.
    InvalidInput,
    /// Idempotency key reused with a different request.
    IdempotentBodyMismatch,
    /// Idempotency key already used without a stored success.
    IdempotentReplay,
    /// The swap aggregator could not quote.
    QuoteFailed,
    /// The wallet does not exist.
    WalletNotFound,
    /// The user is not linked to the wallet provider.
    UserNotLinked,
    /// The wallet is not delegated to the server signer.
    WalletNotDelegated,
    /// The provider wallet id is missing.
    WalletIdRequired,
    /// Unknown or unsupported chain.
    ChainUnknown,
    /// The sender lacks funds for value or fee.
    InsufficientFunds,
    /// The wallet provider's or chain node's RPC failed.
    ProviderRpcError,
    /// The transaction could not be submitted.
    SendFailed,
    /// A required service is not configured or not available.
    ServiceUnavailable,
    /// Server error.
    InternalError,
}

impl ErrorCode {
    /// The code as the contract spells it, e.g. `WALLET_NOT_DELEGATED`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn error_codes_round_trip_in_contract_spelling() {
        assert_eq!(
            ErrorCode::IdempotentBodyMismatch.as_str(),
            "IDEMPOTENT_BODY_MISMATCH"
        );
        for code in ErrorCode::VARIANTS {
            assert_eq!(code.as_str().parse::<ErrorCode>().ok(), Some(*code));
        }
        assert_eq!(ErrorCode::VARIANTS.len(), 18);
    }
}
