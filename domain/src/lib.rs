//! Plain typed values of the domain, shared by every layer: chain families and addresses
//! (alloy `Address`, Solana `Pubkey`), amounts, wallets, users, API keys, transaction
//! records, submissions and writes held for approval; text read from a chain, cleaned
//! (`chain_text`); files only this user may read
//! (`files`); configured secrets (`secret`). No I/O beyond those files and no rule that
//! needs the store: `walletops-store` reads rows into these types, so this crate sits under
//! every other crate of the service and depends on none of them.

pub mod files;
pub mod secret;

mod account;
mod approval;
mod chain;
mod chain_text;
mod deposit;
mod effects;
mod key_policy;
mod payout;
mod spend;
mod transaction;
mod transfer;
mod wallet;
mod webhook;

pub use account::{
    ApiKey, DashboardSession, EXPIRING_SOON, FrozenLine, KeyState, Scope, Scopes, User, check_name,
};
pub use approval::{Approval, ApprovalState, Decision, HeldWrite};
pub use chain::{AmountKind, ChainFamily, WalletAddress, parse_amount};
pub use chain_text::{MESSAGE_CHARS, SYMBOL_CHARS, chain_text};
pub use deposit::{Deposit, DepositState};
pub use effects::{Asset, Effects, Flow, Grant, GrantKind};
pub use key_policy::{Allowed, PolicyRule, RuleKind};
pub use payout::{ItemMade, ItemStanding, Payout, PayoutItem, PayoutState};
pub use spend::{
    FEES_ASSET, GAS_ASSET, NATIVE_ASSET, Spend, SpendLimit, SpendStanding, asset_name,
};
pub use transaction::{
    ClaimState, OpenTransaction, StatusChange, Submission, SwapTerms, TransactionRecord, TxHash,
    TxKind, TxStatus,
};
pub use transfer::Transfer;
pub use wallet::{
    Custody, DelegatedWallet, EMBEDDED_PROVIDER_TYPE, HSM_PROVIDER_TYPE, LOCAL_CLIENT_TYPE, NewKey,
    NewWallet, NotSignable, ProviderWallet, SealedKey, SyncReport, Wallet, WalletFilter,
};
pub use webhook::{
    DEPOSIT_SUBJECT, DeliveryState, Disabled, DisabledReason, EndpointMaker, EventType,
    KEY_SUBJECT, PAYOUT_SUBJECT, TRANSACTION_SUBJECT, WebhookDelivery, WebhookEndpoint,
};
