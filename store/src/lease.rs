//! The one lease protocol of the background work: how a core takes rows of a table for a
//! while (open records in `leases.rs`, running payouts, approved writes, a chain's deposit
//! scan, webhook deliveries), renews them and gives them up. A row is taken by a conditional
//! UPDATE that repeats the condition under which it is free, so of several cores exactly one
//! wins each row, and a dead core's lease simply runs out.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, UpdateMany, sea_query::Expr};
use uuid::Uuid;

use crate::entities::{
    approvals, deposit_cursors, payouts, transactions, webhook_deliveries as deliveries,
};

/// A table whose rows cores lease: the columns the protocol reads and writes.
pub(crate) trait Leasable: EntityTrait {
    /// Who holds a row's lease; `None` for a table that does not keep it (an approved
    /// write is made once per lease, by whichever core took it).
    const OWNER: Option<Self::Column>;
    /// Until when a row is held.
    const UNTIL: Self::Column;
}

impl Leasable for transactions::Entity {
    const OWNER: Option<Self::Column> = Some(transactions::Column::LeaseOwner);
    const UNTIL: Self::Column = transactions::Column::LeaseUntil;
}

impl Leasable for payouts::Entity {
    const OWNER: Option<Self::Column> = Some(payouts::Column::LeaseOwner);
    const UNTIL: Self::Column = payouts::Column::LeaseUntil;
}

impl Leasable for deposit_cursors::Entity {
    const OWNER: Option<Self::Column> = Some(deposit_cursors::Column::LeaseOwner);
    const UNTIL: Self::Column = deposit_cursors::Column::LeaseUntil;
}

impl Leasable for approvals::Entity {
    const OWNER: Option<Self::Column> = None;
    const UNTIL: Self::Column = approvals::Column::LeaseUntil;
}

impl Leasable for deliveries::Entity {
    const OWNER: Option<Self::Column> = Some(deliveries::Column::LeaseOwner);
    const UNTIL: Self::Column = deliveries::Column::LeaseUntil;
}

/// Whether a core takes again the rows it already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Own {
    /// Its own rows are free to it: each round takes them again, which renews them (a
    /// record followed each sweep, a payout made round by round, a chain's scan).
    Renewed,
    /// Its own rows are in flight: taken once per lease, never twice by the same core (an
    /// approved write being made, a delivery being sent).
    InFlight,
}

/// One lease: `owner` takes rows at `now` until `until`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    /// The core taking the rows.
    pub(crate) owner: Uuid,
    /// The time the lease is taken at: a lease that ran out before it is free.
    pub(crate) now: DateTime<Utc>,
    /// Until when the rows are held.
    pub(crate) until: DateTime<Utc>,
    /// Whether the owner's own rows are free to it.
    pub(crate) own: Own,
}

impl Lease {
    /// The rows of `E` free for this lease: never leased, their lease run out or given up,
    /// or (`Own::Renewed`) the owner's own.
    pub(crate) fn free<E: Leasable>(&self) -> Condition {
        let free = Condition::any()
            .add(E::UNTIL.is_null())
            .add(E::UNTIL.lt(self.now));
        match (self.own, E::OWNER) {
            (Own::Renewed, Some(owner)) => free.add(owner.eq(self.owner)),
            _ => free,
        }
    }

    /// The UPDATE that takes the rows of `E` that `which` selects and that are still free.
    pub(crate) fn take<E: Leasable>(&self, which: Condition) -> UpdateMany<E> {
        let mut update = E::update_many();
        if let Some(owner) = E::OWNER {
            update = update.col_expr(owner, Expr::value(self.owner));
        }
        update
            .col_expr(E::UNTIL, Expr::value(self.until))
            .filter(which)
            .filter(self.free::<E>())
    }
}

/// The UPDATE that gives up `owner`'s leases of the rows of `E` that `which` selects. The
/// owner stays, so that the next core to take a row knows whose it was.
pub(crate) fn give_up<E: Leasable>(owner: Uuid, which: Condition) -> UpdateMany<E> {
    debug_assert!(E::OWNER.is_some(), "a lease no one owns is not given up");
    let mut update = E::update_many()
        .col_expr(E::UNTIL, Expr::value(Option::<DateTime<Utc>>::None))
        .filter(which);
    if let Some(column) = E::OWNER {
        update = update.filter(column.eq(owner));
    }
    update
}
