//! Local stand-ins for the internet services WalletOps calls, each a real HTTP server that
//! speaks the service's documented wire format over a local node, so the service's own
//! clients talk to them unchanged. (The 1inch-compatible one lives in the
//! `walletops-devnet-aggregator` crate, which the dev playground runs too.)

pub mod jupiter;
pub mod privy;
