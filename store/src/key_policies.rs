//! Key policies' rules: one row per thing a key's policy allows on one chain. Adding a rule
//! marks the key limited (for good), so its writes are judged from then on.

use chrono::Utc;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, sea_query::Expr,
    sea_query::OnConflict,
};
use uuid::Uuid;
use walletops_domain::{Allowed, PolicyRule, RuleKind, asset_name};

use super::{
    Store,
    entities::{api_keys, key_policy_rules as rules},
};
use crate::error::{Result, StoreError};

/// The row's columns for `rule`: kind, target, selector.
fn columns(allowed: &Allowed) -> (&'static str, String, String) {
    (
        allowed.kind().as_str(),
        allowed
            .address()
            .map(|a| asset_name(Some(a)))
            .unwrap_or_default(),
        allowed
            .selector()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    )
}

fn rule_of(m: rules::Model) -> Result<PolicyRule> {
    let corrupt = || StoreError::corrupt(format!("a stored policy rule is not one: {m:?}"));
    let address = || m.target.parse().map_err(|_| corrupt());
    let allowed = match RuleKind::parse(&m.rule).ok_or_else(corrupt)? {
        RuleKind::Chain => Allowed::Chain,
        RuleKind::Recipient => Allowed::Recipient(address()?),
        RuleKind::Spender => Allowed::Spender(address()?),
        RuleKind::Token => Allowed::Token(address()?),
        RuleKind::Contract => {
            let selector = if m.selector.is_empty() {
                None
            } else {
                Some(m.selector.parse().map_err(|_| corrupt())?)
            };
            Allowed::Contract(address()?, selector)
        }
    };
    Ok(PolicyRule {
        key_id: m.key_id,
        chain: m.chain,
        allowed,
    })
}

impl Store {
    /// Adds `rule` to its key's policy (a rule already there stays as it is), and marks the
    /// key limited, in one transaction, for the key and every key made from it.
    pub async fn add_policy_rule(&self, rule: &PolicyRule) -> Result<()> {
        let txn = self.begin_sea().await?;
        super::users::lock_owner_of(&txn, rule.key_id).await?;
        let keys = super::lineage::with_descendants(&txn, rule.key_id).await?;
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::Limited, Expr::value(true))
            .filter(api_keys::Column::Id.is_in(keys.clone()))
            .exec(&txn)
            .await?;
        let (kind, target, selector) = columns(&rule.allowed);
        let now = Utc::now();
        let rows = keys.into_iter().map(|key_id| rules::ActiveModel {
            key_id: Set(key_id),
            chain: Set(rule.chain.clone()),
            rule: Set(kind.to_owned()),
            target: Set(target.clone()),
            selector: Set(selector.clone()),
            created_at: Set(now),
        });
        rules::Entity::insert_many(rows)
            .on_conflict(
                OnConflict::columns([
                    rules::Column::KeyId,
                    rules::Column::Chain,
                    rules::Column::Rule,
                    rules::Column::Target,
                    rules::Column::Selector,
                ])
                .do_nothing()
                .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        txn.commit().await?;
        self.keys.drop_all();
        Ok(())
    }

    /// Removes `rule` from its key's policy, and from those of the keys made from it;
    /// whether it was there.
    pub async fn remove_policy_rule(&self, rule: &PolicyRule) -> Result<bool> {
        let (kind, target, selector) = columns(&rule.allowed);
        let txn = self.begin_sea().await?;
        super::users::lock_owner_of(&txn, rule.key_id).await?;
        let keys = super::lineage::with_descendants(&txn, rule.key_id).await?;
        let removed = rules::Entity::delete_many()
            .filter(rules::Column::KeyId.is_in(keys))
            .filter(rules::Column::Chain.eq(rule.chain.as_str()))
            .filter(rules::Column::Rule.eq(kind))
            .filter(rules::Column::Target.eq(target))
            .filter(rules::Column::Selector.eq(selector))
            .exec(&txn)
            .await?
            .rows_affected;
        txn.commit().await?;
        Ok(removed > 0)
    }

    /// A key's policy: every rule, by chain, kind and account.
    pub async fn policy_rules(&self, key_id: Uuid) -> Result<Vec<PolicyRule>> {
        rules::Entity::find()
            .filter(rules::Column::KeyId.eq(key_id))
            .order_by_asc(rules::Column::Chain)
            .order_by_asc(rules::Column::Rule)
            .order_by_asc(rules::Column::Target)
            .order_by_asc(rules::Column::Selector)
            .all(self.sea())
            .await?
            .into_iter()
            .map(rule_of)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Selector, address};
    use walletops_domain::{Allowed, PolicyRule, WalletAddress};

    use crate::{Store, on_both_backends};

    /// Rules round-trip, a rule added twice is kept once, and the key is limited from then on.
    async fn rules_round_trip_and_limit_the_key(store: Store) {
        let user = store.insert_user("alice").await.expect("user");
        let key = store
            .insert_api_key(
                crate::NewApiKey {
                    user_id: user.id,
                    name: "agent".to_owned(),
                    prefix: "pol1".to_owned(),
                    secret_hash: "00".to_owned(),
                    expires_at: None,
                    created_by: None,
                    scopes: walletops_domain::Scopes::ALL,
                },
                10,
                chrono::Utc::now(),
            )
            .await
            .expect("stored")
            .expect("prefix free");
        let payee = WalletAddress::Evm(address!("0x00000000000000000000000000000000000000aa"));
        let rule = |allowed| PolicyRule {
            key_id: key.id,
            chain: "anvil".to_owned(),
            allowed,
        };
        let rules = [
            rule(Allowed::Chain),
            rule(Allowed::Recipient(payee)),
            rule(Allowed::Contract(
                payee,
                Some(Selector::from([0xa9, 0x05, 0x9c, 0xbb])),
            )),
            rule(Allowed::Contract(payee, None)),
            rule(Allowed::Spender(payee)),
        ];
        for r in rules.iter().chain(rules.iter()) {
            store.add_policy_rule(r).await.expect("added");
        }
        let read = store.policy_rules(key.id).await.expect("read");
        assert_eq!(read.len(), rules.len(), "{read:?}");
        for r in &rules {
            assert!(read.contains(r), "{r:?} in {read:?}");
        }
        let (found, _) = store
            .find_api_key_by_prefix("pol1")
            .await
            .expect("read")
            .expect("found");
        assert!(found.limited, "a key with a policy is judged");
        assert!(store.remove_policy_rule(&rules[2]).await.expect("removed"));
        assert!(!store.remove_policy_rule(&rules[2]).await.expect("removed"));
        assert_eq!(store.policy_rules(key.id).await.expect("read").len(), 4);
    }

    on_both_backends!(rules_round_trip_and_limit_the_key);
}
