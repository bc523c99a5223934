//! A running `walletops serve` on random loopback ports, and the processes the tests start
//! from the binary: started, stopped as an operator or a crash would, restarted on the same
//! data, and joined by a second core over the same database.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use anyhow::{Context, bail};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};
use tonic::transport::Channel;

use crate::{ADMIN_TOKEN, Backend, Rest, database::PgDatabase, paths::walletops_bin, wait::within};

/// What a service is started with besides the defaults.
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// A TOML config file's content.
    pub config_toml: Option<String>,
    /// Where the service's log (its standard error) goes; none: the test's own.
    pub log_file: Option<PathBuf>,
}

impl Options {
    /// The defaults, with the config file `toml`.
    pub fn with_config(toml: impl Into<String>) -> Self {
        Self {
            config_toml: Some(toml.into()),
            ..Self::default()
        }
    }

    /// These options, the service logging to `file` (appended).
    pub fn logging_to(mut self, file: &Path) -> Self {
        self.log_file = Some(file.to_owned());
        self
    }

    /// These options, with the environment variable `key` set to `value` besides.
    pub fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }
}

/// The log filter of a service or CLI run: `WALLETOPS_TEST_LOG` turns it up for a test or
/// benchmark run.
pub(crate) fn log_filter() -> String {
    std::env::var("WALLETOPS_TEST_LOG").unwrap_or_else(|_| "warn".to_owned())
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
        .env("WALLETOPS_ADMIN_ADDR", "127.0.0.1:0")
        // The tests' webhook receivers listen on loopback.
        .env("WALLETOPS_WEBHOOKS__ALLOW_PRIVATE_TARGETS", "true")
        .env("RUST_LOG", log_filter())
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

/// The lines a started `walletops serve` prints once both its surfaces listen.
const SERVING: [&str; 2] = ["REST listening on ", "gRPC listening on "];

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

    /// The printed admin listener's address, when it has one.
    pub fn admin_addr(&self) -> Option<String> {
        self.value("Admin listening on ")
            .and_then(|v| v.split_whitespace().next().map(str::to_owned))
    }

    /// The printed metrics listener's base URL, when it has one.
    pub fn metrics_url(&self) -> Option<String> {
        self.value("Metrics listening on ")
            .and_then(|v| v.split_whitespace().next().map(str::to_owned))
    }

    /// The printed gRPC address.
    pub fn grpc_addr(&self) -> anyhow::Result<String> {
        self.value("gRPC listening on ")
            .and_then(|v| v.split_whitespace().next().map(str::to_owned))
            .context("no gRPC address printed")
    }
}

/// Spawns `cmd` (stdout piped, killed on drop) and reads its output until a line starting
/// with each of `ready` has appeared; then keeps draining its output in the background.
pub async fn launch(cmd: Command, ready: &[&str]) -> anyhow::Result<Launched> {
    launch_logging_to(cmd, ready, Stdio::inherit()).await
}

/// `launch`, the process's log (its standard error) going to `log`.
pub async fn launch_logging_to(
    mut cmd: Command,
    ready: &[&str],
    log: Stdio,
) -> anyhow::Result<Launched> {
    cmd.stdout(Stdio::piped()).stderr(log).kill_on_drop(true);
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
    within("walletops to listen", read).await??;
    // Keep draining stdout so the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = reader.next_line().await {} });
    Ok(Launched { child, lines })
}

/// Where a service started with `options` logs.
fn log_sink(options: &Options) -> anyhow::Result<Stdio> {
    Ok(match &options.log_file {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?
            .into(),
        None => Stdio::inherit(),
    })
}

/// The first API key a first start wrote into `data_dir` (it prints it only with
/// `--print-key`).
pub fn first_api_key(data_dir: &Path) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(data_dir.join("first-api-key"))
        .context("no first-api-key file written at first start")?
        .trim()
        .to_owned())
}

/// A running `walletops serve`, killed when dropped.
#[derive(Debug)]
pub struct Service {
    child: Child,
    /// `http://127.0.0.1:<port>`, the REST edge.
    pub http: String,
    /// `127.0.0.1:<port>`, the gRPC core.
    pub grpc_addr: String,
    /// `127.0.0.1:<port>`, the admin listener (`AdminService`).
    pub admin_addr: Option<String>,
    /// `http://127.0.0.1:<port>`, the metrics listener, when `metrics_addr` is set.
    pub metrics_url: Option<String>,
    /// The first user's API key, printed at first start.
    pub api_key: String,
    /// The one-time dashboard sign-in link printed at first start.
    pub sign_in_link: String,
    pub(crate) data_dir: tempfile::TempDir,
    pub(crate) database_url: Option<String>,
    pub(crate) backend: Backend,
    options: Options,
    _pg: Option<PgDatabase>,
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
        let launched = launch_logging_to(cmd, &SERVING, log_sink(&options)?).await?;
        let api_key = first_api_key(data_dir.path())?;
        let sign_in_link = launched
            .lines
            .iter()
            .flat_map(|l| l.split_whitespace())
            .find(|word| word.contains("/dashboard/sign-in-link?token="))
            .map(str::to_owned)
            .context("no sign-in link printed at first start")?;
        Ok(Self {
            http: launched.http()?,
            grpc_addr: launched.grpc_addr()?,
            admin_addr: launched.admin_addr(),
            metrics_url: launched.metrics_url(),
            child: launched.child,
            api_key,
            sign_in_link,
            data_dir,
            database_url,
            backend,
            options,
            _pg: pg,
        })
    }

    /// The service's PostgreSQL URL; `None` on SQLite.
    pub fn database_url(&self) -> Option<&str> {
        self.database_url.as_deref()
    }

    /// The backend the service runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// What the service was (last) started with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The service's data directory.
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// A REST client acting with `key`.
    pub fn rest(&self, key: &str) -> Rest {
        Rest::new(&self.http, key)
    }

    /// A REST client with no key.
    pub fn anonymous(&self) -> Rest {
        Rest::anonymous(&self.http)
    }

    /// A gRPC channel to the core.
    pub async fn channel(&self) -> anyhow::Result<Channel> {
        Ok(Channel::from_shared(format!("http://{}", self.grpc_addr))?
            .connect()
            .await?)
    }

    /// A connected channel to the admin listener.
    pub async fn admin_channel(&self) -> anyhow::Result<Channel> {
        let addr = self.admin_addr.as_deref().context("no admin listener")?;
        Ok(Channel::from_shared(format!("http://{addr}"))?
            .connect()
            .await?)
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
        within("the service to stop on SIGTERM", self.child.wait())
            .await?
            .map_err(Into::into)
    }

    /// Kills the service with SIGKILL, as a crash would, and waits until it is gone.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// Starts the (killed) service again on the same data dir and database with `options`;
    /// returns whether the start was a first start (it made a user and an API key).
    pub async fn relaunch(&mut self, options: Options) -> anyhow::Result<bool> {
        self.options = options;
        let cmd = serve_command(
            self.data_dir.path(),
            self.database_url.as_deref(),
            &self.options,
        )?;
        let launched = launch_logging_to(cmd, &SERVING, log_sink(&self.options)?).await?;
        let printed_key = launched.lines.iter().any(|l| l.starts_with("First start:"));
        self.http = launched.http()?;
        self.grpc_addr = launched.grpc_addr()?;
        self.admin_addr = launched.admin_addr();
        self.metrics_url = launched.metrics_url();
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
        launch(cmd, &SERVING).await
    }

    /// `sibling`, reaching the database at `database_url` (the same database through a
    /// proxy, say).
    pub async fn sibling_over(&self, database_url: &str) -> anyhow::Result<Launched> {
        let cmd = serve_command(self.data_dir.path(), Some(database_url), &self.options)?;
        launch(cmd, &SERVING).await
    }

    /// Stops the service now.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}
