//! Payouts: a batch stored whole, with its items, under its Idempotency-Key before any item
//! is made; then leased to one core at a time, which notes what became of each item's write.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, Query},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{payout_items as items, payouts, transactions},
    is_unique_violation,
};
use crate::error::{Result, StoreError};
use crate::lease::{Lease, Own};
use walletops_domain::{
    ItemMade, ItemStanding, Payout, PayoutItem, PayoutState, Transfer, TxStatus, WalletAddress,
};

/// The transaction a payout's item is paid in, as its standing needs it.
#[derive(Debug, Clone)]
pub struct ItemTransaction {
    /// The record.
    pub id: Uuid,
    /// Its status.
    pub status: TxStatus,
    /// Its hash or signature.
    pub hash: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// Which payouts a list selects.
#[derive(Debug, Clone, Default)]
pub struct PayoutFilter {
    /// Only this chain's.
    pub chain: Option<String>,
    /// Only those in this state.
    pub state: Option<PayoutState>,
    /// Only those made before this one (payout ids grow with time): the page after it.
    pub before: Option<Uuid>,
}

/// What storing a payout came to.
#[derive(Debug)]
pub enum PayoutStored {
    /// Stored now.
    New(Payout),
    /// Its key already holds this request's payout: that one.
    Replay(Payout),
    /// Its key holds another request's payout.
    Mismatch,
}

fn made_of(m: &items::Model) -> Result<ItemMade> {
    let bad = || {
        StoreError::Corrupt(anyhow::anyhow!(
            "payout {} item {}: {:?}",
            m.payout_id,
            m.idx,
            m.made
        ))
    };
    Ok(match (m.made.as_str(), m.made_id) {
        ("queued", _) => ItemMade::Queued,
        ("submitted", Some(id)) => ItemMade::Submitted(id),
        ("held", Some(id)) => ItemMade::Held(id),
        ("failed", _) => ItemMade::Failed(m.error.clone().unwrap_or_default()),
        _ => return Err(bad()),
    })
}

fn payout_of(p: payouts::Model, rows: Vec<items::Model>) -> Result<Payout> {
    let state = PayoutState::parse(&p.state).ok_or_else(|| {
        StoreError::Corrupt(anyhow::anyhow!("payout {}: state {:?}", p.id, p.state))
    })?;
    let from: WalletAddress = p.from_address.parse().map_err(|e| {
        StoreError::Corrupt(anyhow::anyhow!(
            "payout {}: from {:?}: {e}",
            p.id,
            p.from_address
        ))
    })?;
    let items = rows
        .into_iter()
        .map(|m| {
            let transfer =
                Transfer::read_back(from.family(), &m.to_address, m.token.as_deref(), &m.amount)
                    .map_err(|e| {
                        StoreError::Corrupt(anyhow::anyhow!(
                            "payout {} item {}: {e}",
                            m.payout_id,
                            m.idx
                        ))
                    })?;
            Ok(PayoutItem {
                index: u32::try_from(m.idx).unwrap_or_default(),
                made: made_of(&m)?,
                transfer,
                reference: m.reference,
                pack: m.pack.and_then(|p| u32::try_from(p).ok()),
            })
        })
        .collect::<Result<_>>()?;
    Ok(Payout {
        rent: None,
        id: p.id,
        user_id: p.user_id,
        key_id: p.key_id,
        idempotency_key: p.idempotency_key,
        request_hash: p.request_hash,
        chain: p.chain,
        from,
        state,
        items,
        created_at: p.created_at,
        completed_at: p.completed_at,
    })
}

impl Store {
    /// Stores `payout` (its items queued) under its user's Idempotency-Key, in one
    /// transaction; or, when the key holds one already, that one (`Replay`) or the news
    /// that it was another request's (`Mismatch`).
    pub async fn store_payout(&self, payout: &Payout) -> Result<PayoutStored> {
        let txn = self.begin_sea().await?;
        let row = payouts::ActiveModel {
            id: Set(payout.id),
            user_id: Set(payout.user_id),
            key_id: Set(payout.key_id),
            idempotency_key: Set(payout.idempotency_key),
            request_hash: Set(payout.request_hash.clone()),
            chain: Set(payout.chain.clone()),
            from_address: Set(String::from(payout.from)),
            state: Set(PayoutState::Running.as_str().to_owned()),
            created_at: Set(payout.created_at),
            completed_at: Set(None),
            lease_owner: Set(None),
            lease_until: Set(None),
        };
        match payouts::Entity::insert(row)
            .exec_without_returning(&txn)
            .await
        {
            Ok(_) => {}
            Err(e) if is_unique_violation(&e) => {
                txn.rollback().await?;
                let earlier = payouts::Entity::find()
                    .filter(payouts::Column::UserId.eq(payout.user_id))
                    .filter(payouts::Column::IdempotencyKey.eq(payout.idempotency_key))
                    .one(self.sea())
                    .await?
                    .ok_or_else(|| {
                        StoreError::Corrupt(anyhow::anyhow!("a payout vanished under its key"))
                    })?;
                if earlier.request_hash != payout.request_hash {
                    return Ok(PayoutStored::Mismatch);
                }
                let id = earlier.id;
                return Ok(PayoutStored::Replay(
                    self.get_payout(payout.user_id, id).await?.ok_or_else(|| {
                        StoreError::Corrupt(anyhow::anyhow!("payout {id} vanished"))
                    })?,
                ));
            }
            Err(e) => return Err(e.into()),
        }
        let rows: Vec<_> = payout
            .items
            .iter()
            .map(|item| items::ActiveModel {
                payout_id: Set(payout.id),
                idx: Set(i32::try_from(item.index).unwrap_or(i32::MAX)),
                to_address: Set(String::from(item.transfer.to())),
                asset: Set(item.transfer.asset_name().to_owned()),
                token: Set(item.transfer.token().map(String::from)),
                amount: Set(item.transfer.amount().to_string()),
                reference: Set(item.reference.clone()),
                made: Set("queued".to_owned()),
                made_id: Set(None),
                error: Set(None),
                pack: Set(item.pack.and_then(|p| i32::try_from(p).ok())),
            })
            .collect();
        for run in super::in_cached_shapes(rows) {
            items::Entity::insert_many(run)
                .exec_without_returning(&txn)
                .await?;
        }
        txn.commit().await?;
        let mut stored = payout.clone();
        stored.state = PayoutState::Running;
        stored
            .items
            .iter_mut()
            .for_each(|i| i.made = ItemMade::Queued);
        Ok(PayoutStored::New(stored))
    }

    /// `user_id`'s payout `id`, with its items in request order.
    pub async fn get_payout(&self, user_id: Uuid, id: Uuid) -> Result<Option<Payout>> {
        let Some(p) = payouts::Entity::find_by_id(id)
            .filter(payouts::Column::UserId.eq(user_id))
            .one(self.sea())
            .await?
        else {
            return Ok(None);
        };
        let rows = items::Entity::find()
            .filter(items::Column::PayoutId.eq(id))
            .order_by_asc(items::Column::Idx)
            .all(self.sea())
            .await?;
        payout_of(p, rows).map(Some)
    }

    /// `user_id`'s payouts that `filter` selects, newest first, at most `limit`, each with
    /// its items.
    pub async fn list_payouts(
        &self,
        user_id: Uuid,
        filter: &PayoutFilter,
        limit: u64,
    ) -> Result<Vec<Payout>> {
        let mut query = payouts::Entity::find().filter(payouts::Column::UserId.eq(user_id));
        if let Some(chain) = &filter.chain {
            query = query.filter(payouts::Column::Chain.eq(chain.as_str()));
        }
        if let Some(state) = filter.state {
            query = query.filter(payouts::Column::State.eq(state.as_str()));
        }
        if let Some(before) = filter.before {
            query = query.filter(payouts::Column::Id.lt(before));
        }
        let page = query
            .order_by_desc(payouts::Column::Id)
            .limit(limit)
            .all(self.sea())
            .await?;
        let ids: Vec<Uuid> = page.iter().map(|p| p.id).collect();
        let mut by_payout: std::collections::HashMap<Uuid, Vec<items::Model>> = Default::default();
        for row in items::Entity::find()
            .filter(items::Column::PayoutId.is_in(ids))
            .order_by_asc(items::Column::Idx)
            .all(self.sea())
            .await?
        {
            by_payout.entry(row.payout_id).or_default().push(row);
        }
        page.into_iter()
            .map(|p| {
                let rows = by_payout.remove(&p.id).unwrap_or_default();
                payout_of(p, rows)
            })
            .collect()
    }

    /// The transactions the items of payouts `ids` are paid in.
    pub async fn payout_transactions(&self, ids: &[Uuid]) -> Result<Vec<ItemTransaction>> {
        let made = Query::select()
            .column(items::Column::MadeId)
            .from(items::Entity)
            .and_where(items::Column::PayoutId.is_in(ids.iter().copied()))
            .and_where(items::Column::Made.eq("submitted"))
            .to_owned();
        let rows: Vec<(Uuid, String, Option<String>, Option<String>)> =
            transactions::Entity::find()
                .select_only()
                .column(transactions::Column::Id)
                .column(transactions::Column::Status)
                .column(transactions::Column::Hash)
                .column(transactions::Column::Error)
                .filter(transactions::Column::Id.in_subquery(made))
                .into_tuple()
                .all(self.sea())
                .await?;
        rows.into_iter()
            .map(|(id, status, hash, error)| {
                let status = serde_json::from_value(serde_json::Value::String(status.clone()))
                    .map_err(|_| {
                        StoreError::Corrupt(anyhow::anyhow!("transaction {id}: status {status:?}"))
                    })?;
                Ok(ItemTransaction {
                    id,
                    status,
                    hash,
                    error,
                })
            })
            .collect()
    }

    /// Takes up to `limit` running payouts whose lease is free, expired or `owner`'s, for
    /// `owner` until `until`; their ids.
    pub async fn lease_running_payouts(
        &self,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u64,
    ) -> Result<Vec<(Uuid, Uuid)>> {
        let lease = Lease {
            owner,
            now,
            until,
            own: Own::Renewed,
        };
        let running = || payouts::Column::State.eq(PayoutState::Running.as_str());
        let candidates: Vec<Uuid> = payouts::Entity::find()
            .select_only()
            .column(payouts::Column::Id)
            .filter(running())
            .filter(lease.free::<payouts::Entity>())
            .order_by_asc(payouts::Column::CreatedAt)
            .limit(limit)
            .into_tuple()
            .all(self.sea())
            .await?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        Ok(lease
            .take::<payouts::Entity>(
                Condition::all()
                    .add(payouts::Column::Id.is_in(candidates))
                    .add(running()),
            )
            .exec_with_returning(self.sea())
            .await?
            .into_iter()
            .map(|m| (m.id, m.user_id))
            .collect())
    }

    /// Notes what became of item `index` of payout `id`.
    pub async fn note_payout_item(&self, id: Uuid, index: u32, made: &ItemMade) -> Result<()> {
        let (kind, made_id, error) = match made {
            ItemMade::Queued => ("queued", None, None),
            ItemMade::Submitted(tx) => ("submitted", Some(*tx), None),
            ItemMade::Held(approval) => ("held", Some(*approval), None),
            ItemMade::Failed(why) => ("failed", None, Some(why.clone())),
        };
        items::Entity::update_many()
            .col_expr(items::Column::Made, Expr::value(kind))
            .col_expr(items::Column::MadeId, Expr::value(made_id))
            .col_expr(items::Column::Error, Expr::value(error))
            .filter(items::Column::PayoutId.eq(id))
            .filter(items::Column::Idx.eq(i32::try_from(index).unwrap_or(i32::MAX)))
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Where each item of each of `payouts` stands (per payout, in item order).
    pub async fn payout_standings(&self, payouts: &[Payout]) -> Result<Vec<Vec<ItemStanding>>> {
        let ids: Vec<Uuid> = payouts.iter().map(|p| p.id).collect();
        let txs: std::collections::HashMap<Uuid, ItemTransaction> = self
            .payout_transactions(&ids)
            .await?
            .into_iter()
            .map(|t| (t.id, t))
            .collect();
        Ok(payouts
            .iter()
            .map(|p| p.items.iter().map(|i| standing(&i.made, &txs)).collect())
            .collect())
    }

    /// Marks running payout `id` of `user_id` on `chain` completed at `at`, and notes its
    /// `payout.completed` event, in one transaction; `false` when it was not running
    /// (another core completed it): only the one that completes it tells of it.
    pub async fn complete_payout(
        &self,
        (id, user_id, chain): (Uuid, Uuid, &str),
        at: DateTime<Utc>,
    ) -> Result<bool> {
        let txn = self.begin_sea().await?;
        let done = payouts::Entity::update_many()
            .col_expr(
                payouts::Column::State,
                Expr::value(PayoutState::Completed.as_str()),
            )
            .col_expr(payouts::Column::CompletedAt, Expr::value(at))
            .filter(payouts::Column::Id.eq(id))
            .filter(payouts::Column::State.eq(PayoutState::Running.as_str()))
            .exec(&txn)
            .await?
            .rows_affected
            > 0;
        if done {
            self.insert_payout_event(&txn, (id, user_id, chain.to_owned()))
                .await?;
        }
        txn.commit().await?;
        Ok(done)
    }
}

/// Where an item that became `made` stands, its transaction (if any) read in `txs`.
fn standing(
    made: &ItemMade,
    txs: &std::collections::HashMap<Uuid, ItemTransaction>,
) -> ItemStanding {
    match made {
        ItemMade::Queued => ItemStanding::named("QUEUED"),
        ItemMade::Held(approval) => ItemStanding {
            approval_id: Some(*approval),
            ..ItemStanding::named("PENDING_APPROVAL")
        },
        ItemMade::Failed(why) => ItemStanding {
            error: Some(why.clone()),
            is_final: true,
            ..ItemStanding::named("FAILED")
        },
        ItemMade::Submitted(tx) => match txs.get(tx) {
            Some(t) => ItemStanding {
                state: t.status.as_str().to_ascii_uppercase(),
                transaction_id: Some(*tx),
                hash: t.hash.clone(),
                error: t.error.clone(),
                approval_id: None,
                is_final: t.status.is_final(),
            },
            None => ItemStanding {
                transaction_id: Some(*tx),
                ..ItemStanding::named("SUBMITTED")
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Backend, on_store};

    fn payout(user: Uuid, key: Uuid, amount: &str) -> Payout {
        Payout {
            rent: None,
            id: Uuid::now_v7(),
            user_id: user,
            key_id: None,
            idempotency_key: key,
            request_hash: format!("hash of {amount}"),
            chain: "anvil".to_owned(),
            from: WalletAddress::Evm(alloy::primitives::Address::repeat_byte(1)),
            state: PayoutState::Running,
            items: (0..3)
                .map(|index| PayoutItem {
                    index,
                    transfer: Transfer::Evm {
                        to: alloy::primitives::Address::repeat_byte(index as u8 + 2),
                        token: None,
                        amount: amount.parse().expect("an amount"),
                    },
                    reference: Some(format!("invoice {index}")),
                    pack: None,
                    made: ItemMade::Queued,
                })
                .collect(),
            created_at: Utc::now(),
            completed_at: None,
        }
    }

    async fn a_payout_is_stored_once_under_its_key(b: Backend) {
        on_store(b, |store| async move {
            let (user, key) = (Uuid::now_v7(), Uuid::new_v4());
            let first = payout(user, key, "5");
            let PayoutStored::New(stored) = store.store_payout(&first).await.expect("store") else {
                panic!("not stored");
            };
            let again = payout(user, key, "5");
            match store.store_payout(&again).await.expect("replay") {
                PayoutStored::Replay(p) => assert_eq!(p.id, stored.id),
                other => panic!("not a replay: {other:?}"),
            }
            assert!(matches!(
                store
                    .store_payout(&payout(user, key, "6"))
                    .await
                    .expect("mismatch"),
                PayoutStored::Mismatch
            ));
            // One core leases it; what each item became is kept; completed once.
            let (a, other) = (Uuid::now_v7(), Uuid::now_v7());
            let now = Utc::now();
            let until = now + chrono::TimeDelta::seconds(30);
            let leased = store
                .lease_running_payouts(a, now, until, 10)
                .await
                .expect("lease");
            assert_eq!(leased, [(stored.id, user)]);
            assert!(
                store
                    .lease_running_payouts(other, now, until, 10)
                    .await
                    .expect("lease")
                    .is_empty()
            );
            let tx = Uuid::now_v7();
            store
                .note_payout_item(stored.id, 1, &ItemMade::Submitted(tx))
                .await
                .expect("note");
            store
                .note_payout_item(stored.id, 2, &ItemMade::Failed("no".to_owned()))
                .await
                .expect("note");
            let read = store
                .get_payout(user, stored.id)
                .await
                .expect("get")
                .expect("one");
            let made: Vec<ItemMade> = read.items.iter().map(|i| i.made.clone()).collect();
            assert_eq!(
                made,
                [
                    ItemMade::Queued,
                    ItemMade::Submitted(tx),
                    ItemMade::Failed("no".to_owned())
                ]
            );
            assert_eq!(read.items[0].reference.as_deref(), Some("invoice 0"));
            let this = (stored.id, user, "anvil");
            assert!(
                store
                    .complete_payout(this, Utc::now())
                    .await
                    .expect("complete")
            );
            assert!(!store.complete_payout(this, Utc::now()).await.expect("once"));
            assert_eq!(
                store
                    .payout_standings(std::slice::from_ref(&read))
                    .await
                    .expect("standings")[0]
                    .iter()
                    .map(|s| s.state.as_str())
                    .collect::<Vec<_>>(),
                ["QUEUED", "SUBMITTED", "FAILED"]
            );
            assert!(
                store
                    .get_payout(Uuid::now_v7(), stored.id)
                    .await
                    .expect("get")
                    .is_none()
            );
        })
        .await;
    }

    #[tokio::test]
    async fn a_payout_is_stored_once_under_its_key_sqlite() {
        a_payout_is_stored_once_under_its_key(Backend::Sqlite).await;
    }

    #[tokio::test]
    async fn a_payout_is_stored_once_under_its_key_postgres() {
        a_payout_is_stored_once_under_its_key(Backend::Postgres).await;
    }
}
