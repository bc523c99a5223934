//! Why a chain or its node gave no answer a write can go on with, in words a caller may read
//! (never a URL or a key). The core maps each to its contract code (`walletops-core`'s
//! `error.rs`).

/// What a chain's node, or the configuration of a chain, answered instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// The slug names no configured chain.
    #[error("chain: unknown or unsupported chain {0:?}")]
    Unknown(String),
    /// The node failed to answer a read.
    #[error("{0}")]
    Node(String),
    /// The transaction would fail, or the node refused it.
    #[error("{0}")]
    WouldFail(String),
    /// The sender cannot pay for the transaction.
    #[error("{0}")]
    CannotPay(String),
    /// The chain cannot take writes now (its fee is above the cap, its nodes disagree, a
    /// configured URL is bad): the same request may pass later.
    #[error("{0}")]
    Unavailable(String),
}
