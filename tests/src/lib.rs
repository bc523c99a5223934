//! The WalletOps end-to-end harness: starts the real `walletops` binary on random loopback
//! ports over a fresh SQLite file or a fresh PostgreSQL database, and talks to it only over
//! real HTTP and real gRPC. Nothing of the service is mocked.

pub mod anvil;

pub use anvil::poll_until;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{Context, bail};
use reqwest::{Method, StatusCode, header::HeaderMap};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};
use tonic::{metadata::MetadataValue, transport::Channel};

pub mod fakes;
pub mod solana_node;

/// How long anything the tests wait for may take before the test fails saying what it
/// waited for.
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The admin token every test service is started with, through `WALLETOPS_ADMIN_TOKEN`. All
/// digits with leading zeros: a secret is taken as it is written, not read as a number.
pub const ADMIN_TOKEN: &str = "0042000000000000017";

/// Which database a test service runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in the service's data dir.
    Sqlite,
    /// A fresh database on the PostgreSQL server at `WALLETOPS_TEST_PG`
    /// (default `postgres://postgres@127.0.0.1:5432/test`).
    Postgres,
}

/// Runs each named `async fn(Backend) -> anyhow::Result<()>` as two tests, one per backend.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Err(e) = super::$name($crate::Backend::Sqlite).await {
                        panic!("{e:?}");
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Err(e) = super::$name($crate::Backend::Postgres).await {
                        panic!("{e:?}");
                    }
                }
            )*
        }
    };
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The `walletops` binary: `WALLETOPS_BIN`, else the one beside this test binary. The test
/// command builds it first (`cargo build --workspace --bins`).
pub fn walletops_bin() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("WALLETOPS_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    // A bin runs from target/<profile>/, a test from target/<profile>/deps/.
    let beside = exe.parent().context("locating the target directory")?;
    let candidates = [Some(beside), beside.parent()];
    candidates
        .into_iter()
        .flatten()
        .map(|dir| dir.join("walletops"))
        .find(|bin| bin.exists())
        .with_context(|| {
            format!(
                "no walletops binary beside {}: build it with `cargo build --workspace --bins` (scripts/test does)",
                exe.display()
            )
        })
}

/// The grpcurl the test command installs into `.venv`.
pub fn grpcurl_bin() -> anyhow::Result<PathBuf> {
    let bin = workspace_root().join(".venv/bin/grpcurl");
    if !bin.exists() {
        bail!("{} is missing: scripts/test installs it", bin.display());
    }
    Ok(bin)
}

/// Runs grpcurl with `args`; its standard output, when it succeeds.
pub async fn grpcurl<I, S>(args: I) -> anyhow::Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(grpcurl_bin()?).args(args).output().await?;
    anyhow::ensure!(
        out.status.success(),
        "grpcurl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Sends `signal` (`-TERM`, `-INT`) to `child`.
pub(crate) async fn signal(child: &Child, signal: &str) -> anyhow::Result<()> {
    let pid = child.id().context("the process has exited")?;
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .await?;
    anyhow::ensure!(status.success(), "kill {signal} {pid} failed");
    Ok(())
}

fn pg_admin_url() -> String {
    std::env::var("WALLETOPS_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A PostgreSQL database made for one test and dropped after it.
#[derive(Debug)]
struct PgDatabase {
    name: String,
    url: String,
}

impl PgDatabase {
    async fn create() -> anyhow::Result<Self> {
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

/// The `walletops serve` command of a test service: random loopback ports, the admin token,
/// and the given data dir and database.
fn serve_command(
    data_dir: &Path,
    database_url: Option<&str>,
    options: &Options,
) -> anyhow::Result<Command> {
    let mut cmd = Command::new(walletops_bin()?);
    cmd.arg("serve");
    if let Some(toml) = &options.config_toml {
        let path = data_dir.join("walletops.toml");
        std::fs::write(&path, toml)?;
        cmd.arg("--config").arg(path);
    }
    cmd.env("WALLETOPS_DATA_DIR", data_dir)
        .env("WALLETOPS_HTTP_ADDR", "127.0.0.1:0")
        .env("WALLETOPS_GRPC_ADDR", "127.0.0.1:0")
        .env("WALLETOPS_ADMIN_TOKEN", ADMIN_TOKEN)
        // WALLETOPS_TEST_LOG turns up the service's log for a test or benchmark run.
        .env(
            "RUST_LOG",
            std::env::var("WALLETOPS_TEST_LOG").unwrap_or_else(|_| "warn".to_owned()),
        )
        .env_remove("DATABASE_URL")
        .env_remove("WALLETOPS_DATABASE_URL")
        .envs(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if let Some(url) = &database_url {
        cmd.env("WALLETOPS_DATABASE_URL", url);
    }
    Ok(cmd)
}

/// A started process and the lines it printed until it was listening.
#[derive(Debug)]
pub struct Launched {
    /// The process, killed on drop.
    pub child: Child,
    /// Its standard output lines so far.
    pub lines: Vec<String>,
}

impl Launched {
    /// The rest of the first line that starts with `prefix`.
    pub fn value(&self, prefix: &str) -> Option<String> {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_owned())
    }

    /// The printed REST base URL.
    pub fn http(&self) -> anyhow::Result<String> {
        self.value("REST listening on ")
            .and_then(|v| v.split_whitespace().next().map(str::to_owned))
            .context("no REST address printed")
    }

    /// The printed gRPC address.
    pub fn grpc_addr(&self) -> anyhow::Result<String> {
        self.value("gRPC listening on ")
            .context("no gRPC address printed")
    }
}

/// Spawns `cmd` (stdout piped, killed on drop) and reads its output until a line starting
/// with each of `ready` has appeared; then keeps draining its output in the background.
pub async fn launch(mut cmd: Command, ready: &[&str]) -> anyhow::Result<Launched> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("starting walletops")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut reader = BufReader::new(stdout).lines();
    let mut lines = Vec::new();
    let read = async {
        while let Some(line) = reader.next_line().await? {
            lines.push(line);
            if ready.iter().all(|p| lines.iter().any(|l| l.starts_with(p))) {
                return Ok::<_, anyhow::Error>(());
            }
        }
        bail!("walletops exited before it was listening; it printed {lines:?}")
    };
    tokio::time::timeout(WAIT_TIMEOUT, read)
        .await
        .context("waiting for walletops to listen")??;
    // Keep draining stdout so the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = reader.next_line().await {} });
    Ok(Launched { child, lines })
}

/// A running `walletops serve`, killed when dropped.
#[derive(Debug)]
pub struct Service {
    child: Child,
    /// `http://127.0.0.1:<port>`, the REST edge.
    pub http: String,
    /// `127.0.0.1:<port>`, the gRPC core.
    pub grpc_addr: String,
    /// The first user's API key, printed at first start.
    pub api_key: String,
    data_dir: tempfile::TempDir,
    database_url: Option<String>,
    backend: Backend,
    options: Options,
    _pg: Option<PgDatabase>,
}

/// What a service is started with besides the defaults.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// A TOML config file's content.
    pub config_toml: Option<String>,
}

impl Service {
    /// The service's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Starts a service on `backend` with the embedded defaults.
    pub async fn start(backend: Backend) -> anyhow::Result<Self> {
        Self::start_with(backend, Options::default()).await
    }

    /// Starts a service on `backend` with `options`.
    pub async fn start_with(backend: Backend, options: Options) -> anyhow::Result<Self> {
        let data_dir = tempfile::tempdir()?;
        let pg = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(PgDatabase::create().await?),
        };
        let database_url = pg.as_ref().map(|p| p.url.clone());
        let cmd = serve_command(data_dir.path(), database_url.as_deref(), &options)?;
        let launched = launch(cmd, &["REST listening on ", "gRPC listening on "]).await?;
        let api_key = launched
            .value("API key: ")
            .context("no `API key: ` line printed at first start")?;
        Ok(Self {
            http: launched.http()?,
            grpc_addr: launched.grpc_addr()?,
            child: launched.child,
            api_key,
            data_dir,
            database_url,
            backend,
            options,
            _pg: pg,
        })
    }

    /// The backend the service runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The service's data directory.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// A REST client acting with `key`.
    pub fn rest(&self, key: &str) -> Rest {
        Rest {
            base: format!("{}/api/v1", self.http),
            key: Some(key.to_owned()),
            client: reqwest::Client::new(),
        }
    }

    /// A REST client with no key.
    pub fn anonymous(&self) -> Rest {
        Rest {
            base: format!("{}/api/v1", self.http),
            key: None,
            client: reqwest::Client::new(),
        }
    }

    /// A gRPC channel to the core.
    pub async fn channel(&self) -> anyhow::Result<Channel> {
        Ok(Channel::from_shared(format!("http://{}", self.grpc_addr))?
            .connect()
            .await?)
    }

    /// Runs `walletops <args>` against this service's data dir and database.
    pub async fn cli(&self, args: &[&str]) -> anyhow::Result<CliOutput> {
        self.cli_in(self.data_dir.path(), args).await
    }

    /// Runs `walletops <args>` against this service's database with `data_dir` as its data
    /// dir (the master key's place).
    pub async fn cli_in(&self, data_dir: &Path, args: &[&str]) -> anyhow::Result<CliOutput> {
        let mut cmd = Command::new(walletops_bin()?);
        cmd.args(args)
            .env("WALLETOPS_DATA_DIR", data_dir)
            // WALLETOPS_TEST_LOG turns up the service's log for a test or benchmark run.
            .env(
                "RUST_LOG",
                std::env::var("WALLETOPS_TEST_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .env_remove("DATABASE_URL")
            .env_remove("WALLETOPS_DATABASE_URL");
        let url = match &self.database_url {
            Some(url) => url.clone(),
            None => format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.path().join("walletops.db").display()
            ),
        };
        cmd.env("WALLETOPS_DATABASE_URL", url);
        let out = tokio::time::timeout(WAIT_TIMEOUT, cmd.output())
            .await
            .context("waiting for the walletops CLI")??;
        Ok(CliOutput {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// Creates a user with the CLI and returns its first API key.
    pub async fn create_user(&self, name: &str) -> anyhow::Result<String> {
        let out = self.cli(&["users", "create", name]).await?;
        if !out.success {
            bail!("users create {name} failed: {}", out.stderr);
        }
        out.api_key().context("users create printed no API key")
    }

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
        Ok(Database::connect(&url).await?)
    }

    /// How many transaction records the service has stored, whatever their state.
    pub async fn stored_transactions(&self) -> anyhow::Result<i64> {
        self.count_transactions("1 = 1").await
    }

    /// How many transaction records a core's monitor holds a lease on (a sent record its
    /// request still held would have no broadcast time yet).
    pub async fn leased_transactions(&self) -> anyhow::Result<i64> {
        self.count_transactions("lease_until IS NOT NULL AND last_broadcast_at IS NOT NULL")
            .await
    }

    /// How many stored transaction records meet `condition` (SQL).
    async fn count_transactions(&self, condition: &str) -> anyhow::Result<i64> {
        use sea_orm::{ConnectionTrait, Statement};
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
        use sea_orm::{ConnectionTrait, Statement};
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

    /// Stops the service and starts it again on the same data dir and database; returns
    /// whether the new start printed an API key (it must not: the database is not empty).
    pub async fn restart(&mut self) -> anyhow::Result<bool> {
        self.kill().await?;
        self.relaunch(self.options.clone()).await
    }

    /// Stops the service with SIGTERM, as an orderly shutdown does, and waits until it is
    /// gone.
    pub async fn terminate(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        self.signal_stop().await?;
        self.exited().await
    }

    /// Sends the service SIGTERM, as an orderly shutdown does, and returns at once.
    pub async fn signal_stop(&mut self) -> anyhow::Result<()> {
        signal(&self.child, "-TERM").await
    }

    /// Waits until the service (told to stop) is gone; its exit status.
    pub async fn exited(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        tokio::time::timeout(WAIT_TIMEOUT, self.child.wait())
            .await
            .context("the service did not stop on SIGTERM")?
            .map_err(Into::into)
    }

    /// Kills the service with SIGKILL, as a crash would, and waits until it is gone.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// Starts the (killed) service again on the same data dir and database with `options`;
    /// returns whether the start printed an API key.
    pub async fn relaunch(&mut self, options: Options) -> anyhow::Result<bool> {
        self.options = options;
        let cmd = serve_command(
            self.data_dir.path(),
            self.database_url.as_deref(),
            &self.options,
        )?;
        let launched = launch(cmd, &["REST listening on ", "gRPC listening on "]).await?;
        let printed_key = launched.value("API key: ").is_some();
        self.http = launched.http()?;
        self.grpc_addr = launched.grpc_addr()?;
        self.child = launched.child;
        Ok(printed_key)
    }

    /// Starts a second `walletops serve` over the same data dir and database (a second
    /// core and edge, as behind a load balancer).
    pub async fn sibling(&self) -> anyhow::Result<Launched> {
        self.sibling_with(&self.options).await
    }

    /// `sibling`, started with `options` instead of this service's.
    pub async fn sibling_with(&self, options: &Options) -> anyhow::Result<Launched> {
        let cmd = serve_command(self.data_dir.path(), self.database_url.as_deref(), options)?;
        launch(cmd, &["REST listening on ", "gRPC listening on "]).await
    }

    /// The environment a CLI run against this service's data needs.
    pub fn cli_env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            "WALLETOPS_DATA_DIR".to_owned(),
            self.data_dir.path().display().to_string(),
        )];
        if let Some(url) = &self.database_url {
            env.push(("WALLETOPS_DATABASE_URL".to_owned(), url.clone()));
        }
        env
    }

    /// Stops the service now.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// What a CLI run printed.
#[derive(Debug)]
pub struct CliOutput {
    /// Exit status was 0.
    pub success: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl CliOutput {
    /// The value of the `API key: ` line.
    pub fn api_key(&self) -> Option<String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix("API key: "))
            .map(|k| k.trim().to_owned())
    }
}

/// A REST client of the edge.
#[derive(Debug, Clone)]
pub struct Rest {
    base: String,
    key: Option<String>,
    client: reqwest::Client,
}

/// One REST answer.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as JSON (`Value::Null` when the body is not JSON).
    pub body: Value,
    /// Body as text.
    pub text: String,
}

impl Reply {
    /// The `x-request-id` header.
    pub fn request_id(&self) -> Option<&str> {
        self.headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
    }

    /// The contract error code of the body.
    pub fn code(&self) -> Option<&str> {
        self.body.get("code").and_then(Value::as_str)
    }

    /// Asserts an INVALID_INPUT answer (400 and the contract's error body) whose message
    /// names `field` as one at fault (`invalid input: a: …; field: …`).
    pub fn assert_invalid(&self, field: &str) -> anyhow::Result<()> {
        self.assert_error(400, "INVALID_INPUT")?;
        let message = self.body["error"].as_str().unwrap_or_default();
        let named = message
            .strip_prefix("invalid input: ")
            .is_some_and(|faults| {
                faults.starts_with(&format!("{field}: "))
                    || faults.contains(&format!("; {field}: "))
            });
        anyhow::ensure!(named, "expected {field} named: {message}");
        Ok(())
    }

    /// Asserts `assert_error`, and that the message begins with the field at fault.
    pub fn assert_error_on(&self, status: u16, code: &str, field: &str) -> anyhow::Result<()> {
        self.assert_error(status, code)?;
        let message = self.body["error"].as_str().unwrap_or_default();
        anyhow::ensure!(
            message.starts_with(&format!("{field}: ")),
            "expected the message to name {field}: {message}"
        );
        Ok(())
    }

    /// Asserts the contract's error shape: `status`, `code`, `{error, code, requestId}` with
    /// `requestId` equal to the `x-request-id` header, and nothing else in the body.
    pub fn assert_error(&self, status: u16, code: &str) -> anyhow::Result<()> {
        if self.status.as_u16() != status || self.code() != Some(code) {
            bail!(
                "expected {status} {code}, got {} {}",
                self.status,
                self.text
            );
        }
        let obj = self
            .body
            .as_object()
            .context("error body is not an object")?;
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        if keys != ["code", "error", "requestId"] {
            bail!("error body keys are {keys:?}");
        }
        let message = obj["error"].as_str().unwrap_or_default();
        if message.is_empty() {
            bail!("error message is empty");
        }
        let header = self.request_id().context("no x-request-id header")?;
        if obj["requestId"].as_str() != Some(header) {
            bail!(
                "requestId {} differs from header {header}",
                obj["requestId"]
            );
        }
        Ok(())
    }
}

impl Rest {
    /// A client of the edge at `http` (e.g. `http://127.0.0.1:8080`) acting with `key`.
    pub fn new(http: &str, key: &str) -> Rest {
        Rest {
            base: format!("{http}/api/v1"),
            key: Some(key.to_owned()),
            client: reqwest::Client::new(),
        }
    }

    /// The same client acting with another key.
    pub fn with_key(&self, key: &str) -> Rest {
        Rest {
            key: Some(key.to_owned()),
            ..self.clone()
        }
    }

    /// Sends a request; `path` is relative to `/api/v1`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> anyhow::Result<Reply> {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            req = req.header("x-api-key", key);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(body) = body {
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                req = req.header("content-type", "application/json");
            }
            req = req.body(body.to_owned());
        }
        let resp = req.send().await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.request(Method::GET, path, &[], None).await
    }

    /// POST `body` to `path` with a fresh `Idempotency-Key`.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Reply> {
        let key = uuid::Uuid::new_v4().to_string();
        self.request(
            Method::POST,
            path,
            &[("Idempotency-Key", &key)],
            Some(&body.to_string()),
        )
        .await
    }
}

/// Adds `x-api-key: key` to a gRPC request.
pub fn with_key<T>(message: T, key: &str) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("x-api-key", MetadataValue::try_from(key)?);
    Ok(req)
}

/// `message` as a gRPC request carrying the test services' admin token.
pub fn as_admin<T>(message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("x-admin-token", MetadataValue::try_from(ADMIN_TOKEN)?);
    Ok(req)
}

/// The contract code (`ErrorInfo.reason`) of a gRPC status, checking its domain.
pub fn reason(status: &tonic::Status) -> Option<String> {
    use tonic_types::StatusExt;
    let details = status.get_error_details();
    let info = details.error_info()?;
    (info.domain == walletops_proto::ERROR_DOMAIN).then(|| info.reason.clone())
}
