//! The wallet provider (the Privy wallet API): the wallets it holds for linked users, and
//! signing with them. The provider signs; the service stores what it signed and broadcasts
//! it itself, as for local keystore wallets, so the exactly-once write path is the same.
//!
//! **Invariant:** provider credentials (the app secret, the authorization key) are sent only
//! in headers to the configured base URL, and appear in no log line, message or error.

mod auth;
pub mod config;
pub mod privy;

#[cfg(test)]
mod tests;

pub use config::ProviderConfig;
pub use privy::Privy;
