//! The WalletOps end-to-end harness: starts the real `walletops` binary on random loopback
//! ports over a fresh SQLite file or a fresh PostgreSQL database, and talks to it only over
//! real HTTP and real gRPC. Nothing of the service is mocked.
//!
//! - `service`: a running `walletops serve` and the processes it starts; `cli`: the
//!   `walletops` admin commands against it; `store`: what it stored, read from its database.
//! - `rest` and `grpc`: its two surfaces, as callers use them; `http`: plain HTTP clients.
//! - `database`: the databases it runs on; `paths`: the binaries the tests run.
//! - `wait`: waiting on a condition, under one timeout.
//! - `anvil` and `gateway`: a real EVM node, and a JSON-RPC gateway in front of it;
//!   `solana_node`: a Solana node behind the real JSON-RPC shapes.
//! - `silencer`: a TCP proxy that makes chosen connections go silent.
//! - `webhooks`: a receiver that verifies Standard Webhooks signatures; `mcp`: an MCP
//!   client.

pub mod anvil;
mod cli;
mod database;
pub mod fakes;
pub mod faults;
pub mod gateway;
mod grpc;
pub mod http;
pub mod mcp;
pub mod metrics;
mod paths;
mod rest;
mod service;
pub mod silencer;
pub mod softhsm;
pub mod solana_node;
mod store;
pub mod venue;
mod wait;
pub mod webhooks;

pub use cli::CliOutput;
pub use database::{TestDatabase, redis_url};
pub use grpc::{as_admin, grpcurl, reason, with_key, write_request};
pub use paths::{grpcurl_bin, schemathesis_bin, venv_python, walletops_bin, workspace_root};
pub use rest::{Reply, Rest};
pub use service::{Launched, Options, Service, first_api_key, launch, launch_logging_to};
pub use store::OPEN_RECORDS;
pub use wait::{WAIT_TIMEOUT, poll_until, poll_until_within, within};

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

/// Runs each named `async fn(Backend) -> anyhow::Result<()>` as a test on `$backend`, in
/// module `$module`: what `on_one_backend!` and `on_both_backends!` are made of.
#[doc(hidden)]
#[macro_export]
macro_rules! on_backend {
    ($module:ident, $backend:ident: $($name:ident),*) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Err(e) = super::$name($crate::Backend::$backend).await {
                        panic!("{e:?}");
                    }
                }
            )*
        }
    };
}

/// Runs each named `async fn(Backend) -> anyhow::Result<()>` once, on SQLite, as
/// `sqlite::name`: for a test whose checks the store plays no part in (a node's faults, a
/// page, a balance read, a rate limit, input refused before anything is stored). On
/// PostgreSQL too it would take twice the time and prove nothing more; a test of what the
/// store does (claims, leases, nonces, records after a crash) runs on both.
#[macro_export]
macro_rules! on_one_backend {
    ($($name:ident),* $(,)?) => {
        $crate::on_backend!(sqlite, Sqlite: $($name),*);
    };
}

/// Runs each named `async fn(Backend) -> anyhow::Result<()>` as two tests, one per backend.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $crate::on_backend!(sqlite, Sqlite: $($name),*);
        $crate::on_backend!(postgres, Postgres: $($name),*);
    };
}
