//! Where a store call's statements run: the store's pool, or a database transaction that a
//! caller began (`Store::begin`) and ends (`Txn::commit`). Callers pass one along and never
//! name the database library.

use sea_orm::{ConnectionTrait, DatabaseTransaction};

use crate::error::Result;

/// A database transaction that will write, begun by `Store::begin`. Dropped without a
/// commit, it rolls back.
#[derive(Debug)]
pub struct Txn(pub DatabaseTransaction);

impl Txn {
    /// Makes its writes durable and visible.
    pub async fn commit(self) -> Result<()> {
        Ok(self.0.commit().await?)
    }

    /// Ends it without its writes.
    pub async fn rollback(self) -> Result<()> {
        Ok(self.0.rollback().await?)
    }
}

/// Something a store call runs its statements in: a `Txn`, or the pool (`Store::db`).
pub trait Conn: Sync {
    /// The database library's connection behind it.
    #[doc(hidden)]
    type Sea: ConnectionTrait + Conn;
    /// The database library's connection behind it.
    #[doc(hidden)]
    fn sea(&self) -> &Self::Sea;
}

impl Conn for Txn {
    type Sea = DatabaseTransaction;
    fn sea(&self) -> &DatabaseTransaction {
        &self.0
    }
}

/// The store's own statements run on the library's connections directly.
impl<T: ConnectionTrait + Sync> Conn for T {
    type Sea = T;
    fn sea(&self) -> &T {
        self
    }
}
