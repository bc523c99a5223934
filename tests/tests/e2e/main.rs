//! End-to-end tests of WalletOps over real HTTP and gRPC on loopback, each on SQLite and on
//! PostgreSQL.

mod admin;
mod api_keys;
mod approvals;
mod authentication;
mod cli;
mod crash;
mod dashboard;
mod errors;
mod events;
mod evm;
mod faults;
mod fuzz;
mod keystore;
mod mcp;
mod metrics;
mod provider;
mod rate_limits;
mod request_ids;
mod secrets;
mod solana;
mod spend_limits;
mod surfaces;
mod tls;
mod wallets;
mod webhooks;
