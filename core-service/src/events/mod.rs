//! Transaction events: every status change of a record, written to the outbox in the same
//! database transaction as the change (`store::events`), numbered in commit order by the
//! sequencer here, and read back in that order by watchers, who resume after the last
//! number they saw. What a webhook tells of an event is made in `body.rs`.

pub mod body;

use std::{future::Future, time::Duration};

use uuid::Uuid;

use crate::error::WalletOpsError;
use walletops_domain::TransactionRecord;
use walletops_store::{Store, TransactionEvent};

/// How often the sequencer looks for new events: the delay a watcher sees at most, beyond
/// its own polling.
const SEQUENCE_EVERY: Duration = Duration::from_millis(100);

/// Numbers new events every `SEQUENCE_EVERY` until `stop` completes, making their webhook
/// deliveries, retried for `retry_for`. Every core runs one; they take turns (see
/// `Store::sequence_events`).
pub async fn run_sequencer(store: Store, retry_for: Duration, stop: impl Future<Output = ()>) {
    crate::runner::run(
        "event sequencer",
        crate::runner::Pace::After(SEQUENCE_EVERY),
        stop,
        || store.sequence_events(retry_for),
        crate::runner::never,
    )
    .await;
}

/// How often a watcher's new events are looked for.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Events read at once for a watcher.
const WATCH_BATCH: u64 = 100;

/// How much a watcher may leave unread, for how long, and how long it may watch.
#[derive(Debug, Clone, Copy)]
pub struct WatchLimits {
    /// Events a watcher may leave unread: its memory, bounded.
    pub buffer: usize,
    /// How long a watcher may leave its buffer full before it is cut off.
    pub slow_after: Duration,
    /// The longest a watch lasts; the watcher resumes after its last event.
    pub lifetime: Duration,
    /// How often the watcher's credential is checked again: a revoked key or an ended
    /// session ends its watches within this.
    pub recheck_every: Duration,
}

impl Default for WatchLimits {
    fn default() -> Self {
        Self {
            buffer: 64,
            slow_after: Duration::from_secs(10),
            lifetime: Duration::from_secs(3600),
            recheck_every: Duration::from_secs(5),
        }
    }
}

/// Checks again that the watcher may still watch (its key or session still stands).
pub type Recheck =
    Box<dyn Fn() -> futures::future::BoxFuture<'static, Result<(), WalletOpsError>> + Send + Sync>;

/// How a watch ended, when not by its watcher leaving.
#[derive(Debug)]
pub enum WatchEnd {
    /// The watcher left its buffer full too long; it should resume after `last_sent`.
    TooSlow {
        /// The last event put in its buffer.
        last_sent: u64,
    },
    /// Reading the events failed, or the watcher's credential no longer stands.
    Failed(WalletOpsError),
    /// The watch lasted its longest; the watcher resumes after `last_sent`.
    Lifetime {
        /// The last event put in its buffer.
        last_sent: u64,
        /// How long it lasted.
        lifetime: Duration,
    },
}

/// One event for a watcher: the change, and the record as it is now in the change's status.
pub type Watched = (TransactionEvent, TransactionRecord);

/// A watch: its events, and once they end, why (nothing: the watcher left).
#[derive(Debug)]
pub struct Watch<T = Watched> {
    /// The events, in commit order.
    pub events: tokio::sync::mpsc::Receiver<T>,
    /// Why the events ended, read once `events` is drained.
    pub end: tokio::sync::oneshot::Receiver<WatchEnd>,
}

/// A page of events read for a watcher: the number of the last event read (sent or not),
/// and the events to send with their numbers.
pub type Page<T> = (Option<u64>, Vec<(u64, T)>);

/// Streams the events `req` asks for of `user_id`'s records, in commit order, each with its
/// record as it is when sent (in the status of its event), until the receiver is dropped or
/// the watch ends (`Watch::end` says why). At most `limits.buffer` events wait unread: a
/// watcher that leaves them so for `limits.slow_after` is cut off, its buffered events still
/// readable. Every `limits.recheck_every` `recheck` says whether the watcher may still
/// watch, and the watch ends after `limits.lifetime`.
pub fn watch(
    store: Store,
    user_id: Uuid,
    req: WatchRequest,
    limits: WatchLimits,
    recheck: Recheck,
) -> Watch {
    let after = req.after;
    let reader = store.clone();
    watch_events(store, after, (limits, recheck), move |after| {
        let (store, req) = (reader.clone(), req.clone());
        async move {
            let filter = (req.transaction_id, req.chain.as_deref());
            let events = store
                .events_after(user_id, after, filter, WATCH_BATCH)
                .await?;
            let last = events.last().map(|e| e.seq);
            let mut page = Vec::with_capacity(events.len());
            for event in events {
                let Some(mut record) = store
                    .find_transaction(user_id, event.transaction_id)
                    .await?
                else {
                    continue;
                };
                // The record as it is now, in the status this event is about, as a webhook
                // tells it: a `transaction.submitted` read after the confirmation still says
                // SUBMITTED.
                record.status = event.status;
                page.push((event.seq, (event, record)));
            }
            Ok((last, page))
        }
    })
}

/// Streams what `read` gives after each event number, from `after` (`None`: from now on),
/// under `limits` and `recheck` as `watch` says: the one watch loop of every kind of event.
pub fn watch_events<T, R, F>(
    store: Store,
    after: Option<u64>,
    (limits, recheck): (WatchLimits, Recheck),
    read: R,
) -> Watch<T>
where
    T: Send + 'static,
    R: Fn(u64) -> F + Send + Sync + 'static,
    F: Future<Output = Result<Page<T>, WalletOpsError>> + Send,
{
    let (tx, events) = tokio::sync::mpsc::channel(limits.buffer.max(1));
    let (ended, end) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Err(why) = feed(&store, after, (limits, &recheck), &read, &tx).await {
            // The events already buffered stay readable; the end is read after them.
            let _ = ended.send(why);
        }
    });
    Watch { events, end }
}

async fn feed<T, R, F>(
    store: &Store,
    after: Option<u64>,
    (limits, recheck): (WatchLimits, &Recheck),
    read: &R,
    tx: &tokio::sync::mpsc::Sender<T>,
) -> Result<(), WatchEnd>
where
    R: Fn(u64) -> F,
    F: Future<Output = Result<Page<T>, WalletOpsError>>,
{
    let slow_after = limits.slow_after;
    let started = tokio::time::Instant::now();
    let mut checked = started;
    let mut after = match after {
        Some(after) => after,
        None => store
            .last_event_seq()
            .await
            .map_err(|e| WatchEnd::Failed(e.into()))?,
    };
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = tx.closed() => return Ok(()),
        }
        if checked.elapsed() >= limits.recheck_every {
            recheck().await.map_err(WatchEnd::Failed)?;
            checked = tokio::time::Instant::now();
        }
        if started.elapsed() >= limits.lifetime {
            return Err(WatchEnd::Lifetime {
                last_sent: after,
                lifetime: limits.lifetime,
            });
        }
        let (last, page) = read(after).await.map_err(WatchEnd::Failed)?;
        for (seq, item) in page {
            match tx.send_timeout(item, slow_after).await {
                Ok(()) => after = seq,
                Err(tokio::sync::mpsc::error::SendTimeoutError::Timeout(_)) => {
                    return Err(WatchEnd::TooSlow { last_sent: after });
                }
                Err(tokio::sync::mpsc::error::SendTimeoutError::Closed(_)) => return Ok(()),
            }
        }
        // Events read but not sent (their subject is gone) are not read again.
        after = after.max(last.unwrap_or(after));
    }
}

/// `WatchTransactions`: which changes to stream, from where.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// Only this record's.
    pub transaction_id: Option<Uuid>,
    /// Only this chain's.
    pub chain: Option<String>,
    /// After this event; `None`: from now on.
    pub after: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use walletops_store::testing::{Backend, on_store};

    /// A watcher that reads nothing is cut off once its buffer has stayed full for
    /// `slow_after`: its memory stays bounded, what was buffered is still read, and the end
    /// names the last event buffered, to resume after.
    #[tokio::test]
    async fn a_watcher_that_reads_nothing_is_cut_off() {
        on_store(Backend::Sqlite, |store| async move {
            let ids = walletops_store::testing::open_records(&store, 5, None).await;
            let user = store
                .open_transaction(ids[0])
                .await
                .expect("read")
                .expect("row")
                .user_id;
            store
                .sequence_events(Duration::from_secs(60))
                .await
                .expect("numbering");
            let limits = WatchLimits {
                buffer: 2,
                slow_after: Duration::from_millis(200),
                ..WatchLimits::default()
            };
            let req = WatchRequest {
                transaction_id: None,
                chain: None,
                after: Some(0),
            };
            let mut watch = watch(
                store,
                user,
                req,
                limits,
                Box::new(|| Box::pin(async { Ok(()) })),
            );
            // Unread, the watch ends on its own: the feeder lets go of the channel.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while !watch.events.is_closed() {
                assert!(tokio::time::Instant::now() < deadline, "never cut off");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let mut read = Vec::new();
            while let Some((event, _)) = watch.events.recv().await {
                read.push(event.seq);
            }
            assert_eq!(read, [1, 2], "only the buffer was held");
            match watch.end.await {
                Ok(WatchEnd::TooSlow { last_sent }) => assert_eq!(last_sent, 2),
                other => panic!("not cut off as too slow: {other:?}"),
            }
        })
        .await;
    }
}
