//! Test barriers, compiled only with the `failpoints` feature: the first N requests to reach
//! a named point wait there for each other, so that a race test makes its racers meet
//! instead of hoping their timing does. `BARRIERS="write-before-run=2"` (beside
//! `FAILPOINTS`) holds the first two writes after they found their key free, until both are
//! there (at most 30 s).

/// Waits at point `name` until as many as its barrier names have arrived (none without the
/// `failpoints` feature or a barrier on `name`).
pub async fn wait(name: &'static str) {
    #[cfg(feature = "failpoints")]
    armed::wait(name).await;
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

#[cfg(feature = "failpoints")]
mod armed {
    use std::{collections::HashMap, sync::OnceLock, time::Duration};

    use tokio::sync::watch;

    /// How long a racer waits for the others before it goes on alone.
    const AT_MOST: Duration = Duration::from_secs(30);

    /// Each point's barrier: how many to wait for, and how many have arrived.
    fn barriers() -> &'static HashMap<String, (usize, watch::Sender<usize>)> {
        static BARRIERS: OnceLock<HashMap<String, (usize, watch::Sender<usize>)>> = OnceLock::new();
        BARRIERS.get_or_init(|| {
            std::env::var("BARRIERS")
                .unwrap_or_default()
                .split(';')
                .filter_map(|b| {
                    let (name, n) = b.split_once('=')?;
                    let n: usize = n.trim().parse().ok()?;
                    Some((name.trim().to_owned(), (n, watch::Sender::new(0))))
                })
                .collect()
        })
    }

    pub(super) async fn wait(name: &str) {
        let Some((n, arrived)) = barriers().get(name) else {
            return;
        };
        let mut mine = None;
        arrived.send_modify(|count| {
            if *count < *n {
                *count += 1;
                mine = Some(*count);
            }
        });
        // Later arrivals pass: the barrier holds only the first N.
        if mine.is_none() {
            return;
        }
        let mut seen = arrived.subscribe();
        let met = tokio::time::timeout(AT_MOST, seen.wait_for(|count| count >= n)).await;
        if met.is_err() {
            tracing::warn!(
                point = name,
                "a test barrier timed out: its racers did not meet"
            );
        }
    }
}
