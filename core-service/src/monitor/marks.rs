//! What the monitor remembers of the records it follows, in memory: times per record, the
//! chain head at which each was last found unmined, the pauses between its resends and how
//! many there were.

use std::{
    collections::HashMap,
    sync::{Mutex, MutexGuard, PoisonError},
};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A value per record, kept in memory for the records this core follows; each is dated, and
/// forgotten once older than a horizon.
#[derive(Debug)]
pub(super) struct PerRecord<V>(Mutex<HashMap<Uuid, V>>);

impl<V> Default for PerRecord<V> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

/// What a record's value was last changed at.
pub(super) trait Dated {
    fn at(&self) -> DateTime<Utc>;
}

impl<V: Dated> PerRecord<V> {
    fn map(&self) -> MutexGuard<'_, HashMap<Uuid, V>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn clear(&self, id: Uuid) {
        self.map().remove(&id);
    }

    pub(super) fn marked(&self, id: Uuid) -> bool {
        self.map().contains_key(&id)
    }

    /// Forgets the values dated before `horizon`: records settled or followed by another
    /// core since, mostly.
    pub(super) fn forget_before(&self, horizon: DateTime<Utc>) {
        self.map().retain(|_, v| v.at() >= horizon);
    }
}

impl Dated for DateTime<Utc> {
    fn at(&self) -> DateTime<Utc> {
        *self
    }
}

/// A time per record.
pub(super) type Marks = PerRecord<DateTime<Utc>>;

impl Marks {
    /// The time marked for `id`, marked now if there was none.
    pub(super) fn first(&self, id: Uuid) -> DateTime<Utc> {
        *self.map().entry(id).or_insert_with(Utc::now)
    }

    /// Marks `id` now.
    pub(super) fn set(&self, id: Uuid) {
        self.map().insert(id, Utc::now());
    }

    /// The records marked.
    pub(super) fn ids(&self) -> Vec<Uuid> {
        self.map().keys().copied().collect()
    }

    /// Whether `id` was marked less than `period` ago.
    pub(super) fn within(&self, id: Uuid, period: chrono::Duration) -> bool {
        self.map()
            .get(&id)
            .is_some_and(|at| Utc::now() - *at < period)
    }

    /// Whether `period` has passed since the time marked for `id` (or none is marked); if
    /// so, marks now.
    pub(super) fn due(&self, id: Uuid, period: chrono::Duration) -> bool {
        let now = Utc::now();
        let mut map = self.map();
        if map.get(&id).is_some_and(|at| now - *at < period) {
            return false;
        }
        map.insert(id, now);
        true
    }
}

/// The chain head at which a record was last found unmined with its nonce unused. While the
/// head stays there, nothing about the record's inclusion can have changed: no receipt, no
/// nonce taken.
#[derive(Debug)]
pub(super) struct Head {
    number: u64,
    at: DateTime<Utc>,
}

impl Dated for Head {
    fn at(&self) -> DateTime<Utc> {
        self.at
    }
}

pub(super) type Unmined = PerRecord<Head>;

impl Unmined {
    /// Notes `id` found unmined at head `head`.
    pub(super) fn found_at(&self, id: Uuid, head: u64) {
        let at = Utc::now();
        self.map().insert(id, Head { number: head, at });
    }

    /// Whether `id` was found unmined at `head` itself.
    pub(super) fn at_head(&self, id: Uuid, head: u64) -> bool {
        self.map().get(&id).is_some_and(|h| h.number == head)
    }
}

/// The sends of a record's same bytes so far, and when the next may go.
#[derive(Debug)]
pub(super) struct Pause {
    sends: u32,
    next: DateTime<Utc>,
}

impl Dated for Pause {
    fn at(&self) -> DateTime<Utc> {
        self.next
    }
}

/// The pauses between sends of a record's same signed bytes to a node that lost them or gave
/// no verdict: one sweep, then doubling up to a cap, so a stalled node is not sent a backlog
/// every second.
pub(super) type Resends = PerRecord<Pause>;

impl Resends {
    /// Whether `id` may be sent again now (always, the first time); if so, the next send
    /// waits `first` times two to the number of sends so far, at most `cap`.
    pub(super) fn due(&self, id: Uuid, first: chrono::Duration, cap: chrono::Duration) -> bool {
        let now = Utc::now();
        let mut map = self.map();
        let pause = map.entry(id).or_insert(Pause {
            sends: 0,
            next: now,
        });
        if now < pause.next {
            return false;
        }
        let wait = first
            .checked_mul(1 << pause.sends.min(16))
            .map_or(cap, |p| p.min(cap));
        pause.sends += 1;
        pause.next = now + wait;
        true
    }
}

/// A count per record, and when it last grew.
#[derive(Debug)]
pub(super) struct Tally {
    count: u32,
    at: DateTime<Utc>,
}

impl Dated for Tally {
    fn at(&self) -> DateTime<Utc> {
        self.at
    }
}

/// The sends of each record's same bytes again, reported when it ends.
pub(super) type Counts = PerRecord<Tally>;

impl Counts {
    pub(super) fn add(&self, id: Uuid) {
        let at = Utc::now();
        let mut map = self.map();
        let tally = map.entry(id).or_insert(Tally { count: 0, at });
        tally.count += 1;
        tally.at = at;
    }

    /// The count of `id`, forgotten.
    pub(super) fn take(&self, id: Uuid) -> u32 {
        self.map().remove(&id).map_or(0, |t| t.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resends_pause_longer_each_time_up_to_the_cap() {
        let resends = Resends::default();
        let id = Uuid::now_v7();
        let (first, cap) = (chrono::Duration::seconds(1), chrono::Duration::seconds(5));
        assert!(resends.due(id, first, cap), "the first send is due at once");
        assert!(!resends.due(id, first, cap), "the next one waits");
        let pauses: Vec<i64> = (0..5)
            .map(|_| {
                let mut map = resends.map();
                let entry = map.get_mut(&id).expect("marked");
                let pause = (entry.next - Utc::now()).num_milliseconds();
                // As if the pause had passed.
                entry.next = Utc::now();
                drop(map);
                assert!(resends.due(id, first, cap));
                pause
            })
            .collect();
        let seconds: Vec<i64> = pauses.iter().map(|ms| (ms + 500) / 1000).collect();
        assert_eq!(seconds, [1, 2, 4, 5, 5], "{pauses:?}");
        resends.clear(id);
        assert!(resends.due(id, first, cap), "cleared: due at once");
    }
}
