//! A key's line: the keys made through `ApiKeyService` from one key the owner made. A key
//! made with a key is born with its maker's limits, policy and limited mark (copied in the
//! transaction that stores it), and the whole line shares each daily budget: what any of
//! its keys reserves counts against every other's. Writes of a line reserve one at a time,
//! under the lock of the line's first key's row.

use std::collections::HashMap;

use chrono::Utc;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
    QuerySelect, sea_query::Query,
};
use uuid::Uuid;

use super::{
    Conn,
    entities::{api_keys, key_policy_rules as rules, spend_limits as limits},
};
use crate::error::Result;

/// The line of key `m`: its first key's id.
pub(super) fn lineage_of(m: &api_keys::Model) -> Uuid {
    m.lineage_id.unwrap_or(m.id)
}

/// Whether `column` (a key id) names a key of line `lineage`: the line's first key, or one
/// made from it.
pub(super) fn of_line(column: impl ColumnTrait, lineage: Uuid) -> sea_orm::Condition {
    let made_from = Query::select()
        .column(api_keys::Column::Id)
        .from(api_keys::Entity)
        .and_where(api_keys::Column::LineageId.eq(lineage))
        .to_owned();
    sea_orm::Condition::any()
        .add(column.eq(lineage))
        .add(column.in_subquery(made_from))
}

/// `key` and every key made from it, through any number of keys (revoked ones too), read
/// in `conn`: what the owner sets on a key holds for the keys made from it.
pub(super) async fn with_descendants<C: ConnectionTrait>(conn: &C, key: Uuid) -> Result<Vec<Uuid>> {
    let mut all = vec![key];
    let mut generation = vec![key];
    while !generation.is_empty() {
        generation = api_keys::Entity::find()
            .select_only()
            .column(api_keys::Column::Id)
            .filter(api_keys::Column::CreatedBy.is_in(generation))
            .into_tuple::<Uuid>()
            .all(conn)
            .await?;
        generation.retain(|id| !all.contains(id));
        all.extend(&generation);
    }
    Ok(all)
}

/// Gives key `child`, just stored in `conn`'s transaction, what its maker `maker` is held
/// to: every spend limit, every policy rule and the limited mark.
pub(super) async fn inherit<C: ConnectionTrait>(
    conn: &C,
    maker: &api_keys::Model,
    child: Uuid,
) -> Result<()> {
    let now = Utc::now();
    for m in limits::Entity::find()
        .filter(limits::Column::KeyId.eq(maker.id))
        .all(conn)
        .await?
    {
        limits::ActiveModel {
            key_id: Set(child),
            created_at: Set(now),
            updated_at: Set(now),
            ..m.into()
        }
        .insert(conn)
        .await?;
    }
    for m in rules::Entity::find()
        .filter(rules::Column::KeyId.eq(maker.id))
        .all(conn)
        .await?
    {
        rules::ActiveModel {
            key_id: Set(child),
            created_at: Set(now),
            ..m.into()
        }
        .insert(conn)
        .await?;
    }
    Ok(())
}

/// The line of each of `keys`, read in `conn`: its first key's id (a key without a row is a
/// line of its own).
pub(super) async fn lines_of<C: ConnectionTrait>(
    conn: &C,
    keys: &[Uuid],
) -> Result<HashMap<Uuid, Uuid>> {
    let mut lines: HashMap<Uuid, Uuid> = keys.iter().map(|&k| (k, k)).collect();
    for m in api_keys::Entity::find()
        .filter(api_keys::Column::Id.is_in(keys.iter().copied()))
        .all(conn)
        .await?
    {
        lines.insert(m.id, lineage_of(&m));
    }
    Ok(lines)
}

impl super::Store {
    /// The line of each of `keys`, each line's first key's row locked in `conn`'s
    /// transaction (PostgreSQL; SQLite's writer lock serializes it there), in one order (by
    /// id): the reservations of a line's keys are counted one write after the other, and a
    /// transaction reserving for writes of several lines (a signing batch) never waits on
    /// another that locked the same lines in another order.
    pub async fn lock_lines<C: Conn>(
        &self,
        conn: &C,
        keys: &[Uuid],
    ) -> Result<HashMap<Uuid, Uuid>> {
        let conn = conn.sea();
        let lines = lines_of(conn, keys).await?;
        let ordered: std::collections::BTreeSet<Uuid> = lines.values().copied().collect();
        for line in ordered {
            api_keys::Entity::find_by_id(line)
                .select_only()
                .column(api_keys::Column::Id)
                .lock_exclusive()
                .into_tuple::<Uuid>()
                .one(conn)
                .await?;
        }
        Ok(lines)
    }
}

/// Whether key `key_id` is `ancestor` or was made, through any number of keys, with it, read
/// in `conn`.
pub(super) async fn descends_from<C: ConnectionTrait>(
    conn: &C,
    key_id: Uuid,
    ancestor: Uuid,
) -> Result<bool> {
    let mut at = Some(key_id);
    // A line is a tree: each step goes one maker up, and ends at a key the owner made.
    while let Some(id) = at {
        if id == ancestor {
            return Ok(true);
        }
        at = api_keys::Entity::find_by_id(id)
            .one(conn)
            .await?
            .and_then(|m| m.created_by);
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, U256};
    use chrono::Utc;
    use uuid::Uuid;
    use walletops_domain::{Allowed, PolicyRule, Spend, SpendLimit, WalletAddress};

    use crate::{Store, error::StoreError, on_both_backends, testing::insert_key};

    /// A key made with a key is born with its maker's limits and rules, and the line shares
    /// one budget; a key revokes only its own line's keys, and takes the keys made from it
    /// along.
    async fn a_line_inherits_shares_and_is_revoked_downwards(store: Store) {
        let user = store.insert_user("alice").await.expect("user").id;
        let maker = insert_key(&store, user, "mkr1", None).await;
        store
            .set_spend_limit(&SpendLimit {
                key_id: maker,
                chain: "anvil".to_owned(),
                asset: "native".to_owned(),
                max_per_transaction: None,
                daily_budget: Some(U256::from(10u64)),
                approval_above: Some(U256::from(4u64)),
            })
            .await
            .expect("limit");
        let rule = PolicyRule {
            key_id: maker,
            chain: "anvil".to_owned(),
            allowed: Allowed::Recipient(WalletAddress::Evm(Address::repeat_byte(1))),
        };
        store.add_policy_rule(&rule).await.expect("rule");
        let child = insert_key(&store, user, "chd1", Some(maker)).await;
        let grandchild = insert_key(&store, user, "gch1", Some(child)).await;
        let day = Utc::now() - chrono::Duration::hours(24);
        let limits = store.spend_limits(grandchild, day).await.expect("limits");
        assert_eq!(limits[0].limit.approval_above, Some(U256::from(4u64)));
        let rules = store.policy_rules(grandchild).await.expect("rules");
        assert_eq!(rules[0].allowed, rule.allowed);
        // What the owner sets on a key later holds for the keys made from it.
        let later = SpendLimit {
            key_id: child,
            chain: "base".to_owned(),
            asset: "native".to_owned(),
            max_per_transaction: Some(U256::from(1u64)),
            daily_budget: None,
            approval_above: None,
        };
        store.set_spend_limit(&later).await.expect("limit");
        let limits = store.spend_limits(grandchild, day).await.expect("limits");
        assert_eq!(limits.len(), 2, "{limits:?}");
        assert_eq!(
            store.spend_limits(maker, day).await.expect("limits").len(),
            1
        );
        store.remove_policy_rule(&rule).await.expect("removed");
        assert!(
            store
                .policy_rules(grandchild)
                .await
                .expect("rules")
                .is_empty()
        );
        let (read, _) = store
            .find_api_key_by_prefix("gch1")
            .await
            .expect("read")
            .expect("found");
        assert!(read.limited && read.created_by == Some(child));
        let spend = |key_id| Spend {
            key_id,
            chain: "anvil".to_owned(),
            asset: "native".to_owned(),
            amount: U256::from(3u64),
        };
        for k in [child, maker] {
            store
                .insert_reservation(store.db(), &spend(k), Uuid::new_v4())
                .await
                .expect("reserved");
        }
        let lineage = store
            .lock_lines(store.db(), &[grandchild])
            .await
            .expect("line")[&grandchild];
        assert_eq!(lineage, maker);
        for k in [maker, child, grandchild] {
            let standing = store.spend_limits(k, day).await.expect("limits");
            assert_eq!(standing[0].spent_24h, U256::from(6u64), "one budget");
        }
        // Another line of the user's is apart.
        let other = insert_key(&store, user, "oth1", None).await;
        assert_eq!(
            store.lock_lines(store.db(), &[other]).await.expect("line")[&other],
            other
        );
        for (target, by) in [("mkr1", child), ("oth1", child), ("chd1", grandchild)] {
            let refused = store
                .revoke_api_key(user, target, Some(by), Utc::now())
                .await;
            assert!(matches!(refused, Err(StoreError::NotInLine)), "{target}");
        }
        let revoked = store
            .revoke_api_key(user, "chd1", Some(child), Utc::now())
            .await
            .expect("revoked")
            .expect("found");
        assert!(revoked.revoked_at.is_some());
        let (last, _) = store
            .find_api_key_by_prefix("gch1")
            .await
            .expect("read")
            .expect("found");
        assert!(last.revoked_at.is_some(), "taken along");
        let (first, _) = store
            .find_api_key_by_prefix("mkr1")
            .await
            .expect("read")
            .expect("found");
        assert!(first.revoked_at.is_none(), "its maker lives on");
    }

    /// Keys made with keys before lines existed are given their line and what their makers
    /// are held to when the migration runs, makers first.
    async fn the_migration_gives_earlier_keys_their_line(store: Store) {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, sea_query::Expr};
        use walletops_migrations::MigratorTrait;

        use crate::entities::{api_keys, spend_limits};

        let user = store.insert_user("bob").await.expect("user").id;
        let maker = insert_key(&store, user, "old1", None).await;
        let child = insert_key(&store, user, "old2", Some(maker)).await;
        let grandchild = insert_key(&store, user, "old3", Some(child)).await;
        store
            .set_spend_limit(&SpendLimit {
                key_id: maker,
                chain: "anvil".to_owned(),
                asset: "native".to_owned(),
                max_per_transaction: Some(U256::from(7u64)),
                daily_budget: None,
                approval_above: None,
            })
            .await
            .expect("limit");
        // As they were made before: nothing of their maker's, each a line of its own.
        let made = [child, grandchild];
        spend_limits::Entity::delete_many()
            .filter(spend_limits::Column::KeyId.is_in(made))
            .exec(&store.db)
            .await
            .expect("limits gone");
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::Limited, Expr::value(false))
            .filter(api_keys::Column::Id.is_in(made))
            .exec(&store.db)
            .await
            .expect("unmarked");
        // Back to before the lineage migration, through any that came after it.
        let undone = walletops_migrations::Migrator::migrations()
            .iter()
            .rev()
            .position(|m| m.name() == "m20261205_000022_key_lineage")
            .expect("the lineage migration")
            + 1;
        walletops_migrations::Migrator::down(&store.db, Some(undone as u32))
            .await
            .expect("down");
        walletops_migrations::Migrator::up(&store.db, None)
            .await
            .expect("up");
        assert_eq!(
            store
                .lock_lines(store.db(), &[grandchild])
                .await
                .expect("line")[&grandchild],
            maker
        );
        let day = Utc::now() - chrono::Duration::hours(24);
        let limits = store.spend_limits(grandchild, day).await.expect("limits");
        assert_eq!(limits[0].limit.max_per_transaction, Some(U256::from(7u64)));
        let (read, _) = store
            .find_api_key_by_prefix("old3")
            .await
            .expect("read")
            .expect("found");
        assert!(read.limited);
    }

    on_both_backends!(
        a_line_inherits_shares_and_is_revoked_downwards,
        the_migration_gives_earlier_keys_their_line,
    );
}
