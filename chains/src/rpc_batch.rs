//! JSON-RPC calls that queue while the node is busy go out together, as one JSON-RPC batch.
//!
//! Under load every send asks the node to simulate and then to take the signed bytes, and the
//! monitor asks for receipts: one HTTP request each would cost the node more in HTTP handling
//! than in the calls themselves. This transport layer sends a call at once while fewer than
//! `max_in_flight` requests are out, and otherwise queues it; each request that comes back
//! takes everything queued (at most `max_batch` calls) as one batch. An idle service thus
//! sees single calls with no added latency, a busy one sees few requests. The calls and their
//! answers are unchanged: each caller gets its own response (or error) by its request id.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
};

use alloy::{
    rpc::json_rpc::{Id, RequestPacket, Response, ResponsePacket, SerializedRequest},
    transports::{Transport, TransportError, TransportErrorKind, TransportFut},
};
use tokio::sync::oneshot;
use tower::{Layer, Service};

/// Batches the calls of one RPC client (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct BatchLayer {
    /// Most calls in one batch; 1 sends every call alone.
    pub max_batch: usize,
    /// Requests out at once before calls queue.
    pub max_in_flight: usize,
    /// How long a request may go unanswered: past it, its calls fail and the next queued
    /// calls go out, so a node that holds requests open cannot stall the client for good.
    pub timeout: std::time::Duration,
}

/// The service of `BatchLayer` over transport `S`.
#[derive(Debug, Clone)]
pub struct BatchService<S> {
    inner: S,
    limits: BatchLayer,
    shared: Arc<Mutex<Queue>>,
}

type Waiter = oneshot::Sender<Result<Response, TransportError>>;

#[derive(Debug, Default)]
struct Queue {
    waiting: Vec<(SerializedRequest, Waiter)>,
    in_flight: usize,
}

impl<S> Layer<S> for BatchLayer {
    type Service = BatchService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BatchService {
            inner,
            limits: BatchLayer {
                max_batch: self.max_batch.max(1),
                max_in_flight: self.max_in_flight.max(1),
                timeout: self.timeout,
            },
            shared: Arc::default(),
        }
    }
}

impl<S: Transport + Clone> BatchService<S> {
    /// Sends queued calls, a batch at a time, until the queue is empty.
    async fn dispatch(mut inner: S, shared: Arc<Mutex<Queue>>, limits: BatchLayer) {
        loop {
            let calls: Vec<(SerializedRequest, Waiter)> = {
                let mut queue = shared.lock().unwrap_or_else(PoisonError::into_inner);
                // A call whose caller gave up is not sent: it may be a broadcast of bytes
                // that were replaced since.
                queue.waiting.retain(|(_, waiter)| !waiter.is_closed());
                if queue.waiting.is_empty() {
                    queue.in_flight -= 1;
                    return;
                }
                let take = queue.waiting.len().min(limits.max_batch);
                queue.waiting.drain(..take).collect()
            };
            Self::send(&mut inner, calls, limits.timeout).await;
        }
    }

    /// Sends `calls` as one request (a lone call as a plain JSON-RPC request, not a batch of
    /// one) and answers each waiter.
    async fn send(
        inner: &mut S,
        calls: Vec<(SerializedRequest, Waiter)>,
        timeout: std::time::Duration,
    ) {
        let mut waiters: HashMap<Id, Waiter> = HashMap::with_capacity(calls.len());
        let mut requests = Vec::with_capacity(calls.len());
        for (request, waiter) in calls {
            waiters.insert(request.id().clone(), waiter);
            requests.push(request);
        }
        let packet = match <[SerializedRequest; 1]>::try_from(requests) {
            Ok([request]) => RequestPacket::Single(request),
            Err(requests) => RequestPacket::Batch(requests),
        };
        let answer = tokio::time::timeout(timeout, inner.call(packet))
            .await
            .unwrap_or_else(|_| {
                Err(TransportErrorKind::custom_str(
                    "the node did not answer in time",
                ))
            });
        match answer {
            Ok(ResponsePacket::Single(response)) if waiters.len() == 1 => {
                if let Some((_, waiter)) = waiters.drain().next() {
                    let _ = waiter.send(Ok(response));
                }
            }
            Ok(ResponsePacket::Single(response)) => {
                // A node that does not take batches answers a batch with one error object.
                let why = response.payload.as_error().map_or_else(
                    || "one response to a batch".to_owned(),
                    |e| format!("the node refused a batch: {}", e.message),
                );
                for (_, waiter) in waiters {
                    let _ = waiter.send(Err(TransportErrorKind::custom_str(&why)));
                }
            }
            Ok(ResponsePacket::Batch(responses)) => {
                for response in responses {
                    if let Some(waiter) = waiters.remove(&response.id) {
                        let _ = waiter.send(Ok(response));
                    }
                }
                for (id, waiter) in waiters {
                    let _ = waiter.send(Err(TransportErrorKind::missing_batch_response(id)));
                }
            }
            Err(err) => {
                // Every call of the request shares its fate; each caller gets the same account.
                let why = err.to_string();
                for (_, waiter) in waiters {
                    let _ = waiter.send(Err(TransportErrorKind::custom_str(&why)));
                }
            }
        }
    }
}

impl<S: Transport + Clone> Service<RequestPacket> for BatchService<S> {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, packet: RequestPacket) -> Self::Future {
        let request = match packet {
            RequestPacket::Single(request) if self.limits.max_batch > 1 => request,
            // Batches made by the caller, and everything when batching is off, pass through.
            other => return Box::pin(self.inner.call(other)),
        };
        let (waiter, answer) = oneshot::channel();
        let start = {
            let mut queue = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            queue.waiting.push((request, waiter));
            let start = queue.in_flight < self.limits.max_in_flight;
            if start {
                queue.in_flight += 1;
            }
            start
        };
        if start {
            // Its own task: a caller that gives up must not strand the calls queued behind it.
            tokio::spawn(Self::dispatch(
                self.inner.clone(),
                self.shared.clone(),
                self.limits,
            ));
        }
        Box::pin(async move {
            let response = answer
                .await
                .map_err(|_| TransportErrorKind::custom_str("the RPC batcher stopped"))??;
            Ok(ResponsePacket::Single(response))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use alloy::rpc::json_rpc::{Request, ResponsePayload};
    use serde_json::value::RawValue;

    use super::*;

    /// A transport that answers every call with its own id (a batch in reverse order) and
    /// counts requests and the largest batch.
    #[derive(Clone, Default)]
    struct Echo {
        requests: Arc<AtomicUsize>,
        largest: Arc<AtomicUsize>,
        singles: Arc<AtomicUsize>,
    }

    impl Service<RequestPacket> for Echo {
        type Response = ResponsePacket;
        type Error = TransportError;
        type Future = TransportFut<'static>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, packet: RequestPacket) -> Self::Future {
            let this = self.clone();
            Box::pin(async move {
                this.requests.fetch_add(1, Ordering::SeqCst);
                let answer = |r: &SerializedRequest| Response {
                    id: r.id().clone(),
                    payload: ResponsePayload::Success(
                        RawValue::from_string(format!("\"{}\"", r.id())).unwrap(),
                    ),
                };
                Ok(match packet {
                    RequestPacket::Single(r) => {
                        this.singles.fetch_add(1, Ordering::SeqCst);
                        this.largest.fetch_max(1, Ordering::SeqCst);
                        ResponsePacket::Single(answer(&r))
                    }
                    RequestPacket::Batch(rs) => {
                        this.largest.fetch_max(rs.len(), Ordering::SeqCst);
                        ResponsePacket::Batch(rs.iter().rev().map(answer).collect())
                    }
                })
            })
        }
    }

    fn call(id: u64) -> RequestPacket {
        RequestPacket::Single(
            Request::new("eth_chainId", Id::Number(id), ())
                .serialize()
                .unwrap(),
        )
    }

    /// Makes `n` calls at once through a batcher of `max_batch` over `Echo`; returns the
    /// answers, the requests the transport saw and its largest batch (a plain request
    /// counting as a batch of one).
    async fn through(max_batch: usize, n: u64) -> (Vec<ResponsePacket>, usize, usize) {
        let echo = Echo::default();
        let mut service = BatchLayer {
            max_batch,
            max_in_flight: 1,
            timeout: std::time::Duration::from_secs(5),
        }
        .layer(echo.clone());
        // The test runtime has one thread: the dispatcher runs only once all calls are queued.
        let pending: Vec<_> = (0..n).map(|i| service.call(call(i))).collect();
        let answers = futures::future::try_join_all(pending).await.unwrap();
        (
            answers,
            echo.requests.load(Ordering::SeqCst),
            echo.largest.load(Ordering::SeqCst),
        )
    }

    #[tokio::test]
    async fn queued_calls_share_a_request_and_each_gets_its_own_answer() {
        let (answers, requests, largest) = through(10, 25).await;
        for (i, answer) in answers.into_iter().enumerate() {
            let ResponsePacket::Single(response) = answer else {
                panic!("a batch answered to one call");
            };
            assert_eq!(response.id, Id::Number(i as u64));
            assert_eq!(
                response.payload.as_success().unwrap().get(),
                format!("\"{i}\"")
            );
        }
        assert_eq!((requests, largest), (3, 10));
    }

    #[tokio::test]
    async fn a_lone_call_goes_out_as_a_plain_request() {
        let echo = Echo::default();
        let mut service = BatchLayer {
            max_batch: 10,
            max_in_flight: 1,
            timeout: std::time::Duration::from_secs(5),
        }
        .layer(echo.clone());
        service.call(call(7)).await.unwrap();
        assert_eq!(echo.singles.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_batch_of_one_sends_every_call_alone() {
        let (answers, requests, largest) = through(1, 5).await;
        assert_eq!(answers.len(), 5);
        assert_eq!((requests, largest), (5, 1));
    }
}
