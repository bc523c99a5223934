//! Idempotency keys that follow their records: failed with them, answered from them again
//! when they are found mined after all, kept while they may still be.

use super::*;

async fn a_failed_record_mined_after_all_has_its_key_answer_from_it(store: Store) {
    let ids = open_records(&store, 1, None).await;
    let open = super::current(&store, ids[0]).await;
    let now = crate::clock::now();
    let claim = walletops_store::NewClaim {
        user: open.user_id,
        key: Uuid::new_v4(),
        path: "/v1/send".to_owned(),
        request_hash: "h".to_owned(),
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
        spends: Vec::new(),
    };
    let failed = "refused".to_owned();
    store
        .insert_idempotency_key(
            store.db(),
            &claim,
            ClaimState::Failed,
            Some(open.id),
            None,
            Some(failed),
        )
        .await
        .expect("claim");
    // The request that signed the record, answering late, touches neither ending of its
    // key: the record's own transactions set it.
    let keys =
        crate::idempotency::Idempotency::new(store.clone(), std::time::Duration::from_secs(3600));
    let ticket = crate::idempotency::Ticket::new(claim.clone());
    ticket.claimed_with(open.id, submission(open.id, "0x01"));
    let state = async || {
        store
            .find_idempotency_key(claim.user, claim.key, now, chrono::Duration::hours(1))
            .await
            .expect("read")
            .expect("claim")
    };
    keys.succeed(&ticket, &submission(open.id, "0x02"))
        .await
        .expect("succeed");
    assert_eq!(
        state().await.state,
        ClaimState::Failed,
        "a late success unfails nothing"
    );
    assert!(
        store
            .settle_transaction(store.db(), &open, TxStatus::Failed, None, None, None)
            .await
            .expect("fail")
    );
    let ended = super::current(&store, open.id).await;
    let hash = ended.hashes[0].to_string();
    assert!(
        store
            .settle_ended(&ended, TxStatus::Confirmed, None, "mined".to_owned(), &hash)
            .await
            .expect("settle")
    );
    let stored = state().await;
    // Succeeded with no response stored: a replay answers from the record.
    assert_eq!(stored.state, ClaimState::Succeeded);
    assert_eq!(stored.response, None);
    assert_eq!(stored.transaction_id, Some(open.id));
    let refused = crate::error::WalletOpsError::SendFailed("refused".to_owned());
    assert!(keys.fail(&ticket, &refused).await.expect("fail"));
    let after = state().await;
    assert_eq!(
        after.state,
        ClaimState::Succeeded,
        "a late refusal undoes no correction"
    );
    assert_eq!(after.response, None);
}

async fn a_refusal_fails_no_record_that_was_sent_meanwhile(store: Store) {
    let now = crate::clock::now();
    let (ids, opens) = claimed_records(&store, 2, now, chrono::Duration::hours(1)).await;
    // The second was sent with success by a monitor while its request's own send was
    // being refused.
    store.record_broadcasts(&ids[1..], now).await.expect("note");
    let fail = async |open: &OpenTransaction| {
        store
            .fail_transaction(
                store.db(),
                open,
                TxStatus::Failed,
                "refused".to_owned(),
                Some("refused".to_owned()),
            )
            .await
            .expect("fail")
    };
    let state = async |id: Uuid| {
        let claim = store
            .find_idempotency_key(opens[0].user_id, id, now, chrono::Duration::hours(1))
            .await
            .expect("read")
            .expect("claim");
        let status = store
            .find_transaction(opens[0].user_id, id)
            .await
            .expect("read")
            .expect("row")
            .status;
        (claim.state, status)
    };
    assert!(fail(&opens[0]).await);
    assert_eq!(state(ids[0]).await, (ClaimState::Failed, TxStatus::Failed));
    assert!(!fail(&opens[1]).await, "a sent record is the monitor's");
    assert_eq!(
        state(ids[1]).await,
        (ClaimState::Succeeded, TxStatus::Submitted)
    );
}

async fn a_key_outlives_its_retention_until_its_record_has_been_settled_as_long(store: Store) {
    let retention = chrono::Duration::hours(1);
    let t0 = crate::clock::now();
    let (ids, opens) = claimed_records(&store, 3, t0, retention).await;
    // The first settled at once, the second and third fail later; the third's freed
    // nonce was given to a send that is still open (a nonce filler would hold it alike).
    let settle = async |i: usize, status, at: DateTime<Utc>| {
        let open: &OpenTransaction = &opens[i];
        assert!(
            store
                .settle_transaction(store.db(), open, status, None, None, None)
                .await
                .expect("settle")
        );
        walletops_store::testing::date_record(&store, open.id, at).await;
    };
    settle(0, TxStatus::Confirmed, t0).await;
    settle(1, TxStatus::Failed, t0 + chrono::Duration::minutes(50)).await;
    settle(2, TxStatus::Failed, t0 + chrono::Duration::minutes(50)).await;
    let reuse = new_record(
        opens[2].user_id,
        opens[2].wallet_id,
        opens[2].from,
        opens[2].nonce.expect("a nonce"),
    );
    let reuse = store
        .insert_transaction(store.db(), reuse)
        .await
        .expect("a send at the freed nonce");
    let kept = async |at: DateTime<Utc>| {
        store
            .purge_idempotency_keys(at, retention)
            .await
            .expect("purge");
        let mut kept = Vec::new();
        for id in &ids {
            if store
                .find_idempotency_key(opens[0].user_id, *id, t0, retention)
                .await
                .expect("read")
                .is_some()
            {
                kept.push(*id);
            }
        }
        kept
    };
    // Past the keys' retention: only the key of the record settled as long goes.
    assert_eq!(kept(t0 + chrono::Duration::minutes(61)).await, ids[1..]);
    // Past the second's retention from its ending: the open send at its nonce still
    // holds the third.
    assert_eq!(kept(t0 + chrono::Duration::minutes(111)).await, ids[2..]);
    assert!(
        store
            .settle_transaction(store.db(), &reuse, TxStatus::Confirmed, None, None, None)
            .await
            .expect("settle the send")
    );
    assert!(kept(t0 + chrono::Duration::minutes(111)).await.is_empty());
}

walletops_store::on_both_backends!(
    a_failed_record_mined_after_all_has_its_key_answer_from_it,
    a_refusal_fails_no_record_that_was_sent_meanwhile,
    a_key_outlives_its_retention_until_its_record_has_been_settled_as_long,
);
