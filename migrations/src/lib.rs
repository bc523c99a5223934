//! The WalletOps schema as sea-orm migrations, one file per migration, run at startup on
//! SQLite and PostgreSQL alike. A migration that has shipped is never edited: a change to the
//! schema is a new file.

pub use sea_orm_migration::prelude::*;

mod m20261123_000001_create_users;
mod m20261123_000002_create_api_keys;
mod m20261123_000003_create_wallets;
mod m20261123_000004_create_signer_keys;
mod m20261123_000005_create_transactions;
mod m20261123_000006_create_idempotency_keys;
mod m20261123_000007_create_evm_nonces;
mod m20261123_000008_add_transactions_valid_until;
mod m20261123_000009_add_transactions_revision;
mod m20261124_000010_add_api_keys_created_by;
mod m20261124_000011_index_transactions_nonce;
mod m20261124_000012_create_keystore_check;
mod m20261126_000013_link_provider;
mod m20261127_000014_dashboard;
mod m20261128_000015_transaction_events;
mod m20261129_000016_webhooks;
mod m20261130_000017_spend_limits;
mod m20261201_000018_approvals;
mod m20261202_000019_limited_keys;
mod m20261203_000020_key_policies;
mod m20261204_000021_transaction_effects;
mod m20261205_000022_key_lineage;
mod m20261206_000023_webhook_standing;
mod m20261207_000024_approval_wallet;
mod m20261208_000025_deposits;
mod m20261209_000026_payouts;
mod m20261210_000027_payout_packs;
mod m20261211_000028_key_changes;
mod m20261212_000029_wallet_changes;
mod m20261213_000030_quotes;
mod m20261214_000031_frozen_lines;
mod m20261215_000032_wallet_guards;

/// Every WalletOps migration, in order.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261123_000001_create_users::Migration),
            Box::new(m20261123_000002_create_api_keys::Migration),
            Box::new(m20261123_000003_create_wallets::Migration),
            Box::new(m20261123_000004_create_signer_keys::Migration),
            Box::new(m20261123_000005_create_transactions::Migration),
            Box::new(m20261123_000006_create_idempotency_keys::Migration),
            Box::new(m20261123_000007_create_evm_nonces::Migration),
            Box::new(m20261123_000008_add_transactions_valid_until::Migration),
            Box::new(m20261123_000009_add_transactions_revision::Migration),
            Box::new(m20261124_000010_add_api_keys_created_by::Migration),
            Box::new(m20261124_000011_index_transactions_nonce::Migration),
            Box::new(m20261124_000012_create_keystore_check::Migration),
            Box::new(m20261126_000013_link_provider::Migration),
            Box::new(m20261127_000014_dashboard::Migration),
            Box::new(m20261128_000015_transaction_events::Migration),
            Box::new(m20261129_000016_webhooks::Migration),
            Box::new(m20261130_000017_spend_limits::Migration),
            Box::new(m20261201_000018_approvals::Migration),
            Box::new(m20261202_000019_limited_keys::Migration),
            Box::new(m20261203_000020_key_policies::Migration),
            Box::new(m20261204_000021_transaction_effects::Migration),
            Box::new(m20261205_000022_key_lineage::Migration),
            Box::new(m20261206_000023_webhook_standing::Migration),
            Box::new(m20261207_000024_approval_wallet::Migration),
            Box::new(m20261208_000025_deposits::Migration),
            Box::new(m20261209_000026_payouts::Migration),
            Box::new(m20261210_000027_payout_packs::Migration),
            Box::new(m20261211_000028_key_changes::Migration),
            Box::new(m20261212_000029_wallet_changes::Migration),
            Box::new(m20261213_000030_quotes::Migration),
            Box::new(m20261214_000031_frozen_lines::Migration),
            Box::new(m20261215_000032_wallet_guards::Migration),
        ]
    }
}
