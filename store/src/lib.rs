//! Persistence over sea-orm: SQLite (default, a file in the data dir) or PostgreSQL, one set of
//! migrations for both, run at connect. Entities stay in here; callers get domain values and
//! pass along a `Txn` (or the store itself) where a statement runs, never naming sea-orm.
//!
//! The store takes numbers and locks and says what happened (`StoreError`): it counts no
//! metric, decides no policy (the service passes its maxima and windows in) and words
//! nothing for a caller.

mod api_keys;
mod approvals;
mod conn;
mod deposits;
#[cfg(test)]
mod deposits_tests;
mod entities;
mod error;
mod events;
mod evm_nonces;
mod frozen;
mod guards;
mod idempotency;
mod key_cache;
mod key_policies;
mod lease;
mod leases;
mod lineage;
#[cfg(test)]
mod owner_lock_tests;
mod payouts;
mod provider_links;
mod quotes;
mod records;
mod rotation;
mod sessions;
mod spend;
mod transactions;
mod users;
mod wallets;
mod webhook_sending;
#[cfg(test)]
mod webhook_standing_tests;
mod webhooks;

use std::time::Duration;

use anyhow::Context;
use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbErr};
use walletops_migrations::{Migrator, MigratorTrait};

pub use api_keys::NewApiKey;
pub use approvals::{EXPIRY, LeasedApproval};
pub use conn::{Conn, Txn};
pub use deposits::{DepositFilter, ScanStep};
pub use error::{Result, StoreError};
pub use events::{DepositEvent, TransactionEvent};
pub use guards::WalletGuard;
pub use idempotency::{ClaimRow, NewClaim};
pub use key_cache::LISTENER_NAME;
pub use leases::Leased;
pub use leases::REQUEST_HOLD;
pub use payouts::{ItemTransaction, PayoutFilter, PayoutStored};
pub use quotes::QuoteRecord;
pub use sessions::NewSession;
pub use transactions::NewTransaction;
pub use webhook_sending::{AttemptNoted, FailedAttempt};
pub use webhooks::{NewEndpoint, ReplayCap};

/// Log targets of the database library that are quiet unless asked for: the migrator's
/// per-migration lines and every statement's.
pub const QUIET_LOG_TARGETS: &str = "sea_orm_migration=warn,sqlx=warn";

/// The database, migrated and ready.
#[derive(Debug, Clone)]
pub struct Store {
    db: DatabaseConnection,
    /// Keys held for reads (`find_api_key_for_read`).
    keys: std::sync::Arc<key_cache::KeyCache>,
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
                walletops_domain::files::create_private_dir(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            // Made here, not by SQLite, so that it is this user's alone (its journal files
            // take its mode): only where SQLite would make it (`mode=rwc`), and for a plain
            // path (SQLite decodes `%` escapes).
            let in_file = url.contains("mode=rwc")
                && !file.is_empty()
                && file != ":memory:"
                && !file.contains('%');
            if in_file {
                match walletops_domain::files::create_private_file(std::path::Path::new(file)) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e).with_context(|| format!("creating {file}")),
                }
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
            // Temporary tables and statement journals stay in memory: on disk, SQLite made
            // and deleted a file for them about 28 times a second under the send benchmark.
            // The database file is read through a memory map: each commit resets the page
            // cache of the pool's other connections, which then read the pages again, by a
            // copying `pread` each without it (preads fell from 10,000 to 5,700 a second).
            // Each connection keeps its prepared statements; the default 100 was evicted by
            // the statements whose text varies (an IN list's length), and SQLite prepared
            // again what a send runs every time.
            .map_sqlx_postgres_opts(|o| o.statement_cache_capacity(STATEMENTS_KEPT))
            .map_sqlx_sqlite_opts(|o| {
                o.statement_cache_capacity(STATEMENTS_KEPT)
                    .journal_mode(sea_orm::sqlx::sqlite::SqliteJournalMode::Wal)
                    .busy_timeout(Duration::from_secs(30))
                    .pragma("temp_store", "memory")
                    .pragma("mmap_size", "268435456")
            })
            .map_sqlx_sqlite_pool_opts(|o| {
                o.after_connect(|conn, _| Box::pin(stable_query_plans(conn)))
            });
        let db = Database::connect(options)
            .await
            .with_context(|| format!("connecting to the database at {}", redact(url)))?;
        Migrator::up(&db, None)
            .await
            .context("running migrations")?;
        Ok(Self {
            db,
            keys: std::sync::Arc::default(),
        })
    }

    /// The pool, for a store call that runs outside a caller's transaction.
    pub fn db(&self) -> &impl Conn {
        &self.db
    }

    /// The pool, for the store's own statements.
    pub(crate) fn sea(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Begins a database transaction that will write, for a caller that runs several store
    /// calls in it (`Txn::commit` ends it).
    pub async fn begin(&self) -> Result<Txn> {
        Ok(Txn(self.begin_sea().await?))
    }

    /// Begins a database transaction that will write. On SQLite it takes the write lock at
    /// BEGIN (IMMEDIATE): a deferred transaction that reads first and writes later cannot wait
    /// for the lock (SQLite answers "database is locked" at once to avoid a deadlock).
    pub(crate) async fn begin_sea(&self) -> Result<sea_orm::DatabaseTransaction, DbErr> {
        use sea_orm::{SqliteTransactionMode, TransactionOptions, TransactionTrait};
        self.db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..TransactionOptions::default()
            })
            .await
    }

    /// Whether the database answers, for health checks.
    pub async fn ping(&self) -> Result<()> {
        Ok(self.db.ping().await?)
    }

    /// Whether this core can serve: the database answers and holds every migration this
    /// build knows (a newer core may not have migrated it yet); why not, when not.
    pub async fn readiness(&self) -> Result<(), String> {
        self.db
            .ping()
            .await
            .map_err(|e| format!("the database does not answer: {e}"))?;
        let pending = Migrator::get_pending_migrations(&self.db)
            .await
            .map_err(|e| format!("reading the applied migrations failed: {e}"))?;
        match pending.len() {
            0 => Ok(()),
            n => Err(format!("{n} migrations are not applied yet")),
        }
    }

    /// Copies a SQLite database to the new file `file` (this user's alone) while cores write
    /// to it: `VACUUM INTO` reads one consistent snapshot. On PostgreSQL, `pg_dump` does
    /// that, and this says so.
    pub async fn backup_to(&self, file: &std::path::Path) -> anyhow::Result<()> {
        use sea_orm::ConnectionTrait;
        anyhow::ensure!(
            self.db.get_database_backend() == sea_orm::DatabaseBackend::Sqlite,
            "the database is PostgreSQL: back it up with pg_dump, which reads one consistent \
             snapshot while cores write: pg_dump --format=custom --file {} \"$DATABASE_URL\"",
            file.display()
        );
        // Made empty first, with this user's mode: VACUUM INTO fills an empty file.
        walletops_domain::files::create_private_file(file)
            .with_context(|| format!("creating {} (it must not exist)", file.display()))?;
        let path = file.to_str().context("the backup path is not UTF-8")?;
        self.db
            .execute_unprepared(&format!("VACUUM INTO '{}'", path.replace('\'', "''")))
            .await
            .with_context(|| format!("copying the database into {}", file.display()))?;
        Ok(())
    }
}

/// Turns on SQLite's query planner stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`) on a
/// new connection.
///
/// Without it, a statement whose plan could depend on a bound value (every `LIMIT ?` that
/// sea-orm writes for a one-row lookup, and any comparison with a partial index's column) is
/// compiled again on each execution with new values: a tenth of the service's CPU per send
/// went to parsing the same SQL again. Our queries have one right plan whatever the values.
async fn stable_query_plans(
    conn: &mut sea_orm::sqlx::sqlite::SqliteConnection,
) -> Result<(), sea_orm::sqlx::Error> {
    query_plans_stable(conn, 1).await.map(drop)
}

/// Sets connection `conn`'s query planner stability guarantee to `on` (1 on, 0 off, -1 left
/// as it is); returns whether it is on afterwards.
async fn query_plans_stable(
    conn: &mut sea_orm::sqlx::sqlite::SqliteConnection,
    on: std::ffi::c_int,
) -> Result<bool, sea_orm::sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let mut now: std::ffi::c_int = -1;
    // SAFETY: the handle is a live connection held locked for this call, and the option takes
    // an int and a pointer to an int that receives the setting after the call.
    let rc = unsafe {
        libsqlite3_sys::sqlite3_db_config(
            handle.as_raw_handle().as_ptr(),
            libsqlite3_sys::SQLITE_DBCONFIG_ENABLE_QPSG,
            on,
            &mut now as *mut std::ffi::c_int,
        )
    };
    if rc == libsqlite3_sys::SQLITE_OK {
        Ok(now == 1)
    } else {
        Err(sea_orm::sqlx::Error::Configuration(
            format!("setting SQLite's query planner stability guarantee: error {rc}").into(),
        ))
    }
}

/// The URL without its password (in the user part or as a `password` parameter), for
/// messages.
fn redact(url: &str) -> String {
    // The user part first, over the whole text: a password may hold a `?` of its own.
    let url = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            let user = creds.split(':').next().unwrap_or_default();
            format!("{}{}@{}", &url[..scheme + 3], user, &url[at + 1..])
        }
        _ => url.to_owned(),
    };
    let Some((base, query)) = url.split_once('?') else {
        return url;
    };
    let params: Vec<&str> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if name.eq_ignore_ascii_case("password") => "password=***",
            _ => pair,
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// Prepared statements each connection keeps.
const STATEMENTS_KEPT: usize = 512;

/// The most rows one multi-row INSERT takes (64 rows of the widest table stay far under
/// SQLite's 32,766 parameters).
const MOST_ROWS: usize = 64;

/// `rows` cut into runs whose lengths are powers of two, longest first (13 rows: 8, 4, 1),
/// none longer than `MOST_ROWS`. A multi-row INSERT's text depends on its row count: one per
/// batch size, the connections' statement caches missed and SQLite prepared (PostgreSQL
/// parsed and planned) almost one statement per send. In runs like these, a table has seven
/// statement shapes, each prepared once per connection.
pub fn in_cached_shapes<T>(rows: Vec<T>) -> Vec<Vec<T>> {
    let mut runs = Vec::new();
    let mut rows = rows.into_iter();
    let mut left = rows.len();
    while left > 0 {
        let run = if left >= MOST_ROWS {
            MOST_ROWS
        } else {
            1 << left.ilog2()
        };
        runs.push(rows.by_ref().take(run).collect());
        left -= run;
    }
    runs
}

/// Whether `err` is a unique-constraint violation (a lost race for a unique row).
pub fn is_unique_violation(err: &DbErr) -> bool {
    matches!(
        err.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    )
}

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests {
    use crate::testing::temp_sqlite;

    #[test]
    fn rows_go_in_runs_of_powers_of_two() {
        let lengths = |n: usize| -> Vec<usize> {
            super::in_cached_shapes((0..n).collect())
                .iter()
                .map(Vec::len)
                .collect()
        };
        assert!(lengths(0).is_empty());
        assert_eq!(lengths(1), [1]);
        assert_eq!(lengths(13), [8, 4, 1]);
        assert_eq!(lengths(64), [64]);
        assert_eq!(lengths(200), [64, 64, 64, 8]);
        let rows: Vec<usize> = super::in_cached_shapes((0..200).collect()).concat();
        assert_eq!(
            rows,
            (0..200).collect::<Vec<_>>(),
            "every row once, in order"
        );
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u@h:5432/db"
        );
        assert_eq!(super::redact("sqlite://x.db"), "sqlite://x.db");
        assert_eq!(
            super::redact("postgres://h/db?user=u&password=secret&sslmode=require"),
            "postgres://h/db?user=u&password=***&sslmode=require"
        );
        assert_eq!(
            super::redact("sqlite:///tmp/a@b.db?mode=rwc"),
            "sqlite:///tmp/a@b.db?mode=rwc"
        );
        assert_eq!(
            super::redact("postgres://u:p?ss@h/db?password=x"),
            "postgres://u@h/db?password=***"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_new_data_dir_and_database_are_this_users_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let url = format!("sqlite://{}?mode=rwc", data.join("w.db").display());
        let _store = super::Store::connect(&url).await.expect("connecting");
        let mode = |p: &std::path::Path| {
            std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
        };
        assert_eq!(mode(&data), 0o700);
        for file in ["w.db", "w.db-wal"] {
            assert_eq!(mode(&data.join(file)), 0o600, "{file}");
        }
    }

    #[tokio::test]
    async fn every_sqlite_connection_keeps_its_query_plans() {
        let (_dir, store) = temp_sqlite().await;
        let pool = store.sea().get_sqlite_connection_pool();
        // Several at once, so that the pool opens connections beyond the migrations' one.
        let mut conns = Vec::new();
        for _ in 0..3 {
            conns.push(pool.acquire().await.expect("a connection"));
        }
        for conn in &mut conns {
            assert!(
                super::query_plans_stable(conn, -1)
                    .await
                    .expect("reading the option")
            );
        }
    }
}
