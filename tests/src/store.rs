//! What a test service stored, read straight from its database: states no API shows, or
//! arranged faster than any API could (a key past its expiry, say).

use anyhow::Context;
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};

use crate::{Backend, Service, wait::poll_until};

/// The SQL condition of a transaction record the monitor has not taken to a final state.
pub const OPEN_RECORDS: &str = "status IN ('submitted', 'fee_capped')";

impl Service {
    /// A direct connection to the service's database, to arrange states no API can reach
    /// quickly (a key past its expiry, say).
    pub async fn database(&self) -> anyhow::Result<DatabaseConnection> {
        let url = match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite://{}",
                self.data_dir.path().join("walletops.db").display()
            ),
        };
        // No idle reaping or lifetime limit: sqlx's pool maintenance task, which only these
        // enforce, was once seen spinning on a core after its service was killed, holding a
        // test for good. A test's connections live as long as the test.
        let mut options = sea_orm::ConnectOptions::new(url);
        options
            .sqlx_logging(false)
            .map_sqlx_sqlite_pool_opts(|o| o.idle_timeout(None).max_lifetime(None))
            .map_sqlx_postgres_pool_opts(|o| o.idle_timeout(None).max_lifetime(None));
        Ok(Database::connect(options).await?)
    }

    /// Moves the key of `prefix` past its expiry, as an operator's SQL would.
    pub async fn expire_key(&self, prefix: &str) -> anyhow::Result<()> {
        self.database()
            .await?
            .execute_unprepared(&format!(
                "UPDATE api_keys SET expires_at = '2020-01-01T00:00:00Z' WHERE prefix = '{prefix}'"
            ))
            .await?;
        Ok(())
    }

    /// How many transaction records the service has stored, whatever their state.
    pub async fn stored_transactions(&self) -> anyhow::Result<i64> {
        self.count_transactions("1 = 1").await
    }

    /// Waits until the service has stored at least `n` transaction records.
    pub async fn wait_for_stored_transactions(&self, n: i64) -> anyhow::Result<()> {
        poll_until(
            &format!("{n} transaction record(s) to be stored"),
            || async { Ok((self.stored_transactions().await? >= n).then_some(())) },
        )
        .await
    }

    /// How many transaction records a core's monitor holds a lease on (a sent record its
    /// request still held would have no broadcast time yet).
    pub async fn leased_transactions(&self) -> anyhow::Result<i64> {
        self.count_transactions("lease_until IS NOT NULL AND last_broadcast_at IS NOT NULL")
            .await
    }

    /// How many stored transaction records are not final yet (`OPEN_RECORDS`).
    pub async fn open_transactions(&self) -> anyhow::Result<i64> {
        self.count_transactions(OPEN_RECORDS).await
    }

    /// How many stored transaction records have status `status` (`confirmed`, ...).
    pub async fn transactions_with_status(&self, status: &str) -> anyhow::Result<i64> {
        anyhow::ensure!(status.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        self.count_transactions(&format!("status = '{status}'"))
            .await
    }

    /// How many stored transaction records meet `condition` (SQL).
    async fn count_transactions(&self, condition: &str) -> anyhow::Result<i64> {
        let db = self.database().await?;
        let row = db
            .query_one_raw(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT COUNT(*) AS n FROM transactions WHERE {condition}"),
            ))
            .await?
            .context("no count")?;
        Ok(row.try_get::<i64>("", "n")?)
    }

    /// The stored statuses (`submitted`, `dropped`, ...) of the transactions of `kind`
    /// (`send`, `nonce_fill`, ...), which the REST surface does not list.
    pub async fn stored_statuses(&self, kind: &str) -> anyhow::Result<Vec<String>> {
        self.stored_texts(kind, "status").await
    }

    /// Waits until the stored statuses of the transactions of `kind` are `statuses`.
    pub async fn wait_for_stored_statuses(
        &self,
        kind: &str,
        statuses: &[&str],
    ) -> anyhow::Result<()> {
        poll_until(
            &format!("the stored {kind} transactions to be {statuses:?}"),
            || async { Ok((self.stored_statuses(kind).await? == statuses).then_some(())) },
        )
        .await
    }

    /// Waits until a core's monitor holds a lease on `n` transaction records.
    pub async fn wait_for_leases(&self, n: i64) -> anyhow::Result<()> {
        poll_until(
            &format!("the core's monitor to lease {n} record(s)"),
            || async { Ok((self.leased_transactions().await? == n).then_some(())) },
        )
        .await
    }

    /// The stored status histories (JSON text) of the transactions of `kind`.
    pub async fn stored_histories(&self, kind: &str) -> anyhow::Result<Vec<String>> {
        self.stored_texts(kind, "CAST(status_history AS TEXT)")
            .await
    }

    /// The lease owner of each stored send (empty: none), as text in the backend's own
    /// spelling: only to compare with each other.
    pub async fn send_lease_owners(&self) -> anyhow::Result<Vec<String>> {
        let owner = match self.backend {
            Backend::Sqlite => "COALESCE(hex(lease_owner), '')",
            Backend::Postgres => "COALESCE(CAST(lease_owner AS TEXT), '')",
        };
        self.stored_texts("send", owner).await
    }

    /// `column` (an SQL expression) of the stored transactions of `kind`, as text.
    async fn stored_texts(&self, kind: &str, column: &str) -> anyhow::Result<Vec<String>> {
        anyhow::ensure!(kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        let db = self.database().await?;
        let rows = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT {column} AS v FROM transactions WHERE kind = '{kind}'"),
            ))
            .await?;
        rows.iter()
            .map(|row| Ok(row.try_get::<String>("", "v")?))
            .collect()
    }
}
