//! Creates `key_policy_rules`: the allow-lists of an API key (chains, recipients, contracts
//! with optional selectors, spenders), one row per thing allowed.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub(crate) struct Migration;

/// One thing a key's policy allows on one chain.
#[derive(DeriveIden)]
enum KeyPolicyRules {
    Table,
    KeyId,
    /// The chain's slug.
    Chain,
    /// `chain`, `recipient`, `contract` or `spender`.
    Rule,
    /// The account allowed (EVM lowercase 0x-hex, Solana base58); empty for `chain`.
    Target,
    /// A contract rule's function selector (0x and 8 hex digits); empty: any function.
    Selector,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(KeyPolicyRules::Table)
                    .if_not_exists()
                    .col(uuid(KeyPolicyRules::KeyId))
                    .col(string_len(KeyPolicyRules::Chain, 64))
                    .col(string_len(KeyPolicyRules::Rule, 16))
                    .col(string_len(KeyPolicyRules::Target, 64))
                    .col(string_len(KeyPolicyRules::Selector, 10))
                    .col(timestamp_with_time_zone(KeyPolicyRules::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(KeyPolicyRules::KeyId)
                            .col(KeyPolicyRules::Chain)
                            .col(KeyPolicyRules::Rule)
                            .col(KeyPolicyRules::Target)
                            .col(KeyPolicyRules::Selector),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(KeyPolicyRules::Table).to_owned())
            .await
    }
}
