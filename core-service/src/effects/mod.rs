//! Effects: what a write does to its wallet, read from what the chain says of it (a
//! simulation before signing, the receipt once final) into the typed values of
//! `walletops_domain::Effects`. The EVM's come from logs (`evm.rs`).

pub mod evm;
