//! The one loop of the core's background work: a round, then a pause (cut short when the
//! work is woken), until told to stop. The approvals and payouts runners, the monitor, the
//! event sequencer, each chain's deposit scan and the webhook delivery run their rounds in
//! it, so each states only what its round does and how its rounds are spaced. Time is tokio's: tests run it on
//! paused time (`tokio::time::pause`), where a minute of pauses takes no wall time.

use std::{fmt::Display, future::Future, time::Duration};

use tokio::time::Instant;

/// How a runner spaces its rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// This long from the end of a round to the start of the next.
    After(Duration),
    /// As `After`, and never less than the round itself took: work slowed by what it asks
    /// (a node answering slowly) asks it less, not more.
    AtLeastRound(Duration),
}

impl Pace {
    /// The pause after a round that took `took`.
    fn pause(self, took: Duration) -> Duration {
        match self {
            Self::After(pause) => pause,
            Self::AtLeastRound(pause) => pause.max(took),
        }
    }
}

/// Runs `round` until `stop` completes, paced by `pace`; a round under way is finished
/// first. `wake` ends a pause early (a decision made on this core, a payout stored). A
/// failed round is logged under `name` and the next one comes as usual.
pub async fn run<R, RF, T, E, W, WF>(
    name: &str,
    pace: Pace,
    stop: impl Future<Output = ()>,
    mut round: R,
    mut wake: W,
) where
    R: FnMut() -> RF,
    RF: Future<Output = Result<T, E>>,
    E: Display,
    W: FnMut() -> WF,
    WF: Future<Output = ()>,
{
    tokio::pin!(stop);
    loop {
        let started = Instant::now();
        if let Err(e) = round().await {
            tracing::warn!(runner = name, error = %e, "a background round failed; trying again");
        }
        let pause = pace.pause(started.elapsed());
        tokio::select! {
            biased;
            () = &mut stop => return,
            () = tokio::time::sleep(pause) => {}
            () = wake() => {}
        }
    }
}

/// No wake: rounds come only at their pace.
pub async fn never() {
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    };

    use tokio::sync::Notify;

    use super::*;

    /// Rounds that note when each began, on paused time.
    fn counted() -> (Arc<std::sync::Mutex<Vec<Duration>>>, Instant) {
        (Arc::default(), Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_come_at_their_pace_until_the_stop() {
        let (began, start) = counted();
        let seen = Arc::clone(&began);
        let stop = tokio::time::sleep(Duration::from_millis(2_250));
        run(
            "test",
            Pace::After(Duration::from_millis(500)),
            stop,
            || {
                seen.lock().expect("lock").push(start.elapsed());
                async { Ok::<_, String>(()) }
            },
            never,
        )
        .await;
        let began = began.lock().expect("lock").clone();
        let ms: Vec<u128> = began.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [0, 500, 1000, 1500, 2000], "no round after the stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_round_spaces_the_next_by_its_own_length() {
        let (began, start) = counted();
        let seen = Arc::clone(&began);
        run(
            "test",
            Pace::AtLeastRound(Duration::from_millis(100)),
            tokio::time::sleep(Duration::from_millis(1_900)),
            || {
                seen.lock().expect("lock").push(start.elapsed());
                // Each round takes 400 ms: the pause after it is 400 ms, not 100.
                async {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    Ok::<_, String>(())
                }
            },
            never,
        )
        .await;
        let ms: Vec<u128> = began
            .lock()
            .expect("lock")
            .iter()
            .map(Duration::as_millis)
            .collect();
        assert_eq!(ms, [0, 800, 1600]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_starts_the_next_round_at_once_and_a_failure_does_not_stop_it() {
        let rounds = Arc::new(AtomicU32::new(0));
        let notify = Arc::new(Notify::new());
        let (counted, woken) = (Arc::clone(&rounds), Arc::clone(&notify));
        let waker = Arc::clone(&notify);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            waker.notify_one();
        });
        run(
            "test",
            Pace::After(Duration::from_secs(3_600)),
            tokio::time::sleep(Duration::from_millis(20)),
            || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>("a passing failure") }
            },
            || {
                let woken = Arc::clone(&woken);
                async move { woken.notified().await }
            },
        )
        .await;
        assert_eq!(
            rounds.load(Ordering::SeqCst),
            2,
            "the first round, then the woken one"
        );
    }
}
