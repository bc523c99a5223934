//! The deposit store's tests on both databases: one core scans a chain, a credit is
//! recorded once, reverted and found again, confirmed, and told in that order.

use chrono::Utc;
use uuid::Uuid;
use walletops_domain::{Deposit, DepositState};

use crate::{DepositFilter, ScanStep};

use crate::testing::{Backend, on_store};

fn deposit(chain: &str, block: u64, rank: u32) -> Deposit {
    let now = Utc::now();
    Deposit {
        id: Deposit::id_of(chain, "0xabc", "native", "0x01", rank),
        user_id: Uuid::nil(),
        wallet_id: Uuid::nil(),
        chain: chain.to_owned(),
        address: "0x01".to_owned(),
        tx_hash: "0xabc".to_owned(),
        asset: "native".to_owned(),
        amount: "5".to_owned(),
        from: None,
        block,
        block_hash: Some("0xb1".to_owned()),
        state: DepositState::Pending,
        ignored_reason: None,
        created_at: now,
        updated_at: now,
    }
}

async fn one_core_scans_a_chain_and_a_credit_is_recorded_once(b: Backend) {
    on_store(b, |store| async move {
        let (a, other) = (Uuid::now_v7(), Uuid::now_v7());
        let now = Utc::now();
        let until = now + chrono::TimeDelta::seconds(30);
        assert_eq!(
            store
                .lease_deposit_scan("anvil", a, now, until)
                .await
                .expect("lease"),
            Some(None)
        );
        assert_eq!(
            store
                .lease_deposit_scan("anvil", other, now, until)
                .await
                .expect("lease"),
            None
        );
        let step = || ScanStep {
            deposits: vec![deposit("anvil", 7, 0), deposit("anvil", 7, 0)],
            blocks: vec![(7, "0xb1".to_owned())],
            next_block: Some(8),
            ..ScanStep::default()
        };
        assert!(store.record_scan("anvil", a, step()).await.expect("step"));
        assert!(store.record_scan("anvil", a, step()).await.expect("again"));
        // The other core's step is refused: the lease is not its.
        assert!(
            !store
                .record_scan("anvil", other, step())
                .await
                .expect("refused")
        );
        let all = store
            .list_deposits(Uuid::nil(), &DepositFilter::default(), 10)
            .await
            .expect("list");
        assert_eq!(all.len(), 1);
        assert_eq!(
            store
                .lease_deposit_scan("anvil", a, now, until)
                .await
                .expect("kept"),
            Some(Some(8))
        );
        // Reverted from block 7, then found again: back to pending, the same deposit.
        assert_eq!(
            store
                .revert_deposits_from("anvil", a, 7)
                .await
                .expect("revert"),
            Some(1)
        );
        assert!(
            store
                .deposit_blocks("anvil", 0)
                .await
                .expect("blocks")
                .is_empty()
        );
        assert!(store.record_scan("anvil", a, step()).await.expect("back"));
        assert_eq!(
            store
                .confirm_deposits("anvil", Some(7), None)
                .await
                .expect("confirm"),
            1
        );
        let d = store
            .get_deposit(Uuid::nil(), all[0].id)
            .await
            .expect("get")
            .expect("one");
        assert_eq!(d.state, DepositState::Confirmed);
        store
            .sequence_events(std::time::Duration::from_secs(60))
            .await
            .expect("numbering");
        let told: Vec<DepositState> = store
            .deposit_events_after(Uuid::nil(), 0, None, 10)
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.state)
            .collect();
        assert_eq!(
            told,
            [
                DepositState::Pending,
                DepositState::Reverted,
                DepositState::Pending,
                DepositState::Confirmed
            ]
        );
        // Transaction watchers see none of them.
        assert!(
            store
                .events_after(Uuid::nil(), 0, (None, None), 10)
                .await
                .expect("tx events")
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn one_core_scans_a_chain_sqlite() {
    one_core_scans_a_chain_and_a_credit_is_recorded_once(Backend::Sqlite).await;
}

#[tokio::test]
async fn one_core_scans_a_chain_postgres() {
    one_core_scans_a_chain_and_a_credit_is_recorded_once(Backend::Postgres).await;
}
