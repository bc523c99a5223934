//! Persistence over sea-orm: SQLite (default, a file in the data dir) or PostgreSQL, one set of
//! migrations for both, run at connect. Entities stay in here; callers get domain values.

mod api_keys;
pub(crate) mod entities;
mod evm_nonces;
mod idempotency;
pub(crate) mod transactions;
mod users;
mod wallets;

use std::time::Duration;

use anyhow::Context;
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};
use walletops_migrations::{Migrator, MigratorTrait};

pub use api_keys::NewApiKey;
pub(crate) use idempotency::{ClaimRow, NewClaim};
pub use wallets::{NewWallet, WalletFilter};

/// The database, migrated and ready.
#[derive(Debug, Clone)]
pub struct Store {
    db: DatabaseConnection,
}

impl Store {
    /// Connects to `url`, creating a SQLite file (and its directory) if needed, and runs
    /// every pending migration.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        if let Some(path) = url.strip_prefix("sqlite://") {
            let file = path.split('?').next().unwrap_or(path);
            if let Some(dir) = std::path::Path::new(file).parent()
                && !dir.as_os_str().is_empty()
            {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
        }
        let mut options = ConnectOptions::new(url.to_owned());
        options
            .max_connections(16)
            .connect_timeout(Duration::from_secs(10))
            .acquire_timeout(Duration::from_secs(30))
            .sqlx_logging(false)
            // On every SQLite connection: WAL lets readers run beside the one writer (and the
            // CLI beside a running server); the busy timeout makes a writer wait for the lock.
            .map_sqlx_sqlite_opts(|o| {
                o.journal_mode(sea_orm::sqlx::sqlite::SqliteJournalMode::Wal)
                    .busy_timeout(Duration::from_secs(30))
            });
        let db = Database::connect(options)
            .await
            .with_context(|| format!("connecting to the database at {}", redact(url)))?;
        Migrator::up(&db, None)
            .await
            .context("running migrations")?;
        Ok(Self { db })
    }

    pub(crate) fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Begins a database transaction that will write. On SQLite it takes the write lock at
    /// BEGIN (IMMEDIATE): a deferred transaction that reads first and writes later cannot wait
    /// for the lock (SQLite answers "database is locked" at once to avoid a deadlock).
    pub(crate) async fn begin(&self) -> Result<sea_orm::DatabaseTransaction, DbErr> {
        use sea_orm::{SqliteTransactionMode, TransactionOptions, TransactionTrait};
        self.db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..TransactionOptions::default()
            })
            .await
    }

    /// Whether the database answers, for health checks.
    pub async fn ping(&self) -> Result<(), DbErr> {
        self.db.ping().await
    }
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or_default();
            format!("{}{}@{}", &url[..scheme + 3], user, &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Whether `err` is a unique-constraint violation (a lost race for a unique row).
pub(crate) fn is_unique_violation(err: &DbErr) -> bool {
    matches!(
        err.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u@h:5432/db"
        );
        assert_eq!(super::redact("sqlite://x.db"), "sqlite://x.db");
    }
}
