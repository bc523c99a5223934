//! The WalletOps core: the gRPC service that does all the work. It authenticates every call,
//! draws it from its user's rate budget, validates and parses its fields once, checks wallet
//! ownership and delegation, and owns the store, the keystore and the chain registry. The REST
//! edge (`walletops-edge`) only translates to it, so gRPC and REST callers get the same rules.

pub mod app;
pub mod approvals;
pub mod auth;
pub mod balances;
pub mod barrier;
pub mod bootstrap;
pub mod clock;
pub mod config;
pub mod deposits;
pub mod devnet;
pub mod error;
pub mod events;
pub mod grpc;
pub mod guard;
pub mod holdings;
pub mod idempotency;
pub mod limits;
pub mod metrics;
pub mod monitor;
pub mod policy;
pub mod quotes;
pub mod ratelimit;
pub mod recovery;
pub mod requests;
pub mod runner;
pub mod signer;
pub mod streams;
pub mod swaps;
pub mod transactions;
pub mod transfers;
pub mod wallets;
pub mod webhooks;
pub mod writes;

pub use app::Core;
pub use config::Config;
pub use error::WalletOpsError;
