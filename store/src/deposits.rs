//! Deposits and where each chain's scan for them stands. One core at a time scans a chain
//! (the lease on its cursor row, taken as the monitor's are); each step of a scan (the
//! deposits it found, the blocks it read, the cursor moved past them, and their events)
//! commits in one database transaction, and only while the lease is still the scanner's.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, SubsecRound as _, Utc};
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, OnConflict},
};
use uuid::Uuid;

use super::{
    Store,
    entities::{deposit_blocks as blocks, deposit_cursors as cursors, deposits},
};
use crate::Conn;
use crate::error::{Result, StoreError};
use crate::lease::{Lease, Own, give_up};
use walletops_domain::{Deposit, DepositState};

/// The cursor row of a chain's lease (and, on EVM, its next block).
const CHAIN_ROW: &str = "";

/// What one step of a chain's scan found and where it ends.
#[derive(Debug, Default)]
pub struct ScanStep {
    /// Credits found, pending or ignored. One found again is left as it is, unless it was
    /// reverted: then it is back, in its new block.
    pub deposits: Vec<Deposit>,
    /// EVM: the blocks read, by number, with their hashes.
    pub blocks: Vec<(u64, String)>,
    /// EVM: the next block to scan.
    pub next_block: Option<u64>,
    /// EVM: block hashes below this are no longer kept.
    pub forget_below: Option<u64>,
    /// Solana: each address's newest signature read.
    pub signatures: Vec<(String, String)>,
}

/// Which deposits a list shows, newest first.
#[derive(Debug, Default, Clone)]
pub struct DepositFilter {
    /// Of one chain.
    pub chain: Option<String>,
    /// Of one wallet.
    pub wallet_id: Option<Uuid>,
    /// In one state.
    pub state: Option<DepositState>,
    /// First seen at or after.
    pub since: Option<DateTime<Utc>>,
    /// Before this one (the last of the previous page), by first-seen time and id.
    pub before: Option<(DateTime<Utc>, Uuid)>,
}

fn deposit_of(m: deposits::Model) -> Result<Deposit> {
    let state = DepositState::parse(&m.state).ok_or_else(|| {
        StoreError::Corrupt(anyhow::anyhow!("deposit {}: state {:?}", m.id, m.state))
    })?;
    Ok(Deposit {
        id: m.id,
        user_id: m.user_id,
        wallet_id: m.wallet_id,
        chain: m.chain,
        address: m.address,
        tx_hash: m.tx_hash,
        asset: m.asset,
        amount: m.amount,
        from: m.from_address,
        block: u64::try_from(m.block).unwrap_or_default(),
        block_hash: m.block_hash,
        state,
        ignored_reason: m.ignored_reason,
        created_at: m.created_at,
        updated_at: m.updated_at,
    })
}

fn row_of(d: &Deposit) -> deposits::ActiveModel {
    deposits::ActiveModel {
        id: Set(d.id),
        user_id: Set(d.user_id),
        wallet_id: Set(d.wallet_id),
        chain: Set(d.chain.clone()),
        address: Set(d.address.clone()),
        tx_hash: Set(d.tx_hash.clone()),
        asset: Set(d.asset.clone()),
        amount: Set(d.amount.clone()),
        from_address: Set(d.from.clone()),
        block: Set(i64::try_from(d.block).unwrap_or(i64::MAX)),
        block_hash: Set(d.block_hash.clone()),
        state: Set(d.state.as_str().to_owned()),
        ignored_reason: Set(d.ignored_reason.clone()),
        // To the microsecond, as PostgreSQL keeps it: a page token names it exactly.
        created_at: Set(d.created_at.trunc_subsecs(6)),
        updated_at: Set(d.updated_at),
    }
}

fn number(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Takes or keeps the lease on `chain`'s scan for `owner` until `until`. `Some(next
    /// block)` (itself `None` before the first EVM step) while `owner` holds it; `None`:
    /// another core scans the chain.
    pub async fn lease_deposit_scan(
        &self,
        chain: &str,
        owner: Uuid,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<Option<u64>>> {
        cursors::Entity::insert(cursors::ActiveModel {
            chain: Set(chain.to_owned()),
            address: Set(CHAIN_ROW.to_owned()),
            next_block: Set(None),
            last_signature: Set(None),
            lease_owner: Set(None),
            lease_until: Set(None),
            updated_at: Set(now),
        })
        .on_conflict(
            OnConflict::columns([cursors::Column::Chain, cursors::Column::Address])
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(self.sea())
        .await?;
        let lease = Lease {
            owner,
            now,
            until,
            own: Own::Renewed,
        };
        let leased = lease
            .take::<cursors::Entity>(
                Condition::all()
                    .add(cursors::Column::Chain.eq(chain))
                    .add(cursors::Column::Address.eq(CHAIN_ROW)),
            )
            .exec_with_returning(self.sea())
            .await?;
        Ok(leased
            .into_iter()
            .next()
            .map(|m| m.next_block.and_then(|n| u64::try_from(n).ok())))
    }

    /// Gives up every scan lease `owner` holds: a core stopping.
    pub async fn release_deposit_scans(&self, owner: Uuid) -> Result<()> {
        give_up::<cursors::Entity>(owner, Condition::all())
            .exec(self.sea())
            .await?;
        Ok(())
    }

    /// Commits one step of `owner`'s scan of `chain`: new deposits (announced `pending`
    /// unless ignored), reverted ones found again (announced `pending` again, in their new
    /// block), the blocks read and the cursors. `false`, with nothing written: the lease
    /// is no longer `owner`'s.
    pub async fn record_scan(&self, chain: &str, owner: Uuid, step: ScanStep) -> Result<bool> {
        let txn = self.begin_sea().await?;
        let now = Utc::now();
        // The lease, checked and the cursor moved in one statement.
        let mut cursor = cursors::Entity::update_many()
            .col_expr(cursors::Column::UpdatedAt, Expr::value(now))
            .filter(cursors::Column::Chain.eq(chain))
            .filter(cursors::Column::Address.eq(CHAIN_ROW))
            .filter(cursors::Column::LeaseOwner.eq(owner))
            .filter(cursors::Column::LeaseUntil.gt(now));
        if let Some(next) = step.next_block {
            cursor = cursor.col_expr(cursors::Column::NextBlock, Expr::value(number(next)));
        }
        if cursor.exec(&txn).await?.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(false);
        }
        let ids: Vec<Uuid> = step.deposits.iter().map(|d| d.id).collect();
        let mut known: HashMap<Uuid, DepositState> = HashMap::new();
        for run in super::in_cached_shapes(ids) {
            for (id, state) in deposits::Entity::find()
                .select_only()
                .column(deposits::Column::Id)
                .column(deposits::Column::State)
                .filter(deposits::Column::Id.is_in(run))
                .into_tuple::<(Uuid, String)>()
                .all(&txn)
                .await?
            {
                if let Some(state) = DepositState::parse(&state) {
                    known.insert(id, state);
                }
            }
        }
        let mut fresh = Vec::new();
        let mut back = Vec::new();
        let mut announced = Vec::new();
        let mut seen = HashSet::new();
        for d in step.deposits {
            if !seen.insert(d.id) {
                continue;
            }
            match known.get(&d.id) {
                None => {
                    if d.state != DepositState::Ignored {
                        announced.push((d.id, d.user_id, d.chain.clone()));
                    }
                    fresh.push(row_of(&d));
                }
                Some(DepositState::Reverted) => {
                    announced.push((d.id, d.user_id, d.chain.clone()));
                    back.push(d);
                }
                Some(_) => {}
            }
        }
        for run in super::in_cached_shapes(fresh) {
            deposits::Entity::insert_many(run)
                .on_conflict(
                    OnConflict::column(deposits::Column::Id)
                        .do_nothing()
                        .to_owned(),
                )
                .exec_without_returning(&txn)
                .await?;
        }
        for d in back {
            deposits::Entity::update_many()
                .col_expr(
                    deposits::Column::State,
                    Expr::value(DepositState::Pending.as_str()),
                )
                .col_expr(deposits::Column::Block, Expr::value(number(d.block)))
                .col_expr(deposits::Column::BlockHash, Expr::value(d.block_hash))
                .col_expr(deposits::Column::UpdatedAt, Expr::value(now))
                .filter(deposits::Column::Id.eq(d.id))
                .exec(&txn)
                .await?;
        }
        self.insert_deposit_events(&txn, announced, DepositState::Pending)
            .await?;
        let rows: Vec<_> = step
            .blocks
            .into_iter()
            .map(|(n, hash)| blocks::ActiveModel {
                chain: Set(chain.to_owned()),
                number: Set(number(n)),
                hash: Set(hash),
            })
            .collect();
        for run in super::in_cached_shapes(rows) {
            blocks::Entity::insert_many(run)
                .on_conflict(
                    OnConflict::columns([blocks::Column::Chain, blocks::Column::Number])
                        .update_column(blocks::Column::Hash)
                        .to_owned(),
                )
                .exec_without_returning(&txn)
                .await?;
        }
        if let Some(below) = step.forget_below {
            blocks::Entity::delete_many()
                .filter(blocks::Column::Chain.eq(chain))
                .filter(blocks::Column::Number.lt(number(below)))
                .exec(&txn)
                .await?;
        }
        for (address, signature) in step.signatures {
            cursors::Entity::insert(cursors::ActiveModel {
                chain: Set(chain.to_owned()),
                address: Set(address),
                next_block: Set(None),
                last_signature: Set(Some(signature)),
                lease_owner: Set(None),
                lease_until: Set(None),
                updated_at: Set(now),
            })
            .on_conflict(
                OnConflict::columns([cursors::Column::Chain, cursors::Column::Address])
                    .update_columns([cursors::Column::LastSignature, cursors::Column::UpdatedAt])
                    .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        }
        txn.commit().await?;
        Ok(true)
    }

    /// Deposits `which` (id, user) of `chain` enter `state`, in `txn`, each announced.
    async fn enter_state(
        &self,
        txn: &sea_orm::DatabaseTransaction,
        chain: &str,
        which: Vec<(Uuid, Uuid)>,
        state: DepositState,
    ) -> Result<()> {
        let now = Utc::now();
        for run in super::in_cached_shapes(which.iter().map(|(id, _)| *id).collect()) {
            deposits::Entity::update_many()
                .col_expr(deposits::Column::State, Expr::value(state.as_str()))
                .col_expr(deposits::Column::UpdatedAt, Expr::value(now))
                .filter(deposits::Column::Id.is_in(run))
                .exec(txn)
                .await?;
        }
        let told = which
            .into_iter()
            .map(|(id, user)| (id, user, chain.to_owned()))
            .collect();
        self.insert_deposit_events(txn, told, state).await
    }

    /// The hashes kept of `chain`'s blocks from `from` on, by number.
    pub async fn deposit_blocks(&self, chain: &str, from: u64) -> Result<Vec<(u64, String)>> {
        let rows = blocks::Entity::find()
            .filter(blocks::Column::Chain.eq(chain))
            .filter(blocks::Column::Number.gte(number(from)))
            .order_by_asc(blocks::Column::Number)
            .all(self.sea())
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|m| Some((u64::try_from(m.number).ok()?, m.hash)))
            .collect())
    }

    /// A reorganization of `chain` from block `fork` on, met by `owner`'s scan: its deposits
    /// there that were announced become `reverted` (announced), the blocks kept from there
    /// are forgotten and the scan goes back to `fork`. How many deposits were reverted;
    /// `None`, with nothing written: the lease is no longer `owner`'s.
    pub async fn revert_deposits_from(
        &self,
        chain: &str,
        owner: Uuid,
        fork: u64,
    ) -> Result<Option<usize>> {
        let txn = self.begin_sea().await?;
        let now = Utc::now();
        let moved = cursors::Entity::update_many()
            .col_expr(cursors::Column::NextBlock, Expr::value(number(fork)))
            .col_expr(cursors::Column::UpdatedAt, Expr::value(now))
            .filter(cursors::Column::Chain.eq(chain))
            .filter(cursors::Column::Address.eq(CHAIN_ROW))
            .filter(cursors::Column::LeaseOwner.eq(owner))
            .filter(cursors::Column::LeaseUntil.gt(now))
            .exec(&txn)
            .await?;
        if moved.rows_affected == 0 {
            txn.rollback().await?;
            return Ok(None);
        }
        let gone: Vec<(Uuid, Uuid)> = deposits::Entity::find()
            .select_only()
            .column(deposits::Column::Id)
            .column(deposits::Column::UserId)
            .filter(deposits::Column::Chain.eq(chain))
            .filter(deposits::Column::Block.gte(number(fork)))
            .filter(deposits::Column::State.is_in([
                DepositState::Pending.as_str(),
                DepositState::Confirmed.as_str(),
            ]))
            .into_tuple()
            .all(&txn)
            .await?;
        let reverted = gone.len();
        self.enter_state(&txn, chain, gone, DepositState::Reverted)
            .await?;
        blocks::Entity::delete_many()
            .filter(blocks::Column::Chain.eq(chain))
            .filter(blocks::Column::Number.gte(number(fork)))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(Some(reverted))
    }

    /// Confirms `chain`'s pending deposits in blocks up to `upto` (or those of `ids`),
    /// announcing each; how many.
    pub async fn confirm_deposits(
        &self,
        chain: &str,
        upto: Option<u64>,
        ids: Option<&[Uuid]>,
    ) -> Result<usize> {
        let txn = self.begin_sea().await?;
        let mut query = deposits::Entity::find()
            .select_only()
            .column(deposits::Column::Id)
            .column(deposits::Column::UserId)
            .filter(deposits::Column::Chain.eq(chain))
            .filter(deposits::Column::State.eq(DepositState::Pending.as_str()));
        if let Some(upto) = upto {
            query = query.filter(deposits::Column::Block.lte(number(upto)));
        }
        if let Some(ids) = ids {
            query = query.filter(deposits::Column::Id.is_in(ids.iter().copied()));
        }
        let due: Vec<(Uuid, Uuid)> = query.into_tuple().all(&txn).await?;
        if due.is_empty() {
            txn.rollback().await?;
            return Ok(0);
        }
        let confirmed = due.len();
        self.enter_state(&txn, chain, due, DepositState::Confirmed)
            .await?;
        txn.commit().await?;
        Ok(confirmed)
    }

    /// `chain`'s pending deposits, oldest block first, at most `limit`.
    pub async fn pending_deposits(&self, chain: &str, limit: u64) -> Result<Vec<Deposit>> {
        deposits::Entity::find()
            .filter(deposits::Column::Chain.eq(chain))
            .filter(deposits::Column::State.eq(DepositState::Pending.as_str()))
            .order_by_asc(deposits::Column::Block)
            .limit(limit)
            .all(self.sea())
            .await?
            .into_iter()
            .map(deposit_of)
            .collect()
    }

    /// The newest signature read of each of `chain`'s scanned addresses.
    pub async fn deposit_signatures(&self, chain: &str) -> Result<HashMap<String, String>> {
        let rows: Vec<(String, Option<String>)> = cursors::Entity::find()
            .select_only()
            .column(cursors::Column::Address)
            .column(cursors::Column::LastSignature)
            .filter(cursors::Column::Chain.eq(chain))
            .filter(cursors::Column::Address.ne(CHAIN_ROW))
            .into_tuple()
            .all(self.sea())
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(a, s)| Some((a, s?)))
            .collect())
    }

    /// `user_id`'s deposits that `filter` selects, newest first, at most `limit`.
    pub async fn list_deposits(
        &self,
        user_id: Uuid,
        filter: &DepositFilter,
        limit: u64,
    ) -> Result<Vec<Deposit>> {
        let mut query = deposits::Entity::find().filter(deposits::Column::UserId.eq(user_id));
        if let Some(chain) = &filter.chain {
            query = query.filter(deposits::Column::Chain.eq(chain.as_str()));
        }
        if let Some(wallet) = filter.wallet_id {
            query = query.filter(deposits::Column::WalletId.eq(wallet));
        }
        if let Some(state) = filter.state {
            query = query.filter(deposits::Column::State.eq(state.as_str()));
        }
        if let Some(since) = filter.since {
            query = query.filter(deposits::Column::CreatedAt.gte(since));
        }
        if let Some((at, id)) = filter.before {
            query = query.filter(
                Condition::any()
                    .add(deposits::Column::CreatedAt.lt(at))
                    .add(
                        Condition::all()
                            .add(deposits::Column::CreatedAt.eq(at))
                            .add(deposits::Column::Id.lt(id)),
                    ),
            );
        }
        query
            .order_by_desc(deposits::Column::CreatedAt)
            .order_by_desc(deposits::Column::Id)
            .limit(limit)
            .all(self.sea())
            .await?
            .into_iter()
            .map(deposit_of)
            .collect()
    }

    /// `user_id`'s deposit `id`.
    pub async fn get_deposit(&self, user_id: Uuid, id: Uuid) -> Result<Option<Deposit>> {
        deposits::Entity::find_by_id(id)
            .filter(deposits::Column::UserId.eq(user_id))
            .one(self.sea())
            .await?
            .map(deposit_of)
            .transpose()
    }

    /// Deposits `ids`, whoever's, for webhook bodies and watchers.
    pub async fn deposits_by_id<C: Conn>(&self, conn: &C, ids: &[Uuid]) -> Result<Vec<Deposit>> {
        let mut out = Vec::with_capacity(ids.len());
        for run in super::in_cached_shapes(ids.to_vec()) {
            for m in deposits::Entity::find()
                .filter(deposits::Column::Id.is_in(run))
                .all(conn.sea())
                .await?
            {
                out.push(deposit_of(m)?);
            }
        }
        Ok(out)
    }
}
