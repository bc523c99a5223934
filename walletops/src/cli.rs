//! The command line: its commands and flags, and the configuration they override.

use std::{net::SocketAddr, path::PathBuf};

use clap::{Args, Parser, Subcommand};
use walletops_core::{Config, bootstrap::FIRST_USER};
use walletops_domain::{ChainFamily, Custody};

mod keys;
pub(crate) use keys::KeysCommand;

#[derive(Debug, Parser)]
#[command(
    name = "walletops",
    version,
    about = "WalletOps: one safe API over your custodial wallets"
)]
pub(crate) struct Cli {
    /// TOML configuration file.
    #[arg(long, global = true, env = "WALLETOPS_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Args, Default)]
pub(crate) struct Addrs {
    /// REST listen address [env: WALLETOPS_HTTP_ADDR] [default: 127.0.0.1:8080].
    #[arg(long)]
    http_addr: Option<SocketAddr>,
    /// gRPC listen address [env: WALLETOPS_GRPC_ADDR] [default: 127.0.0.1:50051].
    #[arg(long)]
    grpc_addr: Option<SocketAddr>,
    /// Admin API (gRPC `AdminService`) listen address [env: WALLETOPS_ADMIN_ADDR]
    /// [default: none, the admin API is off]. Needs `admin_token`.
    #[arg(long)]
    admin_addr: Option<SocketAddr>,
    /// Metrics and health (`/metrics`, `/livez`, `/readyz`) listen address
    /// [env: WALLETOPS_METRICS_ADDR] [default: none; 127.0.0.1:9090 with `--dev`].
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// Data directory [env: WALLETOPS_DATA_DIR] [default: ./walletops-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// On the first start, also print the first API key (it is always written to
    /// `<data_dir>/first-api-key`, readable by this user only). `--dev` implies it.
    #[arg(long)]
    pub(crate) print_key: bool,
}

#[derive(Debug, Args, Default)]
pub(crate) struct DataDir {
    /// Data directory [env: WALLETOPS_DATA_DIR] [default: ./walletops-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Default)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) addrs: Addrs,
    /// Also start a local anvil node as chain `anvil` (from the project's npm install), fund
    /// the first user's EVM wallet and print a ready curl line.
    #[arg(long)]
    pub(crate) dev: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the core and the REST edge in one process.
    Serve(ServeArgs),
    /// Run the gRPC core alone.
    Core(Addrs),
    /// Run the REST edge alone, forwarding to a core.
    Edge {
        /// The core's gRPC URL [env: WALLETOPS_CORE_URL] [default: http://127.0.0.1:50051].
        #[arg(long)]
        core_url: Option<String>,
        /// REST listen address [env: WALLETOPS_HTTP_ADDR] [default: 127.0.0.1:8080].
        #[arg(long)]
        http_addr: Option<SocketAddr>,
    },
    /// Serve a WalletOps service's MCP tools on stdin/stdout, for desktop agents that start
    /// their tool servers as processes.
    Mcp {
        /// The service's REST URL (its `/mcp` is used).
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        url: String,
        /// A file holding the API key the agent acts with (give it only the scopes it needs).
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Manage users.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Manage a user's API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Manage wallets.
    Wallets {
        #[command(subcommand)]
        command: WalletsCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Manage a user's webhook endpoints and their deliveries.
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// List, approve and reject writes held for approval (a key's approval threshold).
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Pay many recipients from one wallet, from a CSV file; list and show payouts.
    Payouts {
        #[command(subcommand)]
        command: PayoutsCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Check the HSM of `[hsm]`.
    Hsm {
        #[command(subcommand)]
        command: HsmCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Manage the keystore's master key.
    Keystore {
        #[command(subcommand)]
        command: KeystoreCommand,
        #[command(flatten)]
        data: DataDir,
    },
    /// Copy the SQLite database, consistent, to a new FILE while the service runs (on
    /// PostgreSQL, use pg_dump: this says how).
    Backup {
        /// The backup file; it must not exist.
        file: PathBuf,
        #[command(flatten)]
        data: DataDir,
    },
    /// Run pending database migrations and exit.
    Migrate(DataDir),
}

#[derive(Debug, Subcommand)]
pub(crate) enum KeystoreCommand {
    /// Re-seal every wallet key under a new master key, in one transaction. The new key is
    /// base64 of 32 random bytes in a file (`head -c 32 /dev/urandom | base64 > new.key`).
    /// Then restart every core with it.
    Rotate {
        /// The file holding the new master key.
        #[arg(long)]
        new_key_file: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum UsersCommand {
    /// Create a user, print its first API key, and give it one EVM and one Solana wallet.
    Create {
        /// Unique user name.
        name: String,
        /// Do not create the starter wallets.
        #[arg(long)]
        no_wallets: bool,
    },
    /// List users.
    List,
    /// Link a user to its account at the wallet provider and sync its wallets from there.
    Link {
        /// User name or id.
        user: String,
        /// The user's id at the provider (`did:privy:…`).
        #[arg(long)]
        provider_user: String,
    },
    /// Unlink a user from the wallet provider: its provider wallets stay listed, but cannot
    /// be written from until it is linked again.
    Unlink {
        /// User name or id.
        user: String,
    },
    /// Set a user's dashboard password, read from the terminal's prompt or, when stdin is
    /// not a terminal, from its first line. Ends the user's open dashboard sessions.
    SetPassword {
        /// User name or id.
        user: String,
    },
    /// Print a one-time dashboard link, valid 15 minutes, with which the user sets a new
    /// password and signs in.
    SignInLink {
        /// User name or id.
        user: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ApprovalsCommand {
    /// List a user's writes held for approval, newest first.
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Only those in this state: pending, approved, rejected, expired, submitted, failed.
        #[arg(long)]
        state: Option<String>,
    },
    /// Approve a pending write: a running core signs and sends it, within the key's limits.
    Approve {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Approval id.
        id: String,
        /// Who decides, as recorded (`cli:NAME`); default: the login name.
        #[arg(long)]
        by: Option<String>,
    },
    /// Reject a pending write: it is never signed.
    Reject {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Approval id.
        id: String,
        /// Why, recorded with the rejection.
        #[arg(long)]
        reason: Option<String>,
        /// Who decides, as recorded (`cli:NAME`); default: the login name.
        #[arg(long)]
        by: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PayoutsCommand {
    /// Check and store a payout of the items of a CSV file (columns `to`, `asset`, `amount`,
    /// optional `token` and `reference`; amounts in base units): a running core pays each
    /// item once. Nothing is stored when any row or the wallet's funds are wrong.
    Create {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Chain slug.
        #[arg(long)]
        chain: String,
        /// The CSV file.
        #[arg(long)]
        csv: std::path::PathBuf,
        /// The paying wallet; default: the user's default wallet for the chain.
        #[arg(long)]
        from: Option<String>,
        /// The payout's idempotency key (a UUID); default: derived from the user, chain,
        /// wallet and the file's bytes, so running the command again with the same file
        /// answers the same payout instead of paying twice.
        #[arg(long)]
        idempotency_key: Option<uuid::Uuid>,
        /// Only check the file and the funds; store nothing.
        #[arg(long)]
        check: bool,
    },
    /// List a user's payouts, newest first.
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
    },
    /// Show a payout and where each item stands.
    Show {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Payout id.
        id: uuid::Uuid,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum WebhooksCommand {
    /// Register an endpoint and print its signing secret (shown once).
    Create {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Where deliveries are POSTed (http or https).
        #[arg(long)]
        url: String,
        /// Event types, comma-separated (`transaction.confirmed,transaction.failed`); all
        /// six when absent.
        #[arg(long, value_delimiter = ',')]
        events: Vec<String>,
    },
    /// List a user's endpoints (never their secrets).
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
    },
    /// Delete an endpoint and every delivery to it.
    Delete {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Endpoint id.
        id: String,
    },
    /// Enable an endpoint again that was disabled (its key revoked, or failing too long).
    Enable {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Endpoint id.
        id: String,
    },
    /// Give an endpoint a new signing secret and print it (shown once).
    RotateSecret {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Endpoint id.
        id: String,
    },
    /// List an endpoint's deliveries, newest event first.
    Deliveries {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Endpoint id.
        id: String,
        /// Only this state's: pending, delivered or dead.
        #[arg(long, value_parser = ["pending", "delivered", "dead"])]
        state: Option<String>,
        /// At most this many (1 to 500).
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Send dead-lettered deliveries again (the ones named, or every dead one).
    Replay {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// Endpoint id.
        id: String,
        /// Delivery ids; every dead delivery of the endpoint when none.
        deliveries: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HsmCommand {
    /// The module loads, the token is found, the PIN is accepted and a test signature of
    /// each curve (secp256k1, Ed25519) verifies.
    Check {
        /// Also time this many signatures of each curve over the session pool, and print the
        /// rate: what the token can sign for the service.
        #[arg(long, default_value_t = 0)]
        signatures: u32,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum WalletsCommand {
    /// Generate a delegated wallet, its key in the keystore or the HSM.
    Create {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
        /// `ethereum` or `solana`.
        #[arg(long)]
        chain_type: ChainFamily,
        /// Make it the owner's default for its family.
        #[arg(long)]
        make_default: bool,
        /// `keystore` (sealed under the master key) or `hsm` (generated in the `[hsm]` token).
        #[arg(long, default_value = "keystore")]
        custody: Custody,
    },
    /// List a user's wallets.
    List {
        /// Owner: user name or id.
        #[arg(long, default_value = FIRST_USER)]
        user: String,
    },
    /// Compare the HSM wallets of the store with the keys in the HSM: a key without a
    /// wallet, or a wallet without its key, is reported (and the exit status is 1).
    Audit,
    /// Read linked users' wallets from the wallet provider again (one user, or all).
    Sync {
        /// User name or id; every linked user when absent.
        #[arg(long)]
        user: Option<String>,
    },
    /// Run a limited key's writes from an EVM wallet through the guard contract, which
    /// reverts them on chain when they move more than was reserved (EIP-7702 delegation).
    Guard {
        #[command(subcommand)]
        command: GuardCommand,
    },
    /// Delegate a wallet to the server signer, or withdraw the delegation.
    Delegate {
        /// Wallet address.
        address: String,
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
}

/// `wallets guard`: what the wallet's code on one chain becomes.
#[derive(Debug, Subcommand)]
pub(crate) enum GuardCommand {
    /// Delegate the wallet to the guard (deployed first where the chain has none), and
    /// wait until that is mined.
    Enable {
        /// The wallet's address.
        address: String,
        /// The EVM chain, e.g. `ethereum` or `base`.
        #[arg(long)]
        chain: String,
    },
    /// Remove the delegation: the wallet's code is empty again, its writes unguarded.
    Disable {
        /// The wallet's address.
        address: String,
        /// The EVM chain.
        #[arg(long)]
        chain: String,
    },
}

impl Addrs {
    fn apply(&self, config: &mut Config) {
        if let Some(a) = self.http_addr {
            config.http_addr = a;
        }
        if let Some(a) = self.grpc_addr {
            config.grpc_addr = a;
        }
        if let Some(a) = self.admin_addr {
            config.admin_addr = Some(a);
        }
        if let Some(a) = self.metrics_addr {
            config.metrics_addr = Some(a);
        }
        if let Some(d) = &self.data_dir {
            config.data_dir = d.clone();
        }
    }
}

impl DataDir {
    fn apply(&self, config: &mut Config) {
        if let Some(d) = &self.data_dir {
            config.data_dir = d.clone();
        }
    }
}

impl Command {
    /// Overrides `config` with the addresses and directories given on the command line.
    pub(crate) fn apply(&self, config: &mut Config) {
        match self {
            Self::Serve(a) => a.addrs.apply(config),
            Self::Core(a) => a.apply(config),
            Self::Edge {
                core_url,
                http_addr,
            } => {
                if let Some(u) = core_url {
                    config.core_url = u.clone();
                }
                if let Some(a) = http_addr {
                    config.http_addr = *a;
                }
            }
            Self::Mcp { .. } => {}
            Self::Users { data, .. }
            | Self::Keys { data, .. }
            | Self::Webhooks { data, .. }
            | Self::Approvals { data, .. }
            | Self::Payouts { data, .. }
            | Self::Wallets { data, .. }
            | Self::Keystore { data, .. }
            | Self::Hsm { data, .. }
            | Self::Backup { data, .. }
            | Self::Migrate(data) => data.apply(config),
        }
    }
}
