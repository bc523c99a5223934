//! Per-user request budgets: `writes_per_minute` writes (GetQuote included) and
//! `reads_per_minute` reads, counted over all of a user's keys.
//!
//! The budget is a sliding window: a request is admitted when fewer than N requests of its
//! kind were admitted in the 60 seconds before it, and a refused caller is told to retry when
//! the oldest of those leaves the window. That is the contract's "N per minute" exactly. A
//! token bucket (GCRA, as in `governor`) refills one request every 60/N seconds instead, so
//! the 16th write of a minute could pass whenever the first fifteen took more than four
//! seconds; that is why this module does not use one.

use std::{
    collections::{HashMap, VecDeque},
    sync::Mutex,
    time::{Duration, Instant},
};

use uuid::Uuid;

use crate::{
    config::RateLimits,
    error::{Result, WalletOpsError},
};

/// The window every budget is counted over.
const WINDOW: Duration = Duration::from_secs(60);

/// Which budget a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Budget {
    /// Reads: listing wallets, balances, transactions, keys.
    Read,
    /// Writes: every state-changing RPC, and GetQuote.
    Write,
}

impl Budget {
    fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// Admits or refuses requests per user and budget, in this process.
#[derive(Debug)]
pub struct RateLimiter {
    limits: RateLimits,
    admitted: Mutex<HashMap<(Uuid, Budget), VecDeque<Instant>>>,
}

impl RateLimiter {
    /// A limiter with the given budgets.
    pub fn new(limits: RateLimits) -> Self {
        Self {
            limits,
            admitted: Mutex::new(HashMap::new()),
        }
    }

    fn limit(&self, budget: Budget) -> u32 {
        match budget {
            Budget::Read => self.limits.reads_per_minute,
            Budget::Write => self.limits.writes_per_minute,
        }
    }

    /// Admits one request of `user` against `budget`, or answers `RATE_LIMITED` with the
    /// time until one would be admitted.
    pub fn admit(&self, user: Uuid, budget: Budget) -> Result<()> {
        self.admit_at(user, budget, Instant::now())
    }

    fn admit_at(&self, user: Uuid, budget: Budget, now: Instant) -> Result<()> {
        let limit = self.limit(budget);
        let mut admitted = self
            .admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let log = admitted.entry((user, budget)).or_default();
        while log
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            log.pop_front();
        }
        if log.len() < limit as usize {
            log.push_back(now);
            return Ok(());
        }
        // The log holds exactly `limit` entries here; the oldest frees a place when it leaves.
        let retry_after = log.front().map_or(WINDOW, |oldest| {
            WINDOW.saturating_sub(now.duration_since(*oldest))
        });
        Err(WalletOpsError::RateLimited {
            kind: budget.as_str(),
            limit,
            retry_after,
        })
    }

    /// Forgets users with nothing in the window, so memory follows active users only.
    pub fn prune(&self) {
        let now = Instant::now();
        let mut admitted = self
            .admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        admitted.retain(|_, log| log.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> RateLimiter {
        RateLimiter::new(RateLimits {
            writes_per_minute: 3,
            reads_per_minute: 5,
        })
    }

    #[test]
    fn refuses_past_the_budget_until_the_oldest_leaves_the_window() {
        let l = limiter();
        let user = Uuid::now_v7();
        let t0 = Instant::now();
        for i in 0..3 {
            l.admit_at(user, Budget::Write, t0 + Duration::from_secs(i))
                .expect("within budget");
        }
        let refused = l.admit_at(user, Budget::Write, t0 + Duration::from_secs(10));
        match refused {
            Err(WalletOpsError::RateLimited {
                retry_after, limit, ..
            }) => {
                assert_eq!(limit, 3);
                assert_eq!(retry_after, Duration::from_secs(50));
            }
            other => panic!("expected RATE_LIMITED, got {other:?}"),
        }
        // Reads and other users draw from their own budgets.
        l.admit_at(user, Budget::Read, t0).expect("reads apart");
        l.admit_at(Uuid::now_v7(), Budget::Write, t0)
            .expect("other user apart");
        // Once the first write is a minute old, one more is admitted, and only one.
        l.admit_at(user, Budget::Write, t0 + WINDOW)
            .expect("window moved");
        assert!(l.admit_at(user, Budget::Write, t0 + WINDOW).is_err());
    }

    #[test]
    fn prune_forgets_idle_users() {
        let l = limiter();
        l.admit(Uuid::now_v7(), Budget::Read).expect("admit");
        l.prune();
        assert_eq!(l.admitted.lock().expect("lock").len(), 1);
    }
}
