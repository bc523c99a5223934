//! Plain typed values of the domain, shared by every layer: chain families and addresses
//! (alloy `Address`, Solana `Pubkey`), amounts, wallets, users, API keys, transaction
//! records, submissions and writes held for approval. No I/O and no rule that needs the store: `store/` reads rows into
//! these types, so it sits under every module that acts on them.

mod account;
mod approval;
mod chain;
mod spend;
mod transaction;
mod wallet;
mod webhook;

pub use account::{ApiKey, DashboardSession, Scope, Scopes, User, check_name};
pub use approval::{Approval, ApprovalState, Decision, HeldWrite};
pub use chain::{AmountKind, ChainFamily, WalletAddress, parse_amount};
pub use spend::{NATIVE_ASSET, Spend, SpendLimit, SpendStanding, asset_name};
pub use transaction::{
    ClaimState, OpenTransaction, StatusChange, Submission, SwapTerms, TransactionRecord, TxHash,
    TxKind, TxStatus,
};
pub use wallet::{
    DelegatedWallet, EMBEDDED_PROVIDER_TYPE, LOCAL_CLIENT_TYPE, NewWallet, NotSignable,
    ProviderWallet, SealedKey, Wallet, WalletFilter,
};
pub use webhook::{DeliveryState, WebhookDelivery, WebhookEndpoint};
