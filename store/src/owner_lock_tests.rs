//! The owner's lock around changes of a key's limits and policy, and frozen key lines.

use alloy::primitives::U256;
use chrono::Utc;
use sea_orm::{
    ColumnTrait as _, ConnectionTrait as _, EntityTrait as _, PaginatorTrait as _,
    QueryFilter as _, Statement,
};
use uuid::Uuid;

use crate::{
    Store,
    entities::transaction_events as events,
    testing::{Backend, on_store},
};
use walletops_domain::{EventType, Spend, SpendLimit};

async fn key(store: &Store, user: Uuid, prefix: &str) -> walletops_domain::ApiKey {
    store
        .insert_api_key(
            crate::NewApiKey {
                user_id: user,
                name: "agent".to_owned(),
                prefix: prefix.to_owned(),
                secret_hash: "00".to_owned(),
                expires_at: None,
                created_by: None,
                scopes: walletops_domain::Scopes::ALL,
            },
            10,
            Utc::now(),
        )
        .await
        .expect("stored")
        .expect("prefix free")
}

fn limit(key_id: Uuid) -> SpendLimit {
    SpendLimit {
        key_id,
        chain: "anvil".to_owned(),
        asset: "native".to_owned(),
        max_per_transaction: Some(U256::from(5u64)),
        daily_budget: None,
        approval_above: None,
    }
}

/// A limit set while the owner is locked (as the making of a key from it locks it) waits
/// for the lock: the key made meanwhile copies the limits before or after, never without.
#[tokio::test]
async fn a_limit_set_waits_for_the_owners_lock() {
    on_store(Backend::Postgres, |store| async move {
        let user = store.insert_user("lock").await.expect("user");
        let made = key(&store, user.id, "lck1").await;
        let txn = store.begin_sea().await.expect("txn");
        crate::users::lock_user(&txn, user.id)
            .await
            .expect("locked");
        let setter = store.clone();
        let set = tokio::spawn(async move { setter.set_spend_limit(&limit(made.id)).await });
        // The setter's statement waits on the user's row lock: seen by the server itself.
        let waiting = "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                       AND query LIKE 'UPDATE \"users\"%' AND datname = current_database()";
        let mut seen = false;
        for _ in 0..500 {
            let row = store
                .sea()
                .query_one_raw(Statement::from_string(
                    sea_orm::DatabaseBackend::Postgres,
                    waiting,
                ))
                .await
                .expect("read")
                .expect("a row");
            if row.try_get::<i64>("", "n").expect("count") > 0 {
                seen = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(
            seen,
            "the limit was set without waiting for the owner's lock"
        );
        assert!(!set.is_finished());
        txn.commit().await.expect("released");
        set.await.expect("joined").expect("set");
        assert_eq!(
            store
                .spend_limits(made.id, Utc::now())
                .await
                .expect("limits")
                .len(),
            1
        );
    })
    .await;
}

/// A line freezes once (the first reason stands), with one `key.frozen` event, and only its
/// owner unfreezes it.
async fn a_line_freezes_once_and_its_owner_unfreezes_it(store: Store) {
    let user = store.insert_user("frozen").await.expect("user");
    let made = key(&store, user.id, "frz1").await;
    let tx = Uuid::now_v7();
    let spend = Spend {
        key_id: made.id,
        chain: "anvil".to_owned(),
        asset: "native".to_owned(),
        amount: U256::from(1u64),
    };
    store
        .insert_reservation(store.db(), &spend, tx)
        .await
        .expect("reserved");
    let charged = Spend {
        amount: U256::from(9u64),
        ..spend.clone()
    };
    store
        .charge_executed(store.db(), tx, &charged)
        .await
        .expect("charged");
    let reserved = store.reservations_of(store.db(), tx).await.expect("read");
    assert_eq!(reserved, vec![charged]);
    let now = Utc::now();
    for (reason, froze) in [("first", true), ("second", false)] {
        let frozen = store
            .freeze_line(store.db(), made.id, ("anvil", reason, tx), now)
            .await
            .expect("froze");
        assert_eq!(frozen, froze, "{reason}");
    }
    let line = store
        .frozen_line(made.lineage_id)
        .await
        .expect("read")
        .expect("frozen");
    assert_eq!((line.reason.as_str(), line.transaction_id), ("first", tx));
    let told = crate::entities::transaction_events::Entity::find()
        .filter(events::Column::Subject.eq(EventType::KeyFrozen.subject()))
        .filter(events::Column::TransactionId.eq(made.lineage_id))
        .count(store.sea())
        .await
        .expect("counted");
    assert_eq!(told, 1, "one key.frozen");
    let stranger = store.insert_user("stranger").await.expect("user");
    assert!(
        !store
            .unfreeze_line(stranger.id, made.lineage_id)
            .await
            .expect("ran")
    );
    assert!(
        store
            .unfreeze_line(user.id, made.lineage_id)
            .await
            .expect("ran")
    );
    assert!(
        store
            .frozen_line(made.lineage_id)
            .await
            .expect("read")
            .is_none()
    );
}

crate::on_both_backends!(a_line_freezes_once_and_its_owner_unfreezes_it);
