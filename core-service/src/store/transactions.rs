use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect,
    sea_query::{Expr, NullOrdering, Order},
};
use std::collections::HashSet;
use uuid::Uuid;

use super::{Store, entities::transactions as txs};
use crate::{
    error::{Result, WalletOpsError},
    transactions::{OpenTransaction, StatusChange, TransactionRecord, TxKind, TxStatus},
    transfers::REQUEST_HOLD,
};

/// A signed transaction about to be stored, before its first broadcast.
#[derive(Debug, Clone)]
pub(crate) struct NewTransaction {
    pub(crate) id: Uuid,
    pub(crate) user_id: Uuid,
    pub(crate) wallet_id: Uuid,
    pub(crate) chain: String,
    pub(crate) chain_id: i64,
    pub(crate) kind: TxKind,
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) asset: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) amount: Option<String>,
    pub(crate) request: serde_json::Value,
    pub(crate) hash: String,
    pub(crate) nonce: Option<u64>,
    pub(crate) signed_payload: Vec<u8>,
    pub(crate) idempotency_key: Option<Uuid>,
    pub(crate) note: Option<String>,
    /// Solana: the last block height at which the payload's blockhash is valid.
    pub(crate) valid_until: Option<u64>,
    /// Until when the request storing it holds it (`REQUEST_HOLD`); none: the monitor's at once.
    pub(crate) held_until: Option<DateTime<Utc>>,
}

fn enum_text<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn history_push(
    history: &serde_json::Value,
    status: TxStatus,
    at: DateTime<Utc>,
    note: Option<String>,
) -> serde_json::Value {
    let mut list: Vec<StatusChange> = serde_json::from_value(history.clone()).unwrap_or_default();
    list.push(StatusChange { status, at, note });
    serde_json::to_value(list).unwrap_or_default()
}

fn to_i64(n: u64) -> Result<i64> {
    i64::try_from(n).map_err(|_| WalletOpsError::Internal(anyhow::anyhow!("nonce overflow")))
}

impl Store {
    /// Stores a signed transaction with status `SUBMITTED`, inside the signing transaction,
    /// and returns it as stored.
    pub(crate) async fn insert_transaction<C: ConnectionTrait>(
        &self,
        conn: &C,
        new: NewTransaction,
    ) -> Result<OpenTransaction> {
        self.insert_transactions(conn, vec![new])
            .await?
            .pop()
            .ok_or_else(|| WalletOpsError::Internal(anyhow::anyhow!("stored nothing")))
    }

    /// Stores signed transactions with status `SUBMITTED` in one INSERT, inside the signing
    /// transaction, and returns them as stored, in order.
    pub(crate) async fn insert_transactions<C: ConnectionTrait>(
        &self,
        conn: &C,
        news: Vec<NewTransaction>,
    ) -> Result<Vec<OpenTransaction>> {
        if news.is_empty() {
            return Ok(Vec::new());
        }
        // To the microsecond, as PostgreSQL keeps it: the returned records equal the rows.
        let now = Utc::now().trunc_subsecs(6);
        let models = news
            .into_iter()
            .map(|new| {
                let history =
                    history_push(&serde_json::json!([]), TxStatus::Submitted, now, new.note);
                Ok(txs::Model {
                    id: new.id,
                    user_id: new.user_id,
                    wallet_id: new.wallet_id,
                    chain: new.chain,
                    chain_id: new.chain_id,
                    kind: enum_text(new.kind),
                    from_address: new.from,
                    to_address: new.to,
                    asset: new.asset,
                    token: new.token,
                    amount: new.amount,
                    request: new.request,
                    status: enum_text(TxStatus::Submitted),
                    status_history: history,
                    hash: Some(new.hash.clone()),
                    nonce: new.nonce.map(to_i64).transpose()?,
                    signed_payload: Some(new.signed_payload),
                    hashes: serde_json::json!([new.hash]),
                    idempotency_key: new.idempotency_key,
                    error: None,
                    created_at: now,
                    updated_at: now,
                    last_broadcast_at: None,
                    lease_owner: new.held_until.map(|_| REQUEST_HOLD),
                    lease_until: new.held_until,
                    valid_until_height: new.valid_until.map(to_i64).transpose()?,
                    revision: 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        txs::Entity::insert_many(
            models
                .iter()
                .cloned()
                .map(IntoActiveModel::into_active_model),
        )
        .exec_without_returning(conn)
        .await?;
        models.into_iter().map(TryInto::try_into).collect()
    }

    /// Replaces the signed payload of an open transaction (a replacement with a higher fee, or
    /// a re-signing with a new nonce), keeping every earlier hash: any of them may be mined.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn resign_transaction<C: ConnectionTrait>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        nonce: Option<u64>,
        valid_until: Option<u64>,
        payload: Vec<u8>,
        hash: &str,
        status: TxStatus,
        note: String,
    ) -> Result<()> {
        let mut hashes = open.hashes.clone();
        hashes.push(hash.to_owned());
        let now = Utc::now();
        let updated = txs::Entity::update_many()
            .col_expr(txs::Column::SignedPayload, Expr::value(payload))
            .col_expr(txs::Column::Hash, Expr::value(hash))
            .col_expr(
                txs::Column::Nonce,
                Expr::value(nonce.map(to_i64).transpose()?),
            )
            .col_expr(
                txs::Column::ValidUntilHeight,
                Expr::value(valid_until.map(to_i64).transpose()?),
            )
            .col_expr(txs::Column::Hashes, Expr::value(serde_json::json!(hashes)))
            .col_expr(txs::Column::Status, Expr::value(enum_text(status)))
            .col_expr(
                txs::Column::StatusHistory,
                Expr::value(history_push(&open.history, status, now, Some(note))),
            )
            .col_expr(
                txs::Column::LastBroadcastAt,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .col_expr(txs::Column::UpdatedAt, Expr::value(now))
            .col_expr(txs::Column::Revision, Expr::value(open.revision + 1))
            .filter(still_as_seen(open))
            .exec(conn)
            .await?;
        if updated.rows_affected != 1 {
            return Err(WalletOpsError::Internal(anyhow::anyhow!(
                "transaction {} changed while it was being re-signed",
                open.id
            )));
        }
        Ok(())
    }

    /// Notes that the current payloads of `ids` were sent to the node by `at`, and ends the
    /// holds of their requests on them: one UPDATE.
    pub(crate) async fn record_broadcasts(&self, ids: &[Uuid], at: DateTime<Utc>) -> Result<()> {
        txs::Entity::update_many()
            .col_expr(txs::Column::LastBroadcastAt, Expr::value(at))
            .col_expr(
                txs::Column::LeaseUntil,
                Expr::case(
                    txs::Column::LeaseOwner.eq(REQUEST_HOLD),
                    Expr::value(Option::<DateTime<Utc>>::None),
                )
                .finally(Expr::col(txs::Column::LeaseUntil))
                .into(),
            )
            .filter(txs::Column::Id.is_in(ids.iter().copied()))
            .exec(self.db())
            .await?;
        Ok(())
    }

    /// Forgets what a restart of chain `slug` (id `chain_id`) has made untrue, for dev chains,
    /// which start empty each time: its nonce ledger rows go, and its open records end
    /// DROPPED with `why` (the chain they were sent to is gone). Returns how many ended.
    pub(crate) async fn forget_chain_state(
        &self,
        slug: &str,
        chain_id: i64,
        why: &str,
    ) -> Result<u64> {
        let txn = self.begin().await?;
        super::entities::evm_nonces::Entity::delete_many()
            .filter(super::entities::evm_nonces::Column::ChainId.eq(chain_id))
            .exec(&txn)
            .await?;
        let open = txs::Entity::find()
            .filter(txs::Column::Chain.eq(slug))
            .filter(txs::Column::Status.is_in(open_statuses()))
            .all(&txn)
            .await?;
        let mut ended = 0;
        for m in open {
            let open = OpenTransaction::try_from(m)?;
            if self
                .settle_transaction(
                    &txn,
                    &open,
                    TxStatus::Dropped,
                    Some(why.to_owned()),
                    None,
                    None,
                )
                .await?
            {
                ended += 1;
            }
        }
        txn.commit().await?;
        Ok(ended)
    }

    /// Gives up every lease `owner` holds, so that other cores follow those records at once
    /// instead of when the leases run out: a core stopping.
    pub(crate) async fn release_leases(&self, owner: Uuid) -> Result<u64> {
        self.free_leases(Condition::all().add(txs::Column::LeaseOwner.eq(owner)))
            .await
    }

    /// Gives up `owner`'s lease on record `id`, so that any core may take it at its next
    /// sweep: a core that cannot follow the record (its node unreachable from there, say)
    /// must not keep it from the cores that can.
    pub(crate) async fn release_lease(&self, owner: Uuid, id: Uuid) -> Result<()> {
        self.free_leases(
            Condition::all()
                .add(txs::Column::Id.eq(id))
                .add(txs::Column::LeaseOwner.eq(owner)),
        )
        .await
        .map(|_| ())
    }

    /// Ends the hold of its request on record `id`, if it still has one.
    pub(crate) async fn release_hold(&self, id: Uuid) -> Result<()> {
        self.release_lease(REQUEST_HOLD, id).await
    }

    /// Ends the leases (or holds) of the records `which` selects; returns how many. The
    /// owner stays, so that the next core to lease a record knows whose it was (see
    /// `Leased::taken_over`); a freed lease is not renewed (`renew_leases`).
    async fn free_leases(&self, which: Condition) -> Result<u64> {
        Ok(txs::Entity::update_many()
            .col_expr(
                txs::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(which)
            .exec(self.db())
            .await?
            .rows_affected)
    }

    /// Moves `open` to `status` (with `error` for failures), appending to its history; false
    /// when the record is no longer as `open` shows it (another worker settled or re-signed it
    /// meanwhile), and then nothing changed.
    pub(crate) async fn settle_transaction<C: ConnectionTrait>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        status: TxStatus,
        error: Option<String>,
        note: Option<String>,
        hash: Option<&str>,
    ) -> Result<bool> {
        self.settle_as_seen(conn, open, still_as_seen(open), status, error, note, hash)
            .await
    }

    /// Ends `open` as `status` (FAILED or DROPPED) with `error`, in `conn`'s transaction.
    /// `answered`: the refusal its own request answers with, which fails the key's claim
    /// too; then only while nobody has sent the record with success: should the request's
    /// hold have run out (another core's clock ahead of this one's), a monitor may have sent
    /// it meanwhile, and failing the key would have the caller pay again while that send is
    /// mined. False, with nothing changed, when the record is not as `open` shows it (or,
    /// answered, was sent).
    pub(crate) async fn fail_transaction<C: ConnectionTrait>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        status: TxStatus,
        error: String,
        answered: Option<String>,
    ) -> Result<bool> {
        let mut seen = still_as_seen(open);
        if answered.is_some() {
            seen = seen.add(txs::Column::LastBroadcastAt.is_null());
        }
        let failed = self
            .settle_as_seen(conn, open, seen, status, Some(error), None, None)
            .await?;
        if failed && let Some(detail) = answered {
            self.fail_claim_of(conn, open, detail).await?;
        }
        Ok(failed)
    }

    /// The other records of `open`'s wallet and chain that ended DROPPED or FAILED at its
    /// nonce: the record a nonce filler was signed for, or one refused for sure whose nonce
    /// was given back, and taken by a later record. When the nonce turns out used by another
    /// transaction, it may be one of theirs.
    pub(crate) async fn ended_records_at_nonce(
        &self,
        open: &OpenTransaction,
    ) -> Result<Vec<OpenTransaction>> {
        let Some(nonce) = open.nonce else {
            return Ok(Vec::new());
        };
        txs::Entity::find()
            .filter(txs::Column::ChainId.eq(open.chain_id))
            .filter(txs::Column::FromAddress.eq(open.from.as_str()))
            .filter(txs::Column::Nonce.eq(to_i64(nonce)?))
            .filter(txs::Column::Status.is_in(ended_unmined()))
            .filter(txs::Column::Id.ne(open.id))
            .all(self.db())
            .await?
            .into_iter()
            .map(OpenTransaction::try_from)
            .collect()
    }

    /// Settles `dropped`, a record ended DROPPED or FAILED, as `status` with its version
    /// `hash`, which was mined after all, and has its key's claim, if it was failed, answer
    /// from the record again (a key that says "failed, use a new key" has the caller pay
    /// twice): one database transaction. False when the record is no longer as `dropped`
    /// shows it, and then nothing changed.
    pub(crate) async fn settle_ended(
        &self,
        dropped: &OpenTransaction,
        status: TxStatus,
        error: Option<String>,
        note: String,
        hash: &str,
    ) -> Result<bool> {
        let seen = Condition::all()
            .add(txs::Column::Id.eq(dropped.id))
            .add(txs::Column::Status.is_in(ended_unmined()))
            .add(txs::Column::Revision.eq(dropped.revision));
        let txn = self.begin().await?;
        let settled = self
            .settle_as_seen(&txn, dropped, seen, status, error, Some(note), Some(hash))
            .await?;
        if settled {
            self.unfail_claim_of(&txn, dropped).await?;
        }
        txn.commit().await?;
        Ok(settled)
    }

    /// Moves `open` to `status` as `settle_transaction` does, where `seen` holds.
    #[allow(clippy::too_many_arguments)]
    async fn settle_as_seen<C: ConnectionTrait>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        seen: Condition,
        status: TxStatus,
        error: Option<String>,
        note: Option<String>,
        hash: Option<&str>,
    ) -> Result<bool> {
        let now = Utc::now();
        let mut update = txs::Entity::update_many()
            .col_expr(txs::Column::Status, Expr::value(enum_text(status)))
            .col_expr(
                txs::Column::StatusHistory,
                Expr::value(history_push(&open.history, status, now, note)),
            )
            .col_expr(txs::Column::Error, Expr::value(error))
            .col_expr(txs::Column::UpdatedAt, Expr::value(now))
            .col_expr(txs::Column::Revision, Expr::value(open.revision + 1));
        if let Some(hash) = hash {
            update = update.col_expr(txs::Column::Hash, Expr::value(hash));
        }
        let updated = update.filter(seen).exec(conn).await?;
        Ok(updated.rows_affected == 1)
    }

    /// Whether an open record of `from` on chain `chain_id` holds `nonce`, read in `conn`.
    pub(crate) async fn nonce_held_open<C: ConnectionTrait>(
        &self,
        conn: &C,
        chain_id: i64,
        from: &str,
        nonce: u64,
    ) -> Result<bool> {
        Ok(txs::Entity::find()
            .filter(txs::Column::ChainId.eq(chain_id))
            .filter(txs::Column::FromAddress.eq(from))
            .filter(txs::Column::Nonce.eq(to_i64(nonce)?))
            .filter(txs::Column::Status.is_in(open_statuses()))
            .one(conn)
            .await?
            .is_some())
    }

    /// The open (or any) transaction `id` with what the monitor needs.
    pub(crate) async fn open_transaction(&self, id: Uuid) -> Result<Option<OpenTransaction>> {
        txs::Entity::find_by_id(id)
            .one(self.db())
            .await?
            .map(OpenTransaction::try_from)
            .transpose()
    }

    /// The caller's transaction `id` if `user_id` owns it. Another user's transaction is
    /// reported exactly like a missing one, so ids cannot be probed.
    pub(crate) async fn find_transaction(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<Option<TransactionRecord>> {
        txs::Entity::find_by_id(id)
            .filter(txs::Column::UserId.eq(user_id))
            .one(self.db())
            .await?
            .map(TransactionRecord::try_from)
            .transpose()
    }

    /// Takes up to `limit` open transactions whose lease is free or expired for `owner`
    /// until `until`, and returns them. The lease is one conditional UPDATE over the
    /// candidates, so of several cores exactly one wins each record, and a dead core's lease
    /// (or a dead request's hold) simply runs out. Never-leased records come first, then the ones leased longest ago:
    /// with more open records than `limit`, every one is still followed in turn, instead of
    /// the oldest `limit` (say, sends queued behind a fee-capped one) every time. Records in
    /// `skip` are left to other cores.
    pub(crate) async fn lease_open_transactions(
        &self,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: u64,
        skip: &[Uuid],
    ) -> Result<Leased> {
        let open = open_statuses();
        let free = Condition::any()
            .add(txs::Column::LeaseUntil.is_null())
            .add(txs::Column::LeaseUntil.lt(now))
            .add(txs::Column::LeaseOwner.eq(owner));
        let mut candidates = txs::Entity::find()
            .select_only()
            .column(txs::Column::Id)
            .column(txs::Column::LeaseOwner)
            .filter(txs::Column::Status.is_in(open.clone()))
            .filter(free.clone());
        if !skip.is_empty() {
            candidates = candidates.filter(txs::Column::Id.is_not_in(skip.iter().copied()));
        }
        let candidates: Vec<(Uuid, Option<Uuid>)> = candidates
            .order_by_with_nulls(txs::Column::LeaseUntil, Order::Asc, NullOrdering::First)
            .order_by_asc(txs::Column::CreatedAt)
            .limit(limit)
            .into_tuple()
            .all(self.db())
            .await?;
        if candidates.is_empty() {
            return Ok(Leased::default());
        }
        let other_cores: HashSet<Uuid> = candidates
            .iter()
            .filter(|(_, was)| was.is_some_and(|w| w != owner && w != REQUEST_HOLD))
            .map(|(id, _)| *id)
            .collect();
        let mut leased = txs::Entity::update_many()
            .col_expr(txs::Column::LeaseOwner, Expr::value(owner))
            .col_expr(txs::Column::LeaseUntil, Expr::value(until))
            .filter(txs::Column::Id.is_in(candidates.into_iter().map(|(id, _)| id)))
            .filter(txs::Column::Status.is_in(open))
            .filter(free)
            .exec_with_returning(self.db())
            .await?;
        leased.sort_by_key(|m| m.created_at);
        // One unreadable row (written by a newer version, say) must not stop the others
        // from being followed. It is set aside for a while, leased to nobody: leased to this
        // core, it would be taken again each sweep, and never by a core that can read it.
        let mut opens = Vec::with_capacity(leased.len());
        let mut unreadable = Vec::new();
        for m in leased {
            let id = m.id;
            match OpenTransaction::try_from(m) {
                Ok(open) => opens.push(open),
                Err(e) => {
                    tracing::error!(%id, error = %e, "an open transaction's row is unreadable; set aside for 10 minutes");
                    unreadable.push(id);
                }
            }
        }
        if !unreadable.is_empty() {
            txs::Entity::update_many()
                .col_expr(txs::Column::LeaseOwner, Expr::value(Uuid::now_v7()))
                .col_expr(
                    txs::Column::LeaseUntil,
                    Expr::value(now + chrono::Duration::minutes(10)),
                )
                .filter(txs::Column::Id.is_in(unreadable))
                .exec(self.db())
                .await?;
        }
        let taken_over = opens
            .iter()
            .map(|o| o.id)
            .filter(|id| other_cores.contains(id))
            .collect();
        Ok(Leased {
            records: opens,
            taken_over,
        })
    }

    /// Extends `owner`'s lease on those of `ids` that are still open to `until`; returns how
    /// many it kept. A record whose lease ran out and another core took is left to that core.
    pub(crate) async fn renew_leases(
        &self,
        owner: Uuid,
        ids: &[Uuid],
        until: DateTime<Utc>,
    ) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        Ok(txs::Entity::update_many()
            .col_expr(txs::Column::LeaseUntil, Expr::value(until))
            .filter(txs::Column::Id.is_in(ids.iter().copied()))
            .filter(txs::Column::LeaseOwner.eq(owner))
            // A lease given up during the sweep stays given up.
            .filter(txs::Column::LeaseUntil.is_not_null())
            .filter(txs::Column::Status.is_in(open_statuses()))
            .exec(self.db())
            .await?
            .rows_affected)
    }
}

/// What a monitor sweep leased.
#[derive(Debug, Default)]
pub(crate) struct Leased {
    /// The records, oldest first.
    pub(crate) records: Vec<OpenTransaction>,
    /// Those another core held last: what this core remembers of them (since when a node
    /// refused them, say) is from before that core's turn, and no longer true.
    pub(crate) taken_over: HashSet<Uuid>,
}

/// Record `open` as its reader saw it: still open and at the same revision, so no other
/// worker changed its status, history or payload since. Every write that settles, notes or
/// re-signs a record is conditional on it (compare-and-swap), so of two workers acting on
/// one record (two cores whose leases overlapped, or the monitor and the request that made
/// it) only the first changes it, and the other acts on nothing: it neither writes back a
/// history without the first one's entry nor moves the record back to a status it has left.
fn still_as_seen(open: &OpenTransaction) -> Condition {
    Condition::all()
        .add(txs::Column::Id.eq(open.id))
        .add(txs::Column::Status.is_in(open_statuses()))
        .add(txs::Column::Revision.eq(open.revision))
}

/// The statuses of a record ended without being mined, whose nonce a filler takes.
pub(super) fn ended_unmined() -> [String; 2] {
    [enum_text(TxStatus::Dropped), enum_text(TxStatus::Failed)]
}

/// The statuses of a record the monitor still follows.
pub(super) fn open_statuses() -> [String; 2] {
    [
        enum_text(TxStatus::Submitted),
        enum_text(TxStatus::FeeCapped),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{chains::ChainFamily, signer::SealedKey, store::NewWallet};

    /// One open transaction put in `store`, and its id.
    async fn one_open_record(store: &Store) -> Uuid {
        open_records(store, 1, None).await[0]
    }

    /// `n` open transactions put in `store`, held by their requests until `held_until`,
    /// and their ids, oldest first.
    async fn open_records(store: &Store, n: u64, held_until: Option<DateTime<Utc>>) -> Vec<Uuid> {
        let user = store.insert_user("lease").await.expect("a user");
        let from = "0x00000000000000000000000000000000000000aa".to_owned();
        let wallet = store
            .insert_wallet(NewWallet {
                user_id: user.id,
                family: ChainFamily::Evm,
                address: from.clone(),
                make_default: true,
                key: SealedKey {
                    nonce: vec![0; 12],
                    ciphertext: vec![0; 48],
                },
            })
            .await
            .expect("a wallet");
        let mut ids = Vec::new();
        for i in 0..n {
            let id = Uuid::now_v7();
            let record = NewTransaction {
                id,
                held_until,
                ..new_record(user.id, wallet.id, &from, i)
            };
            store
                .insert_transaction(store.db(), record)
                .await
                .expect("a record");
            ids.push(id);
        }
        ids
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
            let claim = crate::store::NewClaim {
                user: open.user_id,
                key: *id,
                path: "/v1/send".to_owned(),
                request_hash: "h".to_owned(),
                created_at: at,
                expires_at: at + retention,
            };
            store
                .insert_idempotency_key(store.db(), &claim, "succeeded", Some(*id), None, None)
                .await
                .expect("claim");
            opens.push(open);
        }
        (ids, opens)
    }

    /// A native send of 1 wei from `from`, wallet `wallet` of `user`, at `nonce`.
    fn new_record(user: Uuid, wallet: Uuid, from: &str, nonce: u64) -> NewTransaction {
        NewTransaction {
            id: Uuid::now_v7(),
            user_id: user,
            wallet_id: wallet,
            chain: "anvil".to_owned(),
            chain_id: 31_337,
            kind: TxKind::Send,
            from: from.to_owned(),
            to: "0x00000000000000000000000000000000000000bb".to_owned(),
            asset: Some("native".to_owned()),
            token: None,
            amount: Some("1".to_owned()),
            request: serde_json::json!({}),
            hash: format!("0x{:064x}", nonce + 1),
            nonce: Some(nonce),
            signed_payload: vec![1, 2, 3],
            idempotency_key: None,
            note: None,
            valid_until: None,
            held_until: None,
        }
    }

    async fn a_core_follows_every_open_record_in_turn_when_they_outnumber_its_batch(store: Store) {
        let ids = open_records(&store, 5, None).await;
        let owner = Uuid::now_v7();
        let t0 = Utc::now() + chrono::Duration::seconds(5);
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

    async fn a_record_its_request_holds_waits_for_the_hand_over_or_the_hold_to_run_out(
        store: Store,
    ) {
        let t0 = Utc::now();
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

    async fn a_failed_record_mined_after_all_has_its_key_answer_from_it(store: Store) {
        let ids = open_records(&store, 1, None).await;
        let open = store
            .open_transaction(ids[0])
            .await
            .expect("read")
            .expect("row");
        let now = Utc::now();
        let claim = crate::store::NewClaim {
            user: open.user_id,
            key: Uuid::new_v4(),
            path: "/v1/send".to_owned(),
            request_hash: "h".to_owned(),
            created_at: now,
            expires_at: now + chrono::Duration::hours(1),
        };
        let failed = "refused".to_owned();
        store
            .insert_idempotency_key(
                store.db(),
                &claim,
                "failed",
                Some(open.id),
                None,
                Some(failed),
            )
            .await
            .expect("claim");
        // The request that signed the record, answering late, touches neither ending of its
        // key: the record's own transactions set it.
        let keys = crate::idempotency::Idempotency::new(
            store.clone(),
            std::time::Duration::from_secs(3600),
        );
        let ticket = crate::idempotency::Ticket::new(claim.clone());
        ticket.claimed_with(open.id, serde_json::json!({ "hash": "0x01" }));
        let state = async || {
            store
                .find_idempotency_key(claim.user, claim.key, now, chrono::Duration::hours(1))
                .await
                .expect("read")
                .expect("claim")
        };
        keys.succeed(&ticket, serde_json::json!({ "hash": "0x02" }))
            .await
            .expect("succeed");
        assert_eq!(
            state().await.state,
            "failed",
            "a late success unfails nothing"
        );
        assert!(
            store
                .settle_transaction(store.db(), &open, TxStatus::Failed, None, None, None)
                .await
                .expect("fail")
        );
        let ended = store
            .open_transaction(open.id)
            .await
            .expect("read")
            .expect("row");
        let hash = ended.hashes[0].clone();
        assert!(
            store
                .settle_ended(&ended, TxStatus::Confirmed, None, "mined".to_owned(), &hash)
                .await
                .expect("settle")
        );
        let stored = store
            .find_idempotency_key(claim.user, claim.key, now, chrono::Duration::hours(1))
            .await
            .expect("read")
            .expect("claim");
        // Succeeded with no response stored: a replay answers from the record.
        assert_eq!(stored.state, "succeeded");
        assert_eq!(stored.response, None);
        assert_eq!(stored.transaction_id, Some(open.id));
        let refused = crate::error::WalletOpsError::SendFailed("refused".to_owned());
        assert!(keys.fail(&ticket, &refused).await.expect("fail"));
        let after = state().await;
        assert_eq!(
            after.state, "succeeded",
            "a late refusal undoes no correction"
        );
        assert_eq!(after.response, None);
    }

    async fn a_refusal_fails_no_record_that_was_sent_meanwhile(store: Store) {
        let now = Utc::now();
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
        assert_eq!(state(ids[0]).await, ("failed".to_owned(), TxStatus::Failed));
        assert!(!fail(&opens[1]).await, "a sent record is the monitor's");
        assert_eq!(
            state(ids[1]).await,
            ("succeeded".to_owned(), TxStatus::Submitted)
        );
    }

    async fn a_key_outlives_its_retention_until_its_record_has_been_settled_as_long(store: Store) {
        let retention = chrono::Duration::hours(1);
        let t0 = Utc::now();
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
            txs::Entity::update_many()
                .col_expr(txs::Column::UpdatedAt, Expr::value(at))
                .filter(txs::Column::Id.eq(open.id))
                .exec(store.db())
                .await
                .expect("date");
        };
        settle(0, TxStatus::Confirmed, t0).await;
        settle(1, TxStatus::Failed, t0 + chrono::Duration::minutes(50)).await;
        settle(2, TxStatus::Failed, t0 + chrono::Duration::minutes(50)).await;
        let reuse = new_record(
            opens[2].user_id,
            opens[2].wallet_id,
            &opens[2].from,
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

    async fn a_flushed_broadcast_log_has_handed_its_records_over(store: Store) {
        let held = Utc::now() + chrono::Duration::seconds(60);
        let ids = open_records(&store, 3, Some(held)).await;
        let log = crate::transfers::BroadcastLog::start(
            store.clone(),
            std::time::Duration::from_secs(30),
        );
        for id in &ids {
            log.note(*id);
        }
        log.flush().await;
        let now = Utc::now();
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
        txs::Entity::update_many()
            .col_expr(txs::Column::Hashes, Expr::value(serde_json::json!(5)))
            .filter(txs::Column::Id.eq(ids[0]))
            .exec(store.db())
            .await
            .expect("corrupt");
        let (now, core) = (Utc::now(), Uuid::now_v7());
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
        let row = txs::Entity::find_by_id(ids[0])
            .one(store.db())
            .await
            .expect("read")
            .expect("row");
        assert_ne!(row.lease_owner, Some(core));
        assert!(
            row.lease_until
                .is_some_and(|t| t > now + chrono::Duration::minutes(5))
        );
    }

    async fn a_renewed_lease_keeps_a_record_from_other_cores_and_a_lost_one_is_not_taken_back(
        store: Store,
    ) {
        let id = one_open_record(&store).await;
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let t0 = Utc::now() + chrono::Duration::seconds(5);
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
        let (first, stale) = (
            store
                .open_transaction(id)
                .await
                .expect("read")
                .expect("stored"),
            store
                .open_transaction(id)
                .await
                .expect("read")
                .expect("stored"),
        );
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
        let now = store
            .open_transaction(id)
            .await
            .expect("read")
            .expect("stored");
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

    crate::store::tests::on_both_backends!(
        a_core_follows_every_open_record_in_turn_when_they_outnumber_its_batch,
        a_record_its_request_holds_waits_for_the_hand_over_or_the_hold_to_run_out,
        a_failed_record_mined_after_all_has_its_key_answer_from_it,
        a_refusal_fails_no_record_that_was_sent_meanwhile,
        a_key_outlives_its_retention_until_its_record_has_been_settled_as_long,
        a_flushed_broadcast_log_has_handed_its_records_over,
        an_unreadable_row_does_not_keep_the_others_from_being_followed,
        a_renewed_lease_keeps_a_record_from_other_cores_and_a_lost_one_is_not_taken_back,
        a_worker_holding_an_older_copy_of_a_record_changes_nothing,
    );
}
