//! The EVM nonce ledger: nonces are handed out, locked and given back inside the transaction
//! that signs with them, under the row's lock, so no two signers ever get the same nonce.

use chrono::Utc;
use sea_orm::{
    ActiveValue::Set,
    ColumnTrait, EntityTrait, QueryFilter,
    sea_query::{Expr, ExprTrait, OnConflict},
};

use alloy::primitives::Address;

use super::{Store, entities::evm_nonces as nonces};
use crate::Conn;
use crate::error::{Result, StoreError};

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(anyhow::anyhow!("nonce ledger: {what}"))
}

impl Store {
    /// Whether the ledger has a row for `(chain_id, address)` yet.
    pub async fn has_nonce_row(&self, chain_id: i64, address: Address) -> Result<bool> {
        Ok(
            nonces::Entity::find_by_id((chain_id, address.to_checksum(None)))
                .one(self.sea())
                .await?
                .is_some(),
        )
    }

    /// Hands out the next `count` nonces of `(chain_id, address)` inside `conn`'s transaction
    /// and returns the first. The
    /// UPDATE takes the row lock (PostgreSQL) or the write lock (SQLite) until that transaction
    /// ends, so two signers, in one core or many, never get the same nonce. `floor` (the
    /// chain's pending nonce, when known) moves the ledger forward past transactions sent
    /// from the wallet outside the service; it never moves back.
    pub async fn allocate_nonce<C: Conn>(
        &self,
        conn: &C,
        chain_id: i64,
        address: Address,
        floor: Option<u64>,
        count: u64,
    ) -> Result<u64> {
        let conn = conn.sea();
        let count = i64::try_from(Ord::max(count, 1)).map_err(|_| corrupt("nonce overflow"))?;
        let floor = i64::try_from(floor.unwrap_or(0)).map_err(|_| corrupt("nonce overflow"))?;
        // One statement, the ledger's first row or the next nonces: the row is locked from
        // here to the end of the transaction, the shorter the better.
        let next = Expr::col((nonces::Entity, nonces::Column::NextNonce));
        let raised = Expr::case(next.clone().lt(floor), Expr::value(floor)).finally(next);
        let now = Utc::now();
        let row = nonces::Entity::insert(nonces::ActiveModel {
            chain_id: Set(chain_id),
            address: Set(address.to_checksum(None)),
            next_nonce: Set(floor + count),
            updated_at: Set(now),
        })
        .on_conflict(
            OnConflict::columns([nonces::Column::ChainId, nonces::Column::Address])
                .value(nonces::Column::NextNonce, raised.add(count))
                .value(nonces::Column::UpdatedAt, Expr::value(now))
                .to_owned(),
        )
        .exec_with_returning(conn)
        .await?;
        u64::try_from(row.next_nonce - count).map_err(|_| corrupt("negative nonce"))
    }

    /// Locks the ledger row of `(chain_id, address)` until `conn`'s transaction ends, as
    /// allocating does: whoever decides what holds one of its nonces holds it alone.
    pub async fn lock_nonce_row<C: Conn>(
        &self,
        conn: &C,
        chain_id: i64,
        address: Address,
    ) -> Result<()> {
        let conn = conn.sea();
        let locked = nonces::Entity::update_many()
            .col_expr(nonces::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(nonces::Column::ChainId.eq(chain_id))
            .filter(nonces::Column::Address.eq(address.to_checksum(None)))
            .exec(conn)
            .await?;
        if locked.rows_affected != 1 {
            return Err(corrupt("no ledger row to lock"));
        }
        Ok(())
    }

    /// Gives `nonce` back when it is the last one handed out, inside `conn`'s transaction.
    /// Returns false when later nonces are out already: the caller must fill the gap.
    pub async fn release_nonce<C: Conn>(
        &self,
        conn: &C,
        chain_id: i64,
        address: Address,
        nonce: u64,
    ) -> Result<bool> {
        let conn = conn.sea();
        let nonce = i64::try_from(nonce).map_err(|_| corrupt("nonce overflow"))?;
        let released = nonces::Entity::update_many()
            .col_expr(nonces::Column::NextNonce, Expr::value(nonce))
            .col_expr(nonces::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(nonces::Column::ChainId.eq(chain_id))
            .filter(nonces::Column::Address.eq(address.to_checksum(None)))
            .filter(nonces::Column::NextNonce.eq(nonce + 1))
            .exec(conn)
            .await?;
        Ok(released.rows_affected == 1)
    }
}
