//! The databases a test service runs on: a SQLite file of its own, or a PostgreSQL database
//! made for one test and dropped after it; and the Redis the shared rate limits use.

use anyhow::Context;
use sea_orm::{ConnectionTrait, Database};

use crate::Backend;

fn pg_admin_url() -> String {
    std::env::var("WALLETOPS_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// The Redis the shared rate-limit tests use: `WALLETOPS_TEST_REDIS`, default the local
/// server.
pub fn redis_url() -> String {
    std::env::var("WALLETOPS_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// A PostgreSQL database made for one test and dropped after it.
#[derive(Debug)]
pub(crate) struct PgDatabase {
    name: String,
    pub(crate) url: String,
}

impl PgDatabase {
    pub(crate) async fn create() -> anyhow::Result<Self> {
        let admin = pg_admin_url();
        let conn = Database::connect(&admin).await.with_context(|| {
            format!("PostgreSQL is required for the store tests and is unreachable at {admin}")
        })?;
        let name = format!("walletops_t_{}", uuid::Uuid::new_v4().simple());
        conn.execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await?;
        let base = admin
            .rsplit_once('/')
            .map(|(b, _)| b.to_owned())
            .unwrap_or(admin.clone());
        Ok(Self {
            url: format!("{base}/{name}"),
            name,
        })
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs outside any runtime we may block, so the cleanup gets its own.
        let _ = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(async {
                    if let Ok(conn) = Database::connect(&pg_admin_url()).await {
                        let _ = conn
                            .execute_unprepared(&format!(
                                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                            ))
                            .await;
                    }
                });
            }
        })
        .join();
    }
}

/// A new, empty database on a backend, for a test that runs its own commands against it: a
/// SQLite file in a directory of its own, or a PostgreSQL database dropped with it.
#[derive(Debug)]
pub struct TestDatabase {
    /// Its URL, for `WALLETOPS_DATABASE_URL`.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    _pg: Option<PgDatabase>,
}

impl TestDatabase {
    /// A new database on `backend`.
    pub async fn new(backend: Backend) -> anyhow::Result<Self> {
        Ok(match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir()?;
                Self {
                    url: format!(
                        "sqlite://{}?mode=rwc",
                        dir.path().join("walletops.db").display()
                    ),
                    _dir: Some(dir),
                    _pg: None,
                }
            }
            Backend::Postgres => {
                let pg = PgDatabase::create().await?;
                Self {
                    url: pg.url.clone(),
                    _dir: None,
                    _pg: Some(pg),
                }
            }
        })
    }
}
