//! The broadcast log: when each record was accepted by a node, written behind, and the
//! hand-over of records from their requests to the monitor.

use uuid::Uuid;

use walletops_store::Store;

/// How long after its request's deadline a record's hold lasts: for cores whose clocks
/// differ a little, and a commit in flight at the deadline.
const HOLD_MARGIN: chrono::Duration = chrono::Duration::seconds(10);

/// The times transactions were broadcast, written behind in batches, and the hand-over of
/// records from their requests to the monitor. A request answers as soon as the node
/// accepted its transaction, without waiting for a write: the note releases the request's
/// hold and tells the monitor that the record was sent and since when. One lost in a crash
/// makes the monitor (once the hold has run out) ask the node whether it holds the
/// transaction, and send the same bytes if not.
#[derive(Debug, Clone)]
pub struct BroadcastLog {
    notes: tokio::sync::mpsc::UnboundedSender<Note>,
    store: Store,
    hold: chrono::Duration,
}

/// What the broadcast log's writer is given.
#[derive(Debug)]
enum Note {
    /// The current payload of this record was accepted by the node.
    Sent(Uuid),
    /// Answer once every note before this one is written.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Notes written in one UPDATE at most.
const BROADCAST_NOTES_PER_WRITE: usize = 256;

impl BroadcastLog {
    /// Starts the writer over `store` on the current runtime; requests last `request_timeout`
    /// at most.
    pub fn start(store: Store, request_timeout: std::time::Duration) -> Self {
        let (notes, mut pending) = tokio::sync::mpsc::unbounded_channel();
        let writer = store.clone();
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BROADCAST_NOTES_PER_WRITE);
            while pending
                .recv_many(&mut batch, BROADCAST_NOTES_PER_WRITE)
                .await
                > 0
            {
                let (mut ids, mut flushes) = (Vec::with_capacity(batch.len()), Vec::new());
                for note in batch.drain(..) {
                    match note {
                        Note::Sent(id) => ids.push(id),
                        Note::Flush(done) => flushes.push(done),
                    }
                }
                if !ids.is_empty()
                    && let Err(e) = writer.record_broadcasts(&ids, crate::clock::now()).await
                {
                    tracing::warn!(error = %e, "recording broadcast times failed");
                }
                for done in flushes {
                    let _ = done.send(());
                }
            }
        });
        let hold = chrono::Duration::from_std(request_timeout)
            .unwrap_or(chrono::Duration::MAX)
            .checked_add(&HOLD_MARGIN)
            .unwrap_or(chrono::Duration::MAX);
        Self { notes, store, hold }
    }

    /// Until when a record a request is about to store is held by it.
    pub(crate) fn hold_until(&self) -> chrono::DateTime<chrono::Utc> {
        crate::clock::now() + self.hold
    }

    /// Notes that the current payload of record `id` was just accepted by the node.
    pub fn note(&self, id: Uuid) {
        // The writer ends only with the runtime; a note lost then is harmless (see above).
        let _ = self.notes.send(Note::Sent(id));
    }

    /// Waits until every note made so far is written: a core stopping hands its requests'
    /// records over, rather than leave them held until the holds run out.
    pub async fn flush(&self) {
        let (done, written) = tokio::sync::oneshot::channel();
        if self.notes.send(Note::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }

    /// Hands record `id`, whose first send its request has handled without the node taking
    /// it, to the monitor at once. Should this fail, the hold runs out.
    pub(crate) async fn hand_over(&self, id: Uuid) {
        if let Err(e) = self.store.release_hold(id).await {
            tracing::warn!(%id, error = %e, "handing a record to the monitor failed; it waits for its hold to run out");
        }
    }
}
