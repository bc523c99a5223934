//! Tests of a record's life across the store, the idempotency claims and the broadcast log
//! (leases, holds, settling, keys answered from their records), on SQLite and PostgreSQL.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use std::collections::HashSet;

use walletops_domain::{ClaimState, OpenTransaction, Submission, TxStatus};
use walletops_store::{
    Leased, Store,
    testing::{new_record, open_records},
};

mod keys;

/// A submission answering for record `id` with `hash`.
fn submission(id: Uuid, hash: &str) -> Submission {
    Submission {
        id,
        hash: Some(hash.to_owned()),
        explorer_url: None,
        chain_name: "Anvil".to_owned(),
    }
}

/// One open transaction put in `store`, and its id.
/// Record `id` as stored now.
async fn current(store: &Store, id: Uuid) -> walletops_domain::OpenTransaction {
    store
        .open_transaction(id)
        .await
        .expect("read")
        .expect("stored")
}

async fn one_open_record(store: &Store) -> Uuid {
    open_records(store, 1, None).await[0]
}

/// `open_records(n, None)`, each record with a succeeded claim keyed by its id, made at
/// `at` for `retention`; and the records as read back.
async fn claimed_records(
    store: &Store,
    n: u64,
    at: DateTime<Utc>,
    retention: chrono::Duration,
) -> (Vec<Uuid>, Vec<OpenTransaction>) {
    let ids = open_records(store, n, None).await;
    let mut opens = Vec::new();
    for id in &ids {
        let open = store
            .open_transaction(*id)
            .await
            .expect("read")
            .expect("row");
        let claim = walletops_store::NewClaim {
            user: open.user_id,
            key: *id,
            path: "/v1/send".to_owned(),
            request_hash: "h".to_owned(),
            created_at: at,
            expires_at: at + retention,
            spends: Vec::new(),
        };
        store
            .insert_idempotency_key(
                store.db(),
                &claim,
                ClaimState::Succeeded,
                Some(*id),
                None,
                None,
            )
            .await
            .expect("claim");
        opens.push(open);
    }
    (ids, opens)
}

async fn a_core_follows_every_open_record_in_turn_when_they_outnumber_its_batch(store: Store) {
    let ids = open_records(&store, 5, None).await;
    let owner = Uuid::now_v7();
    let t0 = crate::clock::now() + chrono::Duration::seconds(5);
    let mut seen = std::collections::BTreeSet::new();
    // Sweeps of two records, each lease running out before the next sweep.
    for sweep in 0..3 {
        let now = t0 + chrono::Duration::seconds(10 * sweep);
        let leased = store
            .lease_open_transactions(owner, now, now + chrono::Duration::seconds(5), 2, &[])
            .await
            .expect("lease");
        assert_eq!(leased.records.len(), 2);
        seen.extend(leased.records.into_iter().map(|o| o.id));
    }
    assert_eq!(
        seen,
        ids.into_iter().collect(),
        "three sweeps of two reach all five"
    );
}

async fn a_record_its_request_holds_waits_for_the_hand_over_or_the_hold_to_run_out(store: Store) {
    let t0 = crate::clock::now();
    let at = |secs: i64| t0 + chrono::Duration::seconds(secs);
    let ids = open_records(&store, 3, Some(at(40))).await;
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    let lease = |owner, now: DateTime<Utc>| {
        store.lease_open_transactions(owner, now, now + chrono::Duration::seconds(60), 10, &[])
    };
    let leased = |l: Leased| l.records.into_iter().map(|o| o.id).collect::<Vec<_>>();
    assert!(lease(a, at(0)).await.expect("lease").records.is_empty());
    // The first request's send was taken: its note hands the record over. The second
    // request handed its record over without one.
    store
        .record_broadcasts(&ids[..1], at(1))
        .await
        .expect("note");
    store.release_hold(ids[1]).await.expect("release");
    assert_eq!(leased(lease(a, at(1)).await.expect("lease")), ids[..2]);
    // A later note of the monitor's own sends keeps its lease.
    store
        .record_broadcasts(&ids[..2], at(2))
        .await
        .expect("note");
    assert!(lease(b, at(2)).await.expect("lease").records.is_empty());
    // The third request died: its hold runs out, and a core takes the record then.
    assert_eq!(leased(lease(b, at(41)).await.expect("lease")), ids[2..]);
}

async fn a_flushed_broadcast_log_has_handed_its_records_over(store: Store) {
    let held = crate::clock::now() + chrono::Duration::seconds(60);
    let ids = open_records(&store, 3, Some(held)).await;
    let log =
        crate::transfers::BroadcastLog::start(store.clone(), std::time::Duration::from_secs(30));
    for id in &ids {
        log.note(*id);
    }
    log.flush().await;
    let now = crate::clock::now();
    let leased = store
        .lease_open_transactions(
            Uuid::now_v7(),
            now,
            now + chrono::Duration::seconds(5),
            10,
            &[],
        )
        .await
        .expect("lease");
    assert_eq!(
        leased.records.into_iter().map(|o| o.id).collect::<Vec<_>>(),
        ids
    );
}

async fn an_unreadable_row_does_not_keep_the_others_from_being_followed(store: Store) {
    let ids = open_records(&store, 2, None).await;
    walletops_store::testing::corrupt_record(&store, ids[0]).await;
    let (now, core) = (crate::clock::now(), Uuid::now_v7());
    for at in [now, now + chrono::Duration::seconds(10)] {
        let leased = store
            .lease_open_transactions(core, at, at + chrono::Duration::seconds(5), 10, &[])
            .await
            .expect("lease");
        assert_eq!(
            leased.records.into_iter().map(|o| o.id).collect::<Vec<_>>(),
            ids[1..]
        );
    }
    // Set aside, not kept by the core that could not read it.
    let (owner, until) = walletops_store::testing::lease_of(&store, ids[0]).await;
    assert_ne!(owner, Some(core));
    assert!(until.is_some_and(|t| t > now + chrono::Duration::minutes(5)));
}

async fn a_renewed_lease_keeps_a_record_from_other_cores_and_a_lost_one_is_not_taken_back(
    store: Store,
) {
    let id = one_open_record(&store).await;
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    let t0 = crate::clock::now() + chrono::Duration::seconds(5);
    let at = |secs: i64| t0 + chrono::Duration::seconds(secs);
    let lease = |owner, now, until| store.lease_open_transactions(owner, now, until, 10, &[]);
    let ids = |leased: Leased| leased.records.into_iter().map(|o| o.id).collect::<Vec<_>>();

    let first = lease(a, at(0), at(30)).await.expect("lease");
    assert!(first.taken_over.is_empty(), "nobody held it before");
    assert_eq!(ids(first), [id]);
    assert!(
        lease(b, at(10), at(40))
            .await
            .expect("lease")
            .records
            .is_empty()
    );
    // Core A is still following it at 20 s: it renews until 50 s.
    assert_eq!(
        store.renew_leases(a, &[id], at(50)).await.expect("renew"),
        1
    );
    assert!(
        lease(b, at(35), at(65))
            .await
            .expect("lease")
            .records
            .is_empty(),
        "without the renewal the lease would have run out at 30 s"
    );
    // A stops renewing; at 60 s B takes the record over, and A's late renewal keeps
    // nothing.
    let taken = lease(b, at(60), at(90)).await.expect("lease");
    assert_eq!(taken.taken_over, HashSet::from([id]));
    assert_eq!(ids(taken), [id]);
    assert_eq!(
        store.renew_leases(a, &[id], at(120)).await.expect("renew"),
        0
    );
    assert!(
        lease(a, at(80), at(110))
            .await
            .expect("lease")
            .records
            .is_empty()
    );
    // B cannot follow it and gives it up: its sweep's renewal keeps nothing, and it
    // skips the record for a while; A takes it over at once.
    store.release_lease(b, id).await.expect("give up");
    assert_eq!(
        store.renew_leases(b, &[id], at(120)).await.expect("renew"),
        0
    );
    let skipping = store
        .lease_open_transactions(b, at(81), at(111), 10, &[id])
        .await
        .expect("lease");
    assert!(skipping.records.is_empty());
    let back = lease(a, at(82), at(112)).await.expect("lease");
    assert_eq!(back.taken_over, HashSet::from([id]));
    // A core leasing its own record again takes nothing over.
    let again = lease(a, at(83), at(113)).await.expect("lease");
    assert!(again.taken_over.is_empty());
    assert_eq!(ids(again), [id]);
}

async fn a_worker_holding_an_older_copy_of_a_record_changes_nothing(store: Store) {
    let id = one_open_record(&store).await;
    let (first, stale) = (current(&store, id).await, current(&store, id).await);
    // One worker notes why the record waits, status and hash unchanged.
    let note = "the node gives no verdict".to_owned();
    assert!(
        store
            .settle_transaction(
                store.db(),
                &first,
                TxStatus::FeeCapped,
                None,
                Some(note.clone()),
                None
            )
            .await
            .expect("note")
    );
    // The other, from its older copy, would write back a history without that entry
    // and a status the record has left.
    assert!(
        !store
            .settle_transaction(
                store.db(),
                &stale,
                TxStatus::Submitted,
                None,
                Some("raised".to_owned()),
                None
            )
            .await
            .expect("stale write")
    );
    assert!(
        store
            .resign_transaction(
                store.db(),
                &stale,
                Some(0),
                None,
                vec![4],
                "0xab",
                TxStatus::Submitted,
                "re-signed".to_owned()
            )
            .await
            .is_err(),
        "a re-signing from the older copy is refused too"
    );
    let now = current(&store, id).await;
    assert_eq!(now.status, TxStatus::FeeCapped);
    let notes: Vec<_> = now
        .history
        .as_array()
        .expect("a list")
        .iter()
        .map(|c| c["note"].as_str())
        .collect();
    assert_eq!(notes.last(), Some(&Some(note.as_str())));
    assert_eq!(notes.len(), 2, "{notes:?}");
    // From the current copy, the next change goes through.
    assert!(
        store
            .settle_transaction(
                store.db(),
                &now,
                TxStatus::Confirmed,
                None,
                None,
                Some("0x01")
            )
            .await
            .expect("settle")
    );
}

walletops_store::on_both_backends!(
    a_core_follows_every_open_record_in_turn_when_they_outnumber_its_batch,
    a_record_its_request_holds_waits_for_the_hand_over_or_the_hold_to_run_out,
    a_flushed_broadcast_log_has_handed_its_records_over,
    an_unreadable_row_does_not_keep_the_others_from_being_followed,
    a_renewed_lease_keeps_a_record_from_other_cores_and_a_lost_one_is_not_taken_back,
    a_worker_holding_an_older_copy_of_a_record_changes_nothing,
);
