//! Effects: what a write does to its wallet, read from what the chain says of it (a
//! simulation before signing, the receipt once final) into the typed values of
//! `walletops_domain::Effects`. The EVM's come from logs (`evm.rs`).
//! Solana's come from the System and token instructions a transaction executes, its CPIs
//! included (`solana.rs`).

pub mod evm;
pub mod solana;

use walletops_domain::Effects;

/// What is known, before signing, of what a write will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Foreseen {
    /// Read from a simulation on the chain's latest state (or, for a transaction the
    /// service builds itself from its own instructions, read from those).
    Known(Effects),
    /// The chain's node cannot simulate: why, naming the chain and what it lacks.
    Unknown(String),
}

impl Foreseen {
    /// The effects, when known.
    pub fn known(&self) -> Option<&Effects> {
        match self {
            Self::Known(effects) => Some(effects),
            Self::Unknown(_) => None,
        }
    }
}
