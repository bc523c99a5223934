//! Recovery: what is done to a stored record once its request has sent it. Re-signing
//! (a new nonce or blockhash), replacing with higher fees, failing it and giving its nonce
//! back or filling it, filling a gap. The monitor (`monitor/`) decides when; the request
//! that stored a record calls the refusal path once, for its first broadcast.
//!
//! **Invariant:** every change is a compare-and-swap on the record's revision, in one
//! database transaction with the nonce ledger, so two workers never both act on a record.

pub mod evm;
pub mod solana;
