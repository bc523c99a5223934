//! What the store says happened: a typed outcome for each refusal a caller words (a missing
//! row, a taken name, a full quota, a keystore that moved), and the database's own failures.
//! The service above turns these into its errors and its callers' words.

/// A failure of a store call.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed or refused a statement.
    #[error("database: {0}")]
    Database(#[from] sea_orm::DbErr),
    /// A stored value that cannot be read, or a row that vanished under a lock.
    #[error("{0}")]
    Corrupt(anyhow::Error),
    /// No user has that id.
    #[error("no such user")]
    NoSuchUser,
    /// The user has no webhook endpoint with that id.
    #[error("no such webhook {0}")]
    NoSuchWebhook(uuid::Uuid),
    /// A user with that name exists already.
    #[error("the user name is taken")]
    UserNameTaken,
    /// The wallet provider's user is linked to another user already.
    #[error("the provider user is linked to another user")]
    ProviderUserTaken,
    /// The owner already holds the most rows of this kind the caller allows.
    #[error("at most {0} may be held")]
    Full(u64),
    /// The line of the key that makes a new key holds the most active keys besides its
    /// first that the caller allows.
    #[error("a key line may hold at most {0} active keys besides its first")]
    LineFull(u64),
    /// The key that makes a new key was revoked or expired meanwhile.
    #[error("the making key is revoked or expired")]
    MakerInactive,
    /// A key may revoke only itself and the keys made from it.
    #[error("the key is not of the revoking key's line")]
    NotInLine,
    /// The database's master key was rotated away from this core's: what it seals now would
    /// never be re-sealed.
    #[error("rotated away")]
    RotatedAway,
    /// The database has no keystore check yet (no core has started on it).
    #[error("no keystore check")]
    NoKeystoreCheck,
    /// The user's webhook replays of the last hour would pass the cap the caller gave.
    #[error("at most {limit} webhook replays an hour")]
    ReplayCapped {
        /// The cap.
        limit: u64,
        /// When enough replays are an hour old for the call to pass.
        retry_after: std::time::Duration,
    },
    /// The keystore check does not open under the key the caller holds.
    #[error("the keystore check does not open")]
    CheckDoesNotOpen,
}

impl StoreError {
    /// A stored value or row that is not what the store wrote.
    pub fn corrupt(what: impl std::fmt::Display) -> Self {
        Self::Corrupt(anyhow::anyhow!("{what}"))
    }
}

/// Result of a store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
