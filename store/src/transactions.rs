//! Transaction records: stored with their signed payload inside the signing transaction, then
//! re-signed, broadcast and settled by conditional UPDATEs on the revision their writer read,
//! so two workers acting on one record never both change it.

use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter,
    sea_query::Expr,
};
use uuid::Uuid;

use super::{REQUEST_HOLD, Store, entities::transactions as txs};
use alloy::primitives::Address;

use crate::Conn;
use crate::error::{Result, StoreError};
use walletops_domain::{
    Effects, OpenTransaction, StatusChange, TransactionRecord, TxKind, TxStatus, WalletAddress,
};

/// A record's change of status: the status, why (for failures), and a history note.
struct Change(TxStatus, Option<String>, Option<String>);

/// A signed transaction about to be stored, before its first broadcast.
#[derive(Debug, Clone)]
pub struct NewTransaction {
    /// The record's id.
    pub id: Uuid,
    /// Its owner.
    pub user_id: Uuid,
    /// The wallet that signed it.
    pub wallet_id: Uuid,
    /// The chain's slug.
    pub chain: String,
    /// The chain's id (EVM) or the cluster's number.
    pub chain_id: i64,
    /// What the write does.
    pub kind: TxKind,
    /// The signing wallet's address.
    pub from: WalletAddress,
    /// The recipient or contract, as the record shows it.
    pub to: String,
    /// `native` or `token`, as the request named it.
    pub asset: Option<String>,
    /// The token's address or mint, if any.
    pub token: Option<String>,
    /// The amount in base units, as text.
    pub amount: Option<String>,
    /// The request as the caller made it, for the record.
    pub request: serde_json::Value,
    /// The signed transaction's hash or signature.
    pub hash: String,
    /// EVM: the nonce it was signed with.
    pub nonce: Option<u64>,
    /// The signed bytes, as broadcast.
    pub signed_payload: Vec<u8>,
    /// The key it answers, if any.
    pub idempotency_key: Option<Uuid>,
    /// A first history note, if any.
    pub note: Option<String>,
    /// Solana: the last block height at which the payload's blockhash is valid.
    pub valid_until: Option<u64>,
    /// Until when the request storing it holds it (`REQUEST_HOLD`); none: the monitor's at once.
    pub held_until: Option<DateTime<Utc>>,
    /// What its simulation showed it does to the wallet, if that was read.
    pub simulated_effects: Option<Effects>,
    /// Whether it runs through the wallet's guard, with on-chain checks.
    pub guarded: bool,
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
    i64::try_from(n).map_err(|_| StoreError::Corrupt(anyhow::anyhow!("nonce overflow")))
}

impl Store {
    /// Stores a signed transaction with status `SUBMITTED`, inside the signing transaction,
    /// and returns it as stored.
    pub async fn insert_transaction<C: Conn>(
        &self,
        conn: &C,
        new: NewTransaction,
    ) -> Result<OpenTransaction> {
        let conn = conn.sea();
        self.insert_transactions(conn, vec![new])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Corrupt(anyhow::anyhow!("stored nothing")))
    }

    /// Stores signed transactions with status `SUBMITTED` in a few INSERTs
    /// (`in_cached_shapes`), inside the signing transaction, and returns them as stored, in
    /// order.
    pub async fn insert_transactions<C: Conn>(
        &self,
        conn: &C,
        news: Vec<NewTransaction>,
    ) -> Result<Vec<OpenTransaction>> {
        let conn = conn.sea();
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
                    from_address: new.from.to_string(),
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
                    simulated_effects: new
                        .simulated_effects
                        .as_ref()
                        .map(serde_json::to_string)
                        .transpose()
                        .map_err(|e| StoreError::corrupt(format!("effects as JSON: {e}")))?,
                    final_effects: None,
                    effects_difference: None,
                    guarded: new.guarded,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for run in super::in_cached_shapes(models.iter().collect()) {
            txs::Entity::insert_many(
                run.into_iter()
                    .cloned()
                    .map(IntoActiveModel::into_active_model),
            )
            .exec_without_returning(conn)
            .await?;
        }
        let about = models.iter().map(|m| (m.id, m.user_id, m.chain.clone()));
        self.insert_events(conn, about, TxStatus::Submitted).await?;
        models.into_iter().map(TryInto::try_into).collect()
    }

    /// Replaces the signed payload of an open transaction (a replacement with a higher fee, or
    /// a re-signing with a new nonce), keeping every earlier hash: any of them may be mined.
    #[allow(clippy::too_many_arguments)]
    pub async fn resign_transaction<C: Conn>(
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
        let conn = conn.sea();
        let mut hashes: Vec<String> = open.hashes.iter().map(ToString::to_string).collect();
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
            return Err(StoreError::Corrupt(anyhow::anyhow!(
                "transaction {} changed while it was being re-signed",
                open.id
            )));
        }
        if status != open.status {
            self.insert_event_of(conn, open, status).await?;
        }
        Ok(())
    }

    /// Notes that the current payloads of `ids` were sent to the node by `at`, and ends the
    /// holds of their requests on them: an UPDATE a run of `in_cached_shapes`.
    pub async fn record_broadcasts(&self, ids: &[Uuid], at: DateTime<Utc>) -> Result<()> {
        for run in super::in_cached_shapes(ids.to_vec()) {
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
                .filter(txs::Column::Id.is_in(run))
                .exec(self.sea())
                .await?;
        }
        Ok(())
    }

    /// Forgets what a restart of chain `slug` (id `chain_id`) has made untrue, for dev chains,
    /// which start empty each time: its nonce ledger rows go, and its open records end
    /// DROPPED with `why` (the chain they were sent to is gone). Returns how many ended.
    pub async fn forget_chain_state(&self, slug: &str, chain_id: i64, why: &str) -> Result<u64> {
        let txn = self.begin_sea().await?;
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

    /// Moves `open` to `status` (with `error` for failures), appending to its history; false
    /// when the record is no longer as `open` shows it (another worker settled or re-signed it
    /// meanwhile), and then nothing changed.
    pub async fn settle_transaction<C: Conn>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        status: TxStatus,
        error: Option<String>,
        note: Option<String>,
        hash: Option<&str>,
    ) -> Result<bool> {
        let conn = conn.sea();
        let change = Change(status, error, note);
        self.settle_as_seen(conn, open, still_as_seen(open), change, hash, None)
            .await
    }

    /// `settle_transaction`, keeping in the same statement what the transaction did to its
    /// wallet (`landed`, read from the chain) and how that differs from its simulation.
    pub async fn settle_with_effects<C: Conn>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        (status, error, note): (TxStatus, Option<String>, Option<String>),
        hash: &str,
        landed: &Effects,
        difference: Option<String>,
    ) -> Result<bool> {
        let landed = serde_json::to_string(landed)
            .map_err(|e| StoreError::corrupt(format!("effects as JSON: {e}")))?;
        let change = Change(status, error, note);
        self.settle_as_seen(
            conn.sea(),
            open,
            still_as_seen(open),
            change,
            Some(hash),
            Some((landed, difference)),
        )
        .await
    }

    /// Ends `open` as `status` (FAILED or DROPPED) with `error`, in `conn`'s transaction.
    /// `answered`: the refusal its own request answers with, which fails the key's claim
    /// too; then only while nobody has sent the record with success: should the request's
    /// hold have run out (another core's clock ahead of this one's), a monitor may have sent
    /// it meanwhile, and failing the key would have the caller pay again while that send is
    /// mined. False, with nothing changed, when the record is not as `open` shows it (or,
    /// answered, was sent).
    pub async fn fail_transaction<C: Conn>(
        &self,
        conn: &C,
        open: &OpenTransaction,
        status: TxStatus,
        error: String,
        answered: Option<String>,
    ) -> Result<bool> {
        let conn = conn.sea();
        let mut seen = still_as_seen(open);
        if answered.is_some() {
            seen = seen.add(txs::Column::LastBroadcastAt.is_null());
        }
        let failed = self
            .settle_as_seen(
                conn,
                open,
                seen,
                Change(status, Some(error), None),
                None,
                None,
            )
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
    pub async fn ended_records_at_nonce(
        &self,
        open: &OpenTransaction,
    ) -> Result<Vec<OpenTransaction>> {
        let Some(nonce) = open.nonce else {
            return Ok(Vec::new());
        };
        txs::Entity::find()
            .filter(txs::Column::ChainId.eq(open.chain_id))
            .filter(txs::Column::FromAddress.eq(open.from.to_string()))
            .filter(txs::Column::Nonce.eq(to_i64(nonce)?))
            .filter(txs::Column::Status.is_in(ended_unmined()))
            .filter(txs::Column::Id.ne(open.id))
            .all(self.sea())
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
    pub async fn settle_ended(
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
        let txn = self.begin_sea().await?;
        let settled = self
            .settle_as_seen(
                &txn,
                dropped,
                seen,
                Change(status, error, Some(note)),
                Some(hash),
                None,
            )
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
        Change(status, error, note): Change,
        hash: Option<&str>,
        effects: Option<(String, Option<String>)>,
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
        if let Some((landed, difference)) = effects {
            update = update
                .col_expr(txs::Column::FinalEffects, Expr::value(landed))
                .col_expr(txs::Column::EffectsDifference, Expr::value(difference));
        }
        let updated = update.filter(seen).exec(conn).await?.rows_affected == 1;
        if updated && status != open.status {
            self.insert_event_of(conn, open, status).await?;
        }
        Ok(updated)
    }

    /// Per chain slug with open records: how many, and when the oldest was made.
    pub async fn open_records_by_chain(&self) -> Result<Vec<(String, i64, DateTime<Utc>)>> {
        use sea_orm::QuerySelect;
        Ok(txs::Entity::find()
            .select_only()
            .column(txs::Column::Chain)
            .column_as(txs::Column::Id.count(), "open")
            .column_as(txs::Column::CreatedAt.min(), "oldest")
            .filter(txs::Column::Status.is_in(open_statuses()))
            .group_by(txs::Column::Chain)
            .into_tuple()
            .all(self.sea())
            .await?)
    }

    /// Whether an open record of `from` on chain `chain_id` holds `nonce`, read in `conn`.
    pub async fn nonce_held_open<C: Conn>(
        &self,
        conn: &C,
        chain_id: i64,
        from: Address,
        nonce: u64,
    ) -> Result<bool> {
        let conn = conn.sea();
        Ok(txs::Entity::find()
            .filter(txs::Column::ChainId.eq(chain_id))
            .filter(txs::Column::FromAddress.eq(from.to_checksum(None)))
            .filter(txs::Column::Nonce.eq(to_i64(nonce)?))
            .filter(txs::Column::Status.is_in(open_statuses()))
            .one(conn)
            .await?
            .is_some())
    }

    /// The open (or any) transaction `id` with what the monitor needs.
    pub async fn open_transaction(&self, id: Uuid) -> Result<Option<OpenTransaction>> {
        txs::Entity::find_by_id(id)
            .one(self.sea())
            .await?
            .map(OpenTransaction::try_from)
            .transpose()
    }

    /// The caller's transaction `id` if `user_id` owns it. Another user's transaction is
    /// reported exactly like a missing one, so ids cannot be probed.
    pub async fn find_transaction(
        &self,
        user_id: Uuid,
        id: Uuid,
    ) -> Result<Option<TransactionRecord>> {
        txs::Entity::find_by_id(id)
            .filter(txs::Column::UserId.eq(user_id))
            .one(self.sea())
            .await?
            .map(TransactionRecord::try_from)
            .transpose()
    }

    /// Up to `limit` of `user_id`'s records, newest first, older than record `before` when
    /// given, of chain `chain` and status `status` when given. Record ids are UUIDv7, so
    /// their order is the order they were made in.
    pub async fn list_transactions(
        &self,
        user_id: Uuid,
        chain: Option<&str>,
        status: Option<TxStatus>,
        before: Option<Uuid>,
        limit: u64,
    ) -> Result<Vec<TransactionRecord>> {
        use sea_orm::{QueryOrder, QuerySelect};
        let mut query = txs::Entity::find().filter(txs::Column::UserId.eq(user_id));
        if let Some(chain) = chain {
            query = query.filter(txs::Column::Chain.eq(chain));
        }
        if let Some(status) = status {
            query = query.filter(txs::Column::Status.eq(enum_text(status)));
        }
        if let Some(before) = before {
            query = query.filter(txs::Column::Id.lt(before));
        }
        query
            .order_by_desc(txs::Column::Id)
            .limit(limit)
            .all(self.sea())
            .await?
            .into_iter()
            .map(TransactionRecord::try_from)
            .collect()
    }
}

impl Store {
    /// The chains `user_id` has any record on, by slug.
    pub async fn chains_used(&self, user_id: Uuid) -> Result<Vec<String>> {
        use sea_orm::QuerySelect;
        let used = txs::Entity::find()
            .select_only()
            .column(txs::Column::Chain)
            .distinct()
            .filter(txs::Column::UserId.eq(user_id))
            .into_tuple::<String>()
            .all(self.sea())
            .await?;
        Ok(used)
    }
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
