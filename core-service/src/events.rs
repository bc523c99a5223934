//! Transaction events: every status change of a record, written to the outbox in the same
//! database transaction as the change (`store::events`), numbered in commit order by the
//! sequencer here, and read back in that order by watchers, who resume after the last
//! number they saw.

use std::{future::Future, time::Duration};

use uuid::Uuid;

use crate::{
    domain::TransactionRecord,
    error::WalletOpsError,
    requests::WatchRequest,
    store::{Store, TransactionEvent},
};

/// How often the sequencer looks for new events: the delay a watcher sees at most, beyond
/// its own polling.
const SEQUENCE_EVERY: Duration = Duration::from_millis(100);

/// Numbers new events every `SEQUENCE_EVERY` until `stop` completes, making their webhook
/// deliveries, retried for `retry_for`. Every core runs one; they take turns (see
/// `Store::sequence_events`).
pub async fn run_sequencer(store: Store, retry_for: Duration, stop: impl Future<Output = ()>) {
    let mut tick = tokio::time::interval(SEQUENCE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(e) = store.sequence_events(retry_for).await {
                    tracing::warn!(error = %e, "numbering transaction events failed; trying again");
                }
            }
            () = &mut stop => return,
        }
    }
}

/// How often a watcher's new events are looked for.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Events read at once for a watcher.
const WATCH_BATCH: u64 = 100;

/// Events a watcher may leave unread: its memory, bounded.
pub const WATCH_BUFFER: usize = 64;

/// How long a watcher may leave its buffer full before it is cut off.
const SLOW_WATCHER: Duration = Duration::from_secs(10);

/// How a watch ended, when not by its watcher leaving.
#[derive(Debug)]
pub enum WatchEnd {
    /// The watcher left its buffer full too long; it should resume after `last_sent`.
    TooSlow {
        /// The last event put in its buffer.
        last_sent: u64,
    },
    /// Reading the events failed.
    Failed(WalletOpsError),
}

/// One event for a watcher: the change, and the record as it is now.
pub type Watched = (TransactionEvent, TransactionRecord);

/// Streams the events `req` asks for of `user_id`'s records, in commit order, each with its
/// record as it is when sent, until the receiver is dropped; ends with a `WatchEnd` if it
/// ends otherwise. At most `WATCH_BUFFER` events wait unread.
pub fn watch(
    store: Store,
    user_id: Uuid,
    req: WatchRequest,
) -> tokio::sync::mpsc::Receiver<Result<Watched, WatchEnd>> {
    let (tx, rx) = tokio::sync::mpsc::channel(WATCH_BUFFER);
    tokio::spawn(async move {
        if let Err(end) = feed(&store, user_id, &req, &tx).await {
            // Past the events already buffered: the watcher reads them first.
            let _ = tx.send(Err(end)).await;
        }
    });
    rx
}

async fn feed(
    store: &Store,
    user_id: Uuid,
    req: &WatchRequest,
    tx: &tokio::sync::mpsc::Sender<Result<Watched, WatchEnd>>,
) -> Result<(), WatchEnd> {
    let mut after = match req.after {
        Some(after) => after,
        None => store.last_event_seq().await.map_err(WatchEnd::Failed)?,
    };
    let filter = (req.transaction_id, req.chain.as_deref());
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = tx.closed() => return Ok(()),
        }
        let events = store
            .events_after(user_id, after, filter, WATCH_BATCH)
            .await
            .map_err(WatchEnd::Failed)?;
        for event in events {
            let record = store
                .find_transaction(user_id, event.transaction_id)
                .await
                .map_err(WatchEnd::Failed)?;
            let Some(record) = record else { continue };
            let seq = event.seq;
            match tx.send_timeout(Ok((event, record)), SLOW_WATCHER).await {
                Ok(()) => after = seq,
                Err(tokio::sync::mpsc::error::SendTimeoutError::Timeout(_)) => {
                    return Err(WatchEnd::TooSlow { last_sent: after });
                }
                Err(tokio::sync::mpsc::error::SendTimeoutError::Closed(_)) => return Ok(()),
            }
        }
    }
}
