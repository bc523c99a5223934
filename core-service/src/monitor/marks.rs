//! What the monitor remembers of the records it follows, in memory: one `Remembered` per
//! record in one map (`Memory`), forgotten in one place (`Memory::forget`, `taken_over`).
//! Each of its parts is read and written through a view (`PerRecord`): times per record, the
//! chain head at which each was last found unmined, the pauses between its resends and how
//! many there were.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use chrono::{DateTime, Utc};
use uuid::Uuid;

/// What the monitor remembers of one record (each part described where `Monitor` names its
/// view).
#[derive(Debug, Default)]
pub(super) struct Remembered {
    unanswered: Option<DateTime<Utc>>,
    raised: Option<DateTime<Utc>>,
    taken: Option<DateTime<Utc>>,
    refused_since: Option<DateTime<Utc>>,
    failing: Option<DateTime<Utc>>,
    held: Option<DateTime<Utc>>,
    gave_up: Option<DateTime<Utc>>,
    unmined: Option<Head>,
    resends: Option<Pause>,
    resent: Option<Tally>,
}

/// How long each part of what is remembered lasts once it stops changing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Horizons {
    /// When this core gave a record up: the other cores have it for this long.
    pub(super) gave_up: DateTime<Utc>,
    /// When the node showed it holds the record.
    pub(super) held: DateTime<Utc>,
    /// Every other part: records settled or followed by another core since, mostly.
    pub(super) rest: DateTime<Utc>,
}

impl Remembered {
    /// Forgets what another core's turn with the record made stale: a refusal, a taken
    /// nonce, a failing node, a held check, the head it was unmined at and the pauses of its
    /// resends. Kept: when this core last raised its fee and gave it up (they pace this
    /// core's own acts) and its resends so far (reported when it ends).
    fn taken_over(&mut self) {
        self.unanswered = None;
        self.taken = None;
        self.refused_since = None;
        self.failing = None;
        self.held = None;
        self.unmined = None;
        self.resends = None;
    }

    /// Forgets each part older than its horizon.
    fn forget(&mut self, h: Horizons) {
        fn older<V: Dated>(v: &mut Option<V>, horizon: DateTime<Utc>) {
            if v.as_ref().is_some_and(|v| v.at() < horizon) {
                *v = None;
            }
        }
        older(&mut self.unanswered, h.rest);
        older(&mut self.raised, h.rest);
        older(&mut self.taken, h.rest);
        older(&mut self.refused_since, h.rest);
        older(&mut self.failing, h.rest);
        older(&mut self.held, h.held);
        older(&mut self.gave_up, h.gave_up);
        older(&mut self.unmined, h.rest);
        older(&mut self.resends, h.rest);
        older(&mut self.resent, h.rest);
    }

    /// Whether nothing of the record is remembered.
    fn is_empty(&self) -> bool {
        self.unanswered.is_none()
            && self.raised.is_none()
            && self.taken.is_none()
            && self.refused_since.is_none()
            && self.failing.is_none()
            && self.held.is_none()
            && self.gave_up.is_none()
            && self.unmined.is_none()
            && self.resends.is_none()
            && self.resent.is_none()
    }
}

/// Everything the monitor remembers, by record.
#[derive(Debug, Clone, Default)]
pub(super) struct Memory(Arc<Mutex<HashMap<Uuid, Remembered>>>);

impl Memory {
    fn map(&self) -> MutexGuard<'_, HashMap<Uuid, Remembered>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Another core followed record `id` since this one last did (`Remembered::taken_over`).
    pub(super) fn taken_over(&self, id: Uuid) {
        let mut map = self.map();
        if let Some(r) = map.get_mut(&id) {
            r.taken_over();
            if r.is_empty() {
                map.remove(&id);
            }
        }
    }

    /// Forgets what is older than `horizons`, and the records nothing is left of.
    pub(super) fn forget(&self, horizons: Horizons) {
        self.map().retain(|_, r| {
            r.forget(horizons);
            !r.is_empty()
        });
    }

    /// The view of one part of what is remembered.
    pub(super) fn part<V>(&self, field: fn(&mut Remembered) -> &mut Option<V>) -> PerRecord<V> {
        PerRecord {
            memory: self.clone(),
            field,
        }
    }

    /// The views of every part, as `Monitor` holds them.
    pub(super) fn parts(&self) -> Parts {
        Parts {
            unanswered: self.part(|r| &mut r.unanswered),
            raised: self.part(|r| &mut r.raised),
            taken: self.part(|r| &mut r.taken),
            refused_since: self.part(|r| &mut r.refused_since),
            failing: self.part(|r| &mut r.failing),
            held: self.part(|r| &mut r.held),
            gave_up: self.part(|r| &mut r.gave_up),
            unmined: self.part(|r| &mut r.unmined),
            resends: self.part(|r| &mut r.resends),
            resent: self.part(|r| &mut r.resent),
        }
    }
}

/// The views of every part of what is remembered.
#[allow(missing_docs)]
pub(super) struct Parts {
    pub(super) unanswered: Marks,
    pub(super) raised: Marks,
    pub(super) taken: Marks,
    pub(super) refused_since: Marks,
    pub(super) failing: Marks,
    pub(super) held: Marks,
    pub(super) gave_up: Marks,
    pub(super) unmined: Unmined,
    pub(super) resends: Resends,
    pub(super) resent: Counts,
}

/// One part of what is remembered of each record.
pub(super) struct PerRecord<V> {
    memory: Memory,
    field: fn(&mut Remembered) -> &mut Option<V>,
}

impl<V> Clone for PerRecord<V> {
    fn clone(&self) -> Self {
        Self {
            memory: self.memory.clone(),
            field: self.field,
        }
    }
}

impl<V> std::fmt::Debug for PerRecord<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PerRecord")
    }
}

/// What a record's value was last changed at.
pub(super) trait Dated {
    fn at(&self) -> DateTime<Utc>;
}

impl<V> PerRecord<V> {
    /// `f` of the part of `id`, under the lock. A record enters the map only when `f` sets
    /// something of it, and leaves it when nothing of it is left: reading or clearing what
    /// is not remembered (most of a sweep's questions) changes nothing.
    fn with<T>(&self, id: Uuid, f: impl FnOnce(&mut Option<V>) -> T) -> T {
        let mut map = self.memory.map();
        let Some(record) = map.get_mut(&id) else {
            let mut part = None;
            let out = f(&mut part);
            if part.is_some() {
                let mut record = Remembered::default();
                *(self.field)(&mut record) = part;
                map.insert(id, record);
            }
            return out;
        };
        let out = f((self.field)(record));
        if record.is_empty() {
            map.remove(&id);
        }
        out
    }

    pub(super) fn clear(&self, id: Uuid) {
        self.with(id, |v| *v = None);
    }

    pub(super) fn marked(&self, id: Uuid) -> bool {
        self.with(id, |v| v.is_some())
    }

    /// The records with this part.
    pub(super) fn ids(&self) -> Vec<Uuid> {
        let mut map = self.memory.map();
        map.iter_mut()
            .filter_map(|(id, r)| (self.field)(r).is_some().then_some(*id))
            .collect()
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
        self.with(id, |v| *v.get_or_insert_with(Utc::now))
    }

    /// Marks `id` now.
    pub(super) fn set(&self, id: Uuid) {
        self.with(id, |v| *v = Some(crate::clock::now()));
    }

    /// Whether `id` was marked less than `period` ago.
    pub(super) fn within(&self, id: Uuid, period: chrono::Duration) -> bool {
        self.with(id, |v| {
            v.is_some_and(|at| crate::clock::now() - at < period)
        })
    }

    /// Whether `period` has passed since the time marked for `id` (or none is marked); if
    /// so, marks now.
    pub(super) fn due(&self, id: Uuid, period: chrono::Duration) -> bool {
        let now = crate::clock::now();
        self.with(id, |v| {
            if v.is_some_and(|at| now - at < period) {
                return false;
            }
            *v = Some(now);
            true
        })
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
        let at = crate::clock::now();
        self.with(id, |v| *v = Some(Head { number: head, at }));
    }

    /// Whether `id` was found unmined at `head` itself. A match dates the mark anew: a
    /// record looked at every sweep keeps it however long the head stands (it ages out only
    /// when the record is no longer looked at), so a stalled node is asked no receipt for it.
    pub(super) fn at_head(&self, id: Uuid, head: u64) -> bool {
        let now = crate::clock::now();
        self.with(id, |v| match v {
            Some(h) if h.number == head => {
                h.at = now;
                true
            }
            _ => false,
        })
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
        let now = crate::clock::now();
        self.with(id, |v| {
            let pause = v.get_or_insert(Pause {
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
        })
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
        let at = crate::clock::now();
        self.with(id, |v| {
            let tally = v.get_or_insert(Tally { count: 0, at });
            tally.count += 1;
            tally.at = at;
        });
    }

    /// The count of `id`, forgotten.
    pub(super) fn take(&self, id: Uuid) -> u32 {
        self.with(id, |v| v.take().map_or(0, |t| t.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resends_pause_longer_each_time_up_to_the_cap() {
        let resends = Memory::default().parts().resends;
        let id = Uuid::now_v7();
        let (first, cap) = (chrono::Duration::seconds(1), chrono::Duration::seconds(5));
        assert!(resends.due(id, first, cap), "the first send is due at once");
        assert!(!resends.due(id, first, cap), "the next one waits");
        let pauses: Vec<i64> = (0..5)
            .map(|_| {
                let pause = resends.with(id, |v| {
                    let entry = v.as_mut().expect("marked");
                    let pause = (entry.next - crate::clock::now()).num_milliseconds();
                    // As if the pause had passed.
                    entry.next = crate::clock::now();
                    pause
                });
                assert!(resends.due(id, first, cap));
                pause
            })
            .collect();
        let seconds: Vec<i64> = pauses.iter().map(|ms| (ms + 500) / 1000).collect();
        assert_eq!(seconds, [1, 2, 4, 5, 5], "{pauses:?}");
        resends.clear(id);
        assert!(resends.due(id, first, cap), "cleared: due at once");
    }

    #[test]
    fn an_unmined_mark_in_use_does_not_age_out() {
        let memory = Memory::default();
        let unmined = memory.parts().unmined;
        let (seen, left) = (Uuid::now_v7(), Uuid::now_v7());
        let long_ago = crate::clock::now() - chrono::Duration::hours(1);
        for id in [seen, left] {
            unmined.found_at(id, 7);
            unmined.with(id, |v| v.as_mut().expect("marked").at = long_ago);
        }
        assert!(unmined.at_head(seen, 7), "found at this head");
        let horizon = crate::clock::now() - chrono::Duration::minutes(10);
        memory.forget(Horizons {
            gave_up: horizon,
            held: horizon,
            rest: horizon,
        });
        assert!(unmined.at_head(seen, 7), "looked at: kept");
        assert!(
            !unmined.at_head(left, 7),
            "not looked at for an hour: forgotten"
        );
        assert!(!unmined.at_head(seen, 8), "another head");
    }

    #[test]
    fn a_record_is_one_value_forgotten_in_one_place() {
        let memory = Memory::default();
        let parts = memory.parts();
        let id = Uuid::now_v7();
        parts.taken.set(id);
        parts.raised.set(id);
        parts.resent.add(id);
        parts.unmined.found_at(id, 7);
        assert_eq!(memory.map().len(), 1, "one value per record");
        memory.taken_over(id);
        assert!(!parts.taken.marked(id) && !parts.unmined.at_head(id, 7));
        assert!(parts.raised.marked(id), "this core's own pacing is kept");
        let later = crate::clock::now() + chrono::Duration::seconds(1);
        memory.forget(Horizons {
            gave_up: later,
            held: later,
            rest: later,
        });
        assert!(memory.map().is_empty(), "nothing left of it, it is gone");
        assert!(!parts.failing.marked(id), "reading a part leaves no trace");
        assert!(memory.map().is_empty());
    }
}
