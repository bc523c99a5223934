//! Configuration: one typed `Config`, read from an optional TOML file and then from
//! `WALLETOPS_*` environment variables (nested keys with `__`, e.g.
//! `WALLETOPS_RATE_LIMITS__WRITES_PER_MINUTE`), with a default for every option so that
//! `walletops serve` runs with no file at all. Command-line flags override both.

use std::{collections::BTreeMap, net::SocketAddr, path::PathBuf, time::Duration};

use figment::{
    Figment,
    providers::{Env, Format, Serialized, Toml},
};
use serde::{Deserialize, Serialize};

pub use crate::ratelimit::RateLimits;
pub use walletops_domain::secret::Secret;

use crate::{approvals::ApprovalsConfig, webhooks::WebhooksConfig};

use walletops_chains::{ChainConfig, provider::ProviderConfig, trade::TradeConfig};
use walletops_domain::Scopes;

/// `WALLETOPS_*` variables that are not options: the config file's path, the dev tools'
/// locations, and the test harness's own (`WALLETOPS_TEST_*`, `WALLETOPS_BIN`).
const NOT_OPTIONS: [&str; 4] = ["config", "anvil_bin", "solana_node_bin", "bin"];

/// Everything WalletOps can be told.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the REST edge listens.
    pub http_addr: SocketAddr,
    /// Where the gRPC core listens.
    pub grpc_addr: SocketAddr,
    /// Directory for the SQLite database and the generated master key.
    pub data_dir: PathBuf,
    /// Database URL (`postgres://…` or `sqlite://…`); default: SQLite in `data_dir`.
    /// `DATABASE_URL` is read too, below `WALLETOPS_DATABASE_URL`.
    pub database_url: Option<String>,
    /// Keystore master key, 32 bytes in base64. Default: generated once into
    /// `data_dir/master.key` (mode 0600). Every core over one database needs the same key.
    pub master_key: Option<Secret>,
    /// Where `AdminService` listens, apart from the public listeners; none: it is not
    /// served (the CLI manages users, keys and wallets).
    pub admin_addr: Option<SocketAddr>,
    /// Where Prometheus metrics and the health probes (`/metrics`, `/livez`, `/readyz`) are
    /// served, apart from the public listeners; none: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// Token that `AdminService` callers must send as `x-admin-token`; none disables it.
    pub admin_token: Option<Secret>,
    /// The core the edge forwards to (`walletops edge`).
    pub core_url: String,
    /// Per-user request budgets.
    pub rate_limits: RateLimits,
    /// Redis for the rate limits (`redis://host:port`), so every core draws from one budget;
    /// none: each core counts in its own memory.
    pub redis_url: Option<Secret>,
    /// Longest time one request may take in the edge and in the core, in seconds.
    pub request_timeout_secs: u64,
    /// Largest accepted REST request body, in bytes.
    pub max_body_bytes: usize,
    /// How long the REST edge waits for a request's headers, on a new connection or an idle
    /// kept-alive one, before it closes the connection, in seconds. Longer than the idle
    /// timeout of the load balancers in front (60 s is common), so they close first.
    pub header_read_timeout_secs: u64,
    /// Log format: `text` or `json`.
    pub log_format: LogFormat,
    /// Chains added to (or overriding) the built-in registry, by slug.
    pub chains: BTreeMap<String, ChainConfig>,
    /// How long a write's idempotency key and stored response are kept, in seconds.
    pub idempotency_retention_secs: u64,
    /// The transaction monitor.
    pub monitor: MonitorConfig,
    /// The swap aggregators behind quotes and swaps.
    pub trade: TradeConfig,
    /// The wallet provider that holds provider wallets' keys and signs for them.
    pub provider: ProviderConfig,
    /// How webhooks are delivered.
    pub webhooks: WebhooksConfig,
    /// How writes held for a person's approval are kept.
    pub approvals: ApprovalsConfig,
    /// What holds a limited key where its owner set nothing (`[limits]`).
    pub limits: crate::limits::LimitsConfig,
    /// The address operators reach the REST edge at (`https://ops.example.com`), when it
    /// is not `http://<http_addr>`: sign-in links point there, and with `https` the
    /// dashboard's session cookie is marked `Secure`.
    pub public_url: Option<String>,
    /// The scopes of the API key the first start makes.
    pub first_key_scopes: Scopes,
    /// TLS on the listeners and between edge and core.
    pub tls: TlsConfig,
    /// Peers whose `x-client-address` the core believes (edges run on other hosts, load
    /// balancers): failed authentication is counted per client address, and any other peer
    /// is counted by its own address. Loopback is always believed.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// The one header `trusted_proxies` write the client's address in, which the edge reads:
    /// `x-forwarded-for` or `forwarded`. The other is never read: a proxy passes on what a
    /// client wrote there.
    pub forwarded_header: ForwardedHeader,
    /// MCP sessions one API key may hold open at `/mcp` at once.
    pub mcp_sessions_per_key: usize,
    /// How many event streams may be open, and for how long.
    pub streams: crate::streams::StreamsConfig,
    /// The PKCS#11 token that holds the keys of wallets created with custody `hsm`; none:
    /// such wallets cannot be created or signed for.
    pub hsm: Option<crate::signer::HsmConfig>,
}

/// The header a trusted proxy names the client in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardedHeader {
    /// `X-Forwarded-For`.
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239).
    Forwarded,
}

/// How the monitor follows open transactions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorConfig {
    /// Pause between sweeps, in milliseconds.
    pub poll_interval_ms: u64,
    /// A transaction unmined this long after its current version was first sent is replaced
    /// with a higher fee, in seconds (sending it again does not restart the clock).
    pub stuck_after_secs: u64,
    /// Fee increase of a replacement, in percent (at least 10, which nodes require).
    pub fee_bump_percent: u64,
    /// The highest `maxFeePerGas` any transaction the service signs may pay, in gwei: a
    /// write while the chain's base fee is above it is refused (503), and a stuck
    /// transaction whose replacement would need more is marked FEE_CAPPED and kept as it is.
    pub max_fee_per_gas_gwei: u64,
    /// The highest `maxPriorityFeePerGas` (tip) any transaction the service signs may pay,
    /// in gwei.
    pub max_priority_fee_per_gas_gwei: u64,
    /// How long a core holds a transaction it is following, in seconds.
    pub lease_secs: u64,
    /// How long a transaction's nonce must be seen used by another transaction, with none
    /// of its own versions found, before it is signed with a new nonce, in seconds (at least
    /// three sweeps): a node behind a load balancer can hide a mined transaction for a block
    /// or two.
    pub resign_after_secs: u64,
    /// How often the node is asked whether it still holds a transaction that is waiting as
    /// it should (unmined, not stuck), in seconds.
    pub held_check_secs: u64,
    /// The longest pause between two sends of the same signed bytes to a node that lost
    /// them or gave no verdict, in seconds: the pause doubles from one sweep up to it.
    pub rebroadcast_max_secs: u64,
}

impl MonitorConfig {
    /// The two caps in wei: no transaction the service signs pays more per gas.
    pub fn fee_caps(&self) -> walletops_chains::evm::FeeCaps {
        let wei = |gwei: u64| u128::from(gwei).saturating_mul(1_000_000_000);
        walletops_chains::evm::FeeCaps {
            max_fee_per_gas: wei(self.max_fee_per_gas_gwei),
            max_priority_fee_per_gas: wei(self.max_priority_fee_per_gas_gwei),
        }
    }
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            poll_interval_ms: 1000,
            stuck_after_secs: 60,
            fee_bump_percent: 15,
            max_fee_per_gas_gwei: 1000,
            max_priority_fee_per_gas_gwei: 100,
            lease_secs: 30,
            resign_after_secs: 3,
            held_check_secs: 30,
            rebroadcast_max_secs: 30,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            http_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            grpc_addr: SocketAddr::from(([127, 0, 0, 1], 50051)),
            data_dir: PathBuf::from("./walletops-data"),
            database_url: None,
            master_key: None,
            admin_addr: None,
            metrics_addr: None,
            admin_token: None,
            core_url: "http://127.0.0.1:50051".to_owned(),
            rate_limits: RateLimits::default(),
            redis_url: None,
            request_timeout_secs: 30,
            max_body_bytes: 1024 * 1024,
            header_read_timeout_secs: 75,
            log_format: LogFormat::Text,
            chains: BTreeMap::new(),
            idempotency_retention_secs: 24 * 60 * 60,
            monitor: MonitorConfig::default(),
            trade: TradeConfig::default(),
            provider: ProviderConfig::default(),
            webhooks: WebhooksConfig::default(),
            approvals: ApprovalsConfig::default(),
            limits: crate::limits::LimitsConfig::default(),
            public_url: None,
            first_key_scopes: Scopes::ALL,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::default(),
            mcp_sessions_per_key: 10,
            streams: crate::streams::StreamsConfig::default(),
            hsm: None,
            tls: TlsConfig::default(),
        }
    }
}

/// TLS on the listeners and between edge and core: certificate chains and keys in PEM
/// files; the listeners' are read again on SIGHUP (new connections use the new ones; open
/// connections are kept).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// The REST and gRPC listeners' certificate chain, leaf first.
    pub cert_file: Option<PathBuf>,
    /// Its private key.
    pub key_file: Option<PathBuf>,
    /// When set, the gRPC listeners accept only clients (edges) presenting a certificate
    /// signed by a CA in this file (mutual TLS).
    pub client_ca_file: Option<PathBuf>,
    /// The CA that signed the core's certificate, for an `https` `core_url`; none: the
    /// system's roots.
    pub core_ca_file: Option<PathBuf>,
    /// The certificate the edge presents to the core (with `client_key_file`).
    pub client_cert_file: Option<PathBuf>,
    /// Its private key.
    pub client_key_file: Option<PathBuf>,
}

impl TlsConfig {
    /// The listeners' two files, when TLS is on.
    pub fn files(&self) -> Option<(&std::path::Path, &std::path::Path)> {
        Some((self.cert_file.as_deref()?, self.key_file.as_deref()?))
    }

    /// What a listener's TLS is loaded from, when TLS is on; `mutual` asks clients for
    /// certificates when `client_ca_file` is set (the gRPC listeners).
    pub fn listener(&self, mutual: bool) -> Option<walletops_tls::ListenerFiles> {
        let (cert_file, key_file) = self.files()?;
        Some(walletops_tls::ListenerFiles {
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
            client_ca_file: self.client_ca_file.clone().filter(|_| mutual),
        })
    }

    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.cert_file.is_some() == self.key_file.is_some(),
            "tls.cert_file and tls.key_file go together"
        );
        anyhow::ensure!(
            self.client_cert_file.is_some() == self.client_key_file.is_some(),
            "tls.client_cert_file and tls.client_key_file go together"
        );
        anyhow::ensure!(
            self.client_ca_file.is_none() || self.cert_file.is_some(),
            "tls.client_ca_file needs tls.cert_file and tls.key_file: clients are checked inside TLS"
        );
        Ok(())
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The shortest `admin_token` accepted.
const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// Options that hold secrets, with the variables that set them. Read as they are: figment
/// would parse a value that looks like a number (dropping leading zeros) or a list.
const SECRET_VARIABLES: [(&str, &str); 8] = [
    ("hsm.pin", "WALLETOPS_HSM__PIN"),
    ("admin_token", "WALLETOPS_ADMIN_TOKEN"),
    ("master_key", "WALLETOPS_MASTER_KEY"),
    ("redis_url", "WALLETOPS_REDIS_URL"),
    ("trade.evm.api_key", "WALLETOPS_TRADE__EVM__API_KEY"),
    ("trade.solana.api_key", "WALLETOPS_TRADE__SOLANA__API_KEY"),
    ("provider.app_secret", "WALLETOPS_PROVIDER__APP_SECRET"),
    (
        "provider.authorization_key",
        "WALLETOPS_PROVIDER__AUTHORIZATION_KEY",
    ),
];

impl Config {
    /// Reads the defaults, then `DATABASE_URL`, then the TOML file at `file` (if any), then
    /// the `WALLETOPS_*` environment variables. `DATABASE_URL` sits below the file: it is
    /// often set in a developer's shell for other projects.
    pub fn load(file: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()))
            .merge(Env::raw().only(&["DATABASE_URL"]));
        if let Some(path) = file {
            anyhow::ensure!(path.exists(), "config file {} not found", path.display());
            figment = figment.merge(Toml::file_exact(path));
        }
        figment = figment.merge(
            Env::prefixed("WALLETOPS_")
                // Variables that steer the process, not options of the file.
                .filter(|key| {
                    let key = key.as_str().to_ascii_lowercase();
                    !NOT_OPTIONS.contains(&key.as_str())
                        && !key.starts_with("test_")
                        && !SECRET_VARIABLES.iter().any(|(_, variable)| {
                            variable
                                .strip_prefix("WALLETOPS_")
                                .is_some_and(|name| key.eq_ignore_ascii_case(name))
                        })
                })
                .split("__"),
        );
        // Matched without regard to case, as figment matches the other variables (`vars`
        // would panic on a variable that is not Unicode, anyone's).
        for (name, value) in std::env::vars_os() {
            let Some(name) = name.to_str() else {
                continue;
            };
            if let Some((option, _)) = SECRET_VARIABLES
                .iter()
                .find(|(_, variable)| name.eq_ignore_ascii_case(variable))
            {
                let value = value
                    .into_string()
                    .map_err(|_| anyhow::anyhow!("{name} is not valid Unicode"))?;
                figment = figment.merge(Serialized::global(option, value));
            }
        }
        let config: Config = figment.extract()?;
        config.validate()?;
        Ok(config)
    }

    /// Refuses values the service cannot run with, naming the option: a zero rate limit
    /// refuses every request, a zero stuck time raises every fee each sweep up to the cap.
    pub fn validate(&self) -> anyhow::Result<()> {
        // An empty token would match a request without one: anyone could create users.
        if let Some(token) = &self.admin_token {
            anyhow::ensure!(
                token.expose().len() >= MIN_ADMIN_TOKEN_LEN,
                "admin_token must be at least {MIN_ADMIN_TOKEN_LEN} characters (it guards creating users, keys and wallets); leave it unset to disable the admin API"
            );
        }
        anyhow::ensure!(
            self.admin_addr.is_none() || self.admin_token.is_some(),
            "admin_addr needs admin_token: the admin listener serves only callers with the token"
        );
        let m = &self.monitor;
        let at_least = [
            (
                "rate_limits.writes_per_minute",
                u64::from(self.rate_limits.writes_per_minute),
                1,
            ),
            (
                "rate_limits.reads_per_minute",
                u64::from(self.rate_limits.reads_per_minute),
                1,
            ),
            ("mcp_sessions_per_key", self.mcp_sessions_per_key as u64, 1),
            (
                "rate_limits.failed_auth_per_minute",
                u64::from(self.rate_limits.failed_auth_per_minute),
                1,
            ),
            ("request_timeout_secs", self.request_timeout_secs, 1),
            ("max_body_bytes", self.max_body_bytes as u64, 1024),
            ("header_read_timeout_secs", self.header_read_timeout_secs, 1),
            (
                "idempotency_retention_secs",
                self.idempotency_retention_secs,
                1,
            ),
            ("monitor.poll_interval_ms", m.poll_interval_ms, 50),
            ("monitor.stuck_after_secs", m.stuck_after_secs, 1),
            ("monitor.fee_bump_percent", m.fee_bump_percent, 10),
            ("monitor.max_fee_per_gas_gwei", m.max_fee_per_gas_gwei, 1),
            (
                "monitor.max_priority_fee_per_gas_gwei",
                m.max_priority_fee_per_gas_gwei,
                1,
            ),
            ("monitor.lease_secs", m.lease_secs, 5),
            ("monitor.resign_after_secs", m.resign_after_secs, 1),
            ("monitor.held_check_secs", m.held_check_secs, 1),
            ("monitor.rebroadcast_max_secs", m.rebroadcast_max_secs, 1),
        ];
        for (option, value, least) in at_least {
            anyhow::ensure!(
                value >= least,
                "{option} must be at least {least}, not {value}"
            );
        }
        anyhow::ensure!(
            (1..=100).contains(&self.rate_limits.key_share_percent),
            "rate_limits.key_share_percent must be 1 to 100, not {}",
            self.rate_limits.key_share_percent
        );
        self.tls.validate()?;
        self.streams.validate()?;
        if let Some(url) = &self.public_url {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| anyhow::anyhow!("public_url {url:?} is not a URL: {e}"))?;
            anyhow::ensure!(
                matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some(),
                "public_url must be an http or https URL, like https://ops.example.com"
            );
        }
        self.trade.validate()?;
        self.webhooks.validate()?;
        self.approvals.validate()?;
        self.provider.validate()
    }

    /// Where operators reach the REST edge: `public_url`, else `http(s)://<http_addr>` (an
    /// unspecified listen address shown as loopback). No trailing slash.
    pub fn public_base(&self) -> String {
        let scheme = if self.tls.files().is_some() {
            "https"
        } else {
            "http"
        };
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None if self.http_addr.ip().is_unspecified() => {
                format!("{scheme}://127.0.0.1:{}", self.http_addr.port())
            }
            None => format!("{scheme}://{}", self.http_addr),
        }
    }

    /// The dashboard page that redeems sign-in link `token`.
    pub fn sign_in_link(&self, token: &str) -> String {
        format!(
            "{}/dashboard/sign-in-link?token={token}",
            self.public_base()
        )
    }

    /// The request timeout as a `Duration`.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// The database to use: `database_url`, else a SQLite file in `data_dir`.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) if !url.is_empty() => url.clone(),
            _ => format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.join("walletops.db").display()
            ),
        }
    }
}

#[cfg(test)]
mod tests;
