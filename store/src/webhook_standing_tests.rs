//! Tests of webhook endpoints' standing on both backends: revoking a key disables what its
//! line registered (deliveries kept), leases are fair and capped per endpoint, a failing
//! streak disables, and replays are capped.

use chrono::{TimeDelta, Utc};
use sea_orm::{ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter};
use uuid::Uuid;
use walletops_domain::{
    DeliveryState, DisabledReason, EndpointMaker, EventType, SealedKey, TxStatus, WebhookEndpoint,
};

use crate::{
    FailedAttempt, NewEndpoint, ReplayCap, Store, entities::webhook_deliveries, error::StoreError,
    on_both_backends, testing::insert_key,
};

async fn endpoint(store: &Store, user: Uuid, created_by: EndpointMaker) -> Uuid {
    let endpoint = WebhookEndpoint {
        id: Uuid::new_v4(),
        user_id: user,
        url: "https://hooks.example.com/h".parse().expect("url"),
        event_types: EventType::ALL.to_vec(),
        created_at: Utc::now(),
        created_by,
        disabled: None,
    };
    let sealed = SealedKey {
        nonce: vec![0; 12],
        ciphertext: vec![1; 48],
    };
    let new = NewEndpoint { endpoint, sealed };
    store
        .insert_endpoint(new, 20, |_| true)
        .await
        .expect("endpoint")
        .id
}

/// `n` deliveries to `endpoint`, each of its own transaction, in `state`, due now.
async fn deliveries(store: &Store, user: Uuid, endpoint: Uuid, n: usize, state: DeliveryState) {
    let now = Utc::now() - TimeDelta::seconds(1);
    for _ in 0..n {
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        webhook_deliveries::Entity::insert(webhook_deliveries::ActiveModel {
            id: Set(Uuid::now_v7()),
            endpoint_id: Set(endpoint),
            user_id: Set(user),
            event_seq: Set(seq),
            transaction_id: Set(Uuid::new_v4()),
            event_type: Set(TxStatus::Confirmed.event_type()),
            state: Set(state.as_str().to_owned()),
            attempts: Set(0),
            next_attempt_at: Set(now),
            retry_until: Set(now + TimeDelta::hours(1)),
            lease_owner: Set(None),
            lease_until: Set(None),
            last_status: Set(None),
            last_error: Set(None),
            last_attempt_at: Set(None),
            delivered_at: Set(None),
            created_at: Set(now),
            replayed_at: Set(None),
        })
        .exec_without_returning(&store.db)
        .await
        .expect("delivery");
    }
}

static SEQ: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1);

async fn lease(store: &Store, owner: Uuid, limit: u64, per_endpoint: u64) -> Vec<Uuid> {
    let now = Utc::now();
    let leased = store
        .lease_deliveries(owner, now, now + TimeDelta::minutes(1), limit, per_endpoint)
        .await
        .expect("leased");
    leased.iter().map(|d| d.endpoint_id).collect()
}

/// Revoking a key disables, in its transaction, the endpoints its line registered (the key
/// revoked and the keys made from it), not the owner's nor another line's; their pending
/// deliveries stay, leased no more until the owner enables the endpoint again.
async fn revoking_a_key_disables_its_lines_endpoints(store: Store) {
    let user = store.insert_user("alice").await.expect("user").id;
    let maker = insert_key(&store, user, "mkr1", None).await;
    let child = insert_key(&store, user, "chd1", Some(maker)).await;
    let other = insert_key(&store, user, "oth1", None).await;
    let by_child = endpoint(&store, user, EndpointMaker::Key(child)).await;
    let by_owner = endpoint(&store, user, EndpointMaker::Owner).await;
    let by_other = endpoint(&store, user, EndpointMaker::Key(other)).await;
    for e in [by_child, by_owner, by_other] {
        deliveries(&store, user, e, 1, DeliveryState::Pending).await;
    }
    store
        .revoke_api_key(user, "mkr1", None, Utc::now())
        .await
        .expect("revoked")
        .expect("found");
    let disabled = store.endpoint(user, by_child).await.expect("endpoint");
    assert_eq!(
        disabled.disabled.map(|d| d.reason),
        Some(DisabledReason::KeyRevoked)
    );
    for e in [by_owner, by_other] {
        assert!(
            store
                .endpoint(user, e)
                .await
                .expect("endpoint")
                .disabled
                .is_none()
        );
    }
    let kept = store
        .deliveries(user, by_child, Some(DeliveryState::Pending), 10)
        .await
        .expect("deliveries");
    assert_eq!(kept.len(), 1, "pending deliveries are kept");
    let owner = Uuid::new_v4();
    let mut leased = lease(&store, owner, 10, 4).await;
    leased.sort();
    let mut expected = vec![by_owner, by_other];
    expected.sort();
    assert_eq!(
        leased, expected,
        "nothing is leased for a disabled endpoint"
    );
    store
        .enable_endpoint(user, by_child)
        .await
        .expect("enabled");
    assert_eq!(lease(&store, owner, 10, 4).await, [by_child]);
}

/// Leases take every endpoint's oldest due delivery before any endpoint's second, and never
/// put more than the cap of one endpoint's deliveries in flight, whichever core holds them.
async fn leases_are_round_robin_and_capped_per_endpoint(store: Store) {
    let user = store.insert_user("bob").await.expect("user").id;
    let busy = endpoint(&store, user, EndpointMaker::Owner).await;
    let quiet = endpoint(&store, user, EndpointMaker::Owner).await;
    deliveries(&store, user, busy, 10, DeliveryState::Pending).await;
    deliveries(&store, user, quiet, 2, DeliveryState::Pending).await;
    let (core_a, core_b) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(lease(&store, core_a, 2, 3).await, [busy, quiet]);
    let mut second = lease(&store, core_b, 10, 3).await;
    second.sort();
    let mut expected = vec![busy, busy, quiet];
    expected.sort();
    assert_eq!(
        second, expected,
        "three of busy's in flight, over two cores"
    );
    assert!(
        lease(&store, core_a, 10, 3).await.is_empty(),
        "busy is full"
    );
    let in_flight = webhook_deliveries::Entity::find()
        .filter(webhook_deliveries::Column::EndpointId.eq(busy))
        .filter(webhook_deliveries::Column::LeaseOwner.is_not_null())
        .one(&store.db)
        .await
        .expect("read")
        .expect("one in flight");
    let holder = in_flight.lease_owner.expect("leased");
    store
        .delivered(holder, in_flight.id, busy, 200)
        .await
        .expect("delivered");
    assert_eq!(
        lease(&store, core_a, 10, 3).await,
        [busy],
        "a slot refilled"
    );
}

/// An endpoint whose attempts fail from some moment on is disabled once that moment is
/// further back than the window; a delivery taken in between ends the streak.
async fn a_failing_streak_disables_and_a_delivery_ends_it(store: Store) {
    let user = store.insert_user("carol").await.expect("user").id;
    let e = endpoint(&store, user, EndpointMaker::Owner).await;
    deliveries(&store, user, e, 3, DeliveryState::Pending).await;
    let core = Uuid::new_v4();
    let attempt = |disable_if_failing_since| FailedAttempt {
        status: Some(500),
        error: "the endpoint answered 500".to_owned(),
        next_attempt_at: Utc::now(),
        disable_if_failing_since,
    };
    let now = Utc::now();
    let lease_one = || async {
        store
            .lease_deliveries(core, Utc::now(), Utc::now() + TimeDelta::minutes(1), 1, 4)
            .await
            .expect("leased")
            .remove(0)
    };
    let d = lease_one().await;
    let noted = store
        .attempt_failed(core, &d, attempt(now - TimeDelta::hours(1)))
        .await
        .expect("noted");
    assert!(!noted.endpoint_disabled && !noted.dead);
    let d = lease_one().await;
    store
        .delivered(core, d.id, e, 200)
        .await
        .expect("delivered");
    // A streak that began before the window would have disabled it: it was ended.
    let d = lease_one().await;
    let noted = store
        .attempt_failed(core, &d, attempt(now))
        .await
        .expect("noted");
    assert!(!noted.endpoint_disabled, "the streak began after `now`");
    let d = lease_one().await;
    let noted = store
        .attempt_failed(core, &d, attempt(Utc::now()))
        .await
        .expect("noted");
    assert!(noted.endpoint_disabled);
    let read = store.endpoint(user, e).await.expect("endpoint");
    assert_eq!(
        read.disabled.map(|d| d.reason),
        Some(DisabledReason::Failing)
    );
}

/// A replay takes at most the per-call cap, and is refused with the time to wait once the
/// user's replays of the hour would pass the hourly cap; a refused replay changes nothing.
async fn replays_are_capped_per_call_and_per_hour(store: Store) {
    let user = store.insert_user("dave").await.expect("user").id;
    let e = endpoint(&store, user, EndpointMaker::Owner).await;
    deliveries(&store, user, e, 5, DeliveryState::Dead).await;
    let cap = ReplayCap {
        per_call: 2,
        per_hour: 3,
        now: Utc::now(),
    };
    let until = Utc::now() + TimeDelta::hours(1);
    assert_eq!(
        store
            .replay_deliveries(user, e, &[], until, cap)
            .await
            .expect("replayed"),
        2
    );
    let refused = store.replay_deliveries(user, e, &[], until, cap).await;
    let Err(StoreError::ReplayCapped { limit, retry_after }) = refused else {
        panic!("not capped: {refused:?}");
    };
    assert_eq!(limit, 3);
    assert!(
        retry_after > std::time::Duration::from_secs(3500),
        "{retry_after:?}"
    );
    let dead = store
        .deliveries(user, e, Some(DeliveryState::Dead), 10)
        .await
        .expect("dead");
    assert_eq!(dead.len(), 3, "the refused replay changed nothing");
    assert_eq!(
        store
            .replay_deliveries(user, e, &[dead[0].id], until, cap)
            .await
            .expect("replayed"),
        1
    );
    let an_hour_on = ReplayCap {
        now: Utc::now() + TimeDelta::minutes(61),
        ..cap
    };
    assert_eq!(
        store
            .replay_deliveries(user, e, &[], until, an_hour_on)
            .await
            .expect("replayed"),
        2
    );
}

on_both_backends!(
    revoking_a_key_disables_its_lines_endpoints,
    leases_are_round_robin_and_capped_per_endpoint,
    a_failing_streak_disables_and_a_delivery_ends_it,
    replays_are_capped_per_call_and_per_hour,
);
