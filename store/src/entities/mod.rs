//! sea-orm entities, one per table of `walletops-migrations`. Rows never leave `store/`: the
//! repositories in `store` turn them into domain values.

pub(crate) mod api_keys;
pub(crate) mod approvals;
pub(crate) mod dashboard_sessions;
pub(crate) mod deposit_blocks;
pub(crate) mod deposit_cursors;
pub(crate) mod deposits;
pub(crate) mod evm_nonces;
pub(crate) mod frozen_lines;
pub(crate) mod idempotency_keys;
pub(crate) mod key_policy_rules;
pub(crate) mod keystore_check;
pub(crate) mod payout_items;
pub(crate) mod payouts;
pub(crate) mod quotes;
pub(crate) mod sign_in_links;
pub(crate) mod signer_keys;
pub(crate) mod spend_limits;
pub(crate) mod spend_reservations;
pub(crate) mod transaction_events;
pub(crate) mod transactions;
pub(crate) mod users;
pub(crate) mod wallet_guards;
pub(crate) mod wallets;
pub(crate) mod webhook_deliveries;
pub(crate) mod webhook_endpoints;
