//! The one clock of the core's timing rules: every "now" the core stores or compares
//! (leases, expiry, retry and resend times, throttle windows, held checks) is read here,
//! and every wait is tokio's. In the core's own tests this clock is tokio's as well, so a
//! test that pauses and advances tokio's time (`tokio::time::pause`, `advance`) moves the
//! clock with its timers: an hour of expiry takes no wall time. Elsewhere it is the
//! system's wall clock. The tidy test fails on a `Utc::now()` anywhere else in the core.

use chrono::{DateTime, Utc};

/// Now, by the core's clock.
pub fn now() -> DateTime<Utc> {
    #[cfg(test)]
    return on_tokio::now();
    #[cfg(not(test))]
    Utc::now()
}

#[cfg(test)]
mod on_tokio {
    use std::{
        sync::OnceLock,
        time::{Duration, Instant},
    };

    use chrono::{DateTime, Utc};

    /// A wall time and the instant it was read at, an hour back: every tokio instant of the
    /// process (paused ones included, which start where they were paused) comes after it.
    fn anchor() -> &'static (DateTime<Utc>, Instant) {
        static ANCHOR: OnceLock<(DateTime<Utc>, Instant)> = OnceLock::new();
        ANCHOR.get_or_init(|| {
            let back = Duration::from_secs(3600);
            let (wall, instant) = (Utc::now(), Instant::now());
            match instant.checked_sub(back) {
                Some(earlier) => (wall - chrono::Duration::hours(1), earlier),
                None => (wall, instant),
            }
        })
    }

    /// The anchor's wall time, moved on by tokio's clock since.
    pub(super) fn now() -> DateTime<Utc> {
        let (wall, instant) = anchor();
        let since = tokio::time::Instant::now()
            .into_std()
            .saturating_duration_since(*instant);
        *wall + chrono::Duration::from_std(since).unwrap_or(chrono::Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn advancing_tokio_time_moves_the_clock() {
        let before = now();
        tokio::time::pause();
        tokio::time::advance(std::time::Duration::from_secs(3600)).await;
        tokio::time::resume();
        let after = now();
        assert!(
            after - before >= chrono::Duration::hours(1),
            "{before} {after}"
        );
        assert!(after - before < chrono::Duration::hours(1) + chrono::Duration::minutes(1));
    }
}
