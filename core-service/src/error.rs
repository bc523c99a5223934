//! The one domain error of WalletOps: a variant per contract code, carrying only what a
//! caller may see. `grpc::status` turns it into a `tonic::Status`; nothing else maps errors.

use std::time::Duration;

use walletops_proto::ErrorCode;

/// One problem with one request field, named as the REST contract names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// Field name in the contract's spelling, e.g. `chain`, `defaultOnly`, `Idempotency-Key`.
    pub field: String,
    /// What is wrong with it, for a human.
    pub description: String,
}

impl FieldViolation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

/// Gathers every bad field of a request so that the caller learns all its mistakes at once.
#[derive(Debug, Default)]
pub struct Violations(Vec<FieldViolation>);

impl Violations {
    /// Keeps the value of `result`, or records its violation under `field`.
    pub fn check<T>(&mut self, field: &str, result: Result<T, String>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(description) => {
                self.0.push(FieldViolation::new(field, description));
                None
            }
        }
    }

    /// Records a violation of `field`.
    pub fn push(&mut self, field: &str, description: impl Into<String>) {
        self.0.push(FieldViolation::new(field, description));
    }

    /// `built` (every field parsed) when nothing was recorded, else one `INVALID_INPUT`
    /// listing every violation.
    pub fn conclude<T>(self, built: Option<T>) -> Result<T, WalletOpsError> {
        match built {
            Some(value) if self.0.is_empty() => Ok(value),
            _ => Err(WalletOpsError::InvalidInput(self.0)),
        }
    }

    /// `Ok` when nothing was recorded, else one `INVALID_INPUT` listing every violation.
    pub fn finish(self) -> Result<(), WalletOpsError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(WalletOpsError::InvalidInput(self.0))
        }
    }
}

/// Every failure a WalletOps request can end in, one variant per contract code.
#[derive(Debug, thiserror::Error)]
pub enum WalletOpsError {
    /// Missing, malformed, unknown, expired or revoked API key. The reason is for the log
    /// only: the caller is not told which, so keys cannot be probed.
    #[error("missing or invalid API key")]
    Unauthorized(&'static str),
    /// A dashboard sign-in refused, or a session that has ended. The message is shown as
    /// is: it says the same whether the user exists or not.
    #[error("{0}")]
    NotSignedIn(&'static str),
    /// Authenticated but not allowed, e.g. another user's wallet.
    #[error("{0}")]
    Forbidden(String),
    /// The resource does not exist (or is not the caller's to see).
    #[error("{0}")]
    NotFound(String),
    /// The caller's rate budget for this kind of request is spent.
    #[error("rate limit exceeded: {limit} {kind} requests per minute {whose}; retry after {}s", walletops_proto::retry_after_secs(*retry_after))]
    RateLimited {
        /// `read` or `write`.
        kind: &'static str,
        /// Whose budget: `per user`, `for this key (…)`, `for the dashboard`.
        whose: &'static str,
        /// Requests allowed per minute.
        limit: u32,
        /// When a request will be admitted again.
        retry_after: Duration,
    },
    /// The user's webhook replays of the last hour reached `webhooks.replay_max_per_hour`.
    #[error(
        "at most {limit} webhook deliveries may be replayed in an hour (webhooks.replay_max_per_hour); retry after {}s",
        walletops_proto::retry_after_secs(*retry_after)
    )]
    ReplaysCapped {
        /// Replays allowed per hour.
        limit: u64,
        /// When enough replays are an hour old for the call to pass.
        retry_after: Duration,
    },
    /// Too many failed attempts (sign-ins) from one client or for one name in a window.
    #[error(
        "too many failed {what}: at most {limit} in {}; retry after {}s",
        minutes(*window),
        walletops_proto::retry_after_secs(*retry_after)
    )]
    Throttled {
        /// What failed, e.g. `sign-ins`.
        what: &'static str,
        /// Failures allowed per window.
        limit: u32,
        /// The window.
        window: Duration,
        /// When an attempt will be admitted again.
        retry_after: Duration,
    },
    /// The caller holds as many of something open at once (event streams) as it may.
    #[error("{0}")]
    Crowded(String),
    /// One or more request fields are invalid.
    #[error("{}", describe_violations(.0))]
    InvalidInput(Vec<FieldViolation>),
    /// An idempotency key was reused with a different request.
    #[error("{0}")]
    IdempotentBodyMismatch(String),
    /// An idempotency key was reused where no successful response is stored.
    #[error("{0}")]
    IdempotentReplay(String),
    /// The swap aggregator could not quote.
    #[error("{0}")]
    QuoteFailed(String),
    /// The wallet does not exist.
    #[error("{0}")]
    WalletNotFound(String),
    /// The user is not linked to the signing provider.
    #[error("{0}")]
    UserNotLinked(String),
    /// The wallet is not delegated to the server signer.
    #[error("{0}")]
    WalletNotDelegated(String),
    /// The provider wallet id is missing.
    #[error("{0}")]
    WalletIdRequired(String),
    /// Unknown or unsupported chain slug.
    #[error("chain: unknown or unsupported chain {0:?}")]
    ChainUnknown(String),
    /// The sender lacks funds for value or fee.
    #[error("{0}")]
    InsufficientFunds(String),
    /// A chain node's RPC failed.
    #[error("{0}")]
    ProviderRpcError(String),
    /// The wallet provider failed, refused or did not answer (PROVIDER_RPC_ERROR too). Unlike
    /// a node's failure, it leaves a write's Idempotency-Key free (see `leaves_key_free`).
    #[error("{0}")]
    WalletProviderError(String),
    /// The transaction could not be submitted.
    #[error("{0}")]
    SendFailed(String),
    /// A required service is not configured or not built yet.
    #[error("{0}")]
    ServiceUnavailable(String),
    /// The HSM failed, refused or was absent (SERVICE_UNAVAILABLE). Like the wallet
    /// provider's failure it leaves a write unsigned and its key free, and the monitor's
    /// re-signings wait for it.
    #[error("{0}")]
    HsmUnavailable(String),
    /// Anything else. The source goes to the log; the caller sees only "internal error".
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

fn describe_violations(violations: &[FieldViolation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| format!("{}: {}", v.field, v.description))
        .collect();
    format!("invalid input: {}", parts.join("; "))
}

/// A window as a message says it: `a minute`, `15 minutes`.
fn minutes(window: Duration) -> String {
    match window.as_secs() / 60 {
        0 | 1 => "a minute".to_owned(),
        n => format!("{n} minutes"),
    }
}

impl WalletOpsError {
    /// `INVALID_INPUT` for a single field.
    pub fn invalid(field: &str, description: impl Into<String>) -> Self {
        Self::InvalidInput(vec![FieldViolation::new(field, description)])
    }

    /// The contract code. No `_ =>` arm: a new variant must choose its code here.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unauthorized(_) | Self::NotSignedIn(_) => ErrorCode::Unauthorized,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::RateLimited { .. }
            | Self::ReplaysCapped { .. }
            | Self::Throttled { .. }
            | Self::Crowded(_) => ErrorCode::RateLimited,
            Self::InvalidInput(_) => ErrorCode::InvalidInput,
            Self::IdempotentBodyMismatch(_) => ErrorCode::IdempotentBodyMismatch,
            Self::IdempotentReplay(_) => ErrorCode::IdempotentReplay,
            Self::QuoteFailed(_) => ErrorCode::QuoteFailed,
            Self::WalletNotFound(_) => ErrorCode::WalletNotFound,
            Self::UserNotLinked(_) => ErrorCode::UserNotLinked,
            Self::WalletNotDelegated(_) => ErrorCode::WalletNotDelegated,
            Self::WalletIdRequired(_) => ErrorCode::WalletIdRequired,
            Self::ChainUnknown(_) => ErrorCode::ChainUnknown,
            Self::InsufficientFunds(_) => ErrorCode::InsufficientFunds,
            Self::ProviderRpcError(_) | Self::WalletProviderError(_) => ErrorCode::ProviderRpcError,
            Self::SendFailed(_) => ErrorCode::SendFailed,
            Self::ServiceUnavailable(_) | Self::HsmUnavailable(_) => ErrorCode::ServiceUnavailable,
            Self::Internal(_) => ErrorCode::InternalError,
        }
    }

    /// Whether the failure is one of the moment: a part outside the request that does not
    /// answer now (a chain node, the HSM, the wallet provider, an aggregator, a dependency
    /// of the core) or a budget that refills with time. The one answer to "try again later":
    /// an approved write, a payout's item and the monitor's work wait and are tried again;
    /// anything else ends them. No arm is a catch-all: a new variant must say which it is.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::ServiceUnavailable(_)
            | Self::HsmUnavailable(_)
            | Self::WalletProviderError(_)
            | Self::ProviderRpcError(_)
            | Self::QuoteFailed(_)
            | Self::RateLimited { .. }
            | Self::Throttled { .. }
            | Self::ReplaysCapped { .. }
            | Self::Crowded(_) => true,
            Self::Unauthorized(_)
            | Self::NotSignedIn(_)
            | Self::NotFound(_)
            | Self::Forbidden(_)
            | Self::InvalidInput(_)
            | Self::IdempotentBodyMismatch(_)
            | Self::IdempotentReplay(_)
            | Self::WalletNotFound(_)
            | Self::UserNotLinked(_)
            | Self::WalletNotDelegated(_)
            | Self::WalletIdRequired(_)
            | Self::ChainUnknown(_)
            | Self::InsufficientFunds(_)
            | Self::SendFailed(_)
            | Self::Internal(_) => false,
        }
    }

    /// Whether a write refused this way, before anything was signed, leaves its
    /// Idempotency-Key free: the refusal came from outside the request (an aggregator that
    /// refused or failed, the wallet provider failing, a part the operator has not
    /// configured) or from the key's limits (which the owner may raise), so the same request
    /// may succeed later, and its key with it. Every other refusal spends the key. No arm is
    /// a catch-all: a new variant must say which it is. (A chain node's failure is transient
    /// for the runners, which try again under the same key, but spends a caller's key: the
    /// contract answers the caller's retry with `IDEMPOTENT_REPLAY`.)
    pub fn leaves_key_free(&self) -> bool {
        match self {
            Self::QuoteFailed(_)
            | Self::ServiceUnavailable(_)
            | Self::HsmUnavailable(_)
            | Self::WalletProviderError(_)
            | Self::Forbidden(_) => true,
            Self::Unauthorized(_)
            | Self::NotSignedIn(_)
            | Self::NotFound(_)
            | Self::RateLimited { .. }
            | Self::ReplaysCapped { .. }
            | Self::Throttled { .. }
            | Self::Crowded(_)
            | Self::InvalidInput(_)
            | Self::IdempotentBodyMismatch(_)
            | Self::IdempotentReplay(_)
            | Self::WalletNotFound(_)
            | Self::UserNotLinked(_)
            | Self::WalletNotDelegated(_)
            | Self::WalletIdRequired(_)
            | Self::ChainUnknown(_)
            | Self::InsufficientFunds(_)
            | Self::ProviderRpcError(_)
            | Self::SendFailed(_)
            | Self::Internal(_) => false,
        }
    }
}

/// What a core still on a rotated-away master key is told.
pub const ROTATED_AWAY: &str = "this core's master key is no longer the database's (it \
    was rotated with `walletops keystore rotate`): restart the core with the new master key";

/// The store's outcomes in the callers' words. A refusal whose words depend on the request
/// (a taken name, a full quota) is worded where the request is known, before this.
impl From<walletops_store::StoreError> for WalletOpsError {
    fn from(err: walletops_store::StoreError) -> Self {
        use walletops_store::StoreError as E;
        match err {
            E::Database(db) => Self::Internal(anyhow::Error::new(db).context("database")),
            E::Corrupt(e) => Self::Internal(e.context("database")),
            E::NoSuchUser => Self::NotFound("no such user".to_owned()),
            E::NoSuchWebhook(id) => Self::NotFound(format!("webhook {id}")),
            E::UserNameTaken => Self::invalid("name", "a user of that name already exists"),
            E::ProviderUserTaken => Self::invalid(
                "providerUserId",
                "that provider user is linked to another user already",
            ),
            E::Full(max) => Self::Forbidden(format!("at most {max} may be held: remove one first")),
            E::LineFull(max) => Self::Forbidden(format!(
                "a key line may hold at most {max} active keys besides its first key; revoke one of the keys made from it first"
            )),
            E::MakerInactive => Self::Unauthorized("key revoked or expired"),
            E::NotInLine => Self::Forbidden(
                "an API key may revoke only itself and the keys made with it (and theirs); the dashboard and the CLI revoke any"
                    .to_owned(),
            ),
            E::RotatedAway => Self::ServiceUnavailable(ROTATED_AWAY.to_owned()),
            E::ReplayCapped { limit, retry_after } => Self::ReplaysCapped { limit, retry_after },
            E::NoKeystoreCheck => Self::invalid(
                "database",
                "it has no keystore check yet: start a core on it first",
            ),
            E::CheckDoesNotOpen => Self::invalid(
                "master_key",
                "the current master key does not open this database: rotate with the key it was sealed under",
            ),
        }
    }
}

/// What a chain or its node answered, as the contract's codes: the chain clients word it,
/// the core chooses the code.
impl From<walletops_chains::ChainError> for WalletOpsError {
    fn from(err: walletops_chains::ChainError) -> Self {
        use walletops_chains::ChainError as E;
        match err {
            E::Unknown(slug) => Self::ChainUnknown(slug),
            E::Node(message) => Self::ProviderRpcError(message),
            E::WouldFail(message) => Self::SendFailed(message),
            E::CannotPay(message) => Self::InsufficientFunds(message),
            E::Unavailable(message) => Self::ServiceUnavailable(message),
        }
    }
}

/// Quotes and swap builds the aggregator refused are the caller's QUOTE_FAILED (the spec's
/// answer for an unsupported token), and so are the aggregator's own failures, whose
/// message says retrying may help; an aggregator the operator has not configured is
/// SERVICE_UNAVAILABLE, naming the option.
impl From<walletops_chains::trade::TradeError> for WalletOpsError {
    fn from(err: walletops_chains::trade::TradeError) -> Self {
        use walletops_chains::trade::TradeError as E;
        match err {
            E::Unavailable { .. } => Self::ServiceUnavailable(err.to_string()),
            E::Rejected { .. } | E::Failed { .. } => Self::QuoteFailed(err.to_string()),
        }
    }
}

/// Result of a WalletOps operation.
pub type Result<T, E = WalletOpsError> = std::result::Result<T, E>;
