//! The EVM JSON-RPC transport over a chain's RPC URLs (the rule is `chains::failover`):
//! each call goes to the first healthy URL and on to the next when it fails, times out or is
//! refused with 429 (whose `Retry-After` is kept, which is why this posts the JSON itself
//! rather than through alloy's HTTP transport, which drops the headers); a call carrying
//! `eth_sendRawTransaction` goes to every URL at once, the first acceptance answering it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use alloy::{
    rpc::json_rpc::{RequestPacket, ResponsePacket},
    transports::{TransportError, TransportErrorKind, TransportFut},
};
use tower::Service;

use super::{Nodes, redacted};

/// The broadcast method, sent to every URL.
const SEND_RAW: &str = "eth_sendRawTransaction";

/// A JSON-RPC transport over several URLs (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    /// The chain's slug, for the metrics.
    chain: Arc<str>,
    http: reqwest::Client,
    urls: Arc<[reqwest::Url]>,
    nodes: Arc<Nodes>,
    /// How long one call may take over all its attempts.
    timeout: Duration,
    /// HTTP requests posted so far, to any URL: what a node counts of its clients.
    requests: Arc<AtomicU64>,
}

/// Why one attempt failed, and how long the URL asked to be left alone.
struct Failure {
    error: TransportError,
    retry_after: Option<Duration>,
}

impl Failover {
    /// A transport to chain `chain` over `urls` (at least one), each call taking `timeout`
    /// at most.
    pub(crate) fn new(chain: &str, urls: &[String], timeout: Duration) -> Result<Self, String> {
        let parsed = urls
            .iter()
            .map(|u| u.parse().map_err(|_| redacted(u)))
            .collect::<Result<Arc<[reqwest::Url]>, _>>()?;
        Ok(Self {
            chain: chain.into(),
            http: reqwest::Client::new(),
            urls: parsed,
            nodes: Arc::new(Nodes::new(urls)),
            timeout,
            requests: Arc::default(),
        })
    }

    /// The count of HTTP requests this transport has posted, shared with its clones.
    pub(crate) fn requests(&self) -> Arc<AtomicU64> {
        self.requests.clone()
    }

    async fn dispatch(self, req: RequestPacket) -> Result<ResponsePacket, TransportError> {
        if self.nodes.len() > 1 && req.method_names().any(|m| m == SEND_RAW) {
            return self.broadcast(req).await;
        }
        let tried = self
            .nodes
            .in_order(
                self.timeout,
                |node, limit| self.attempt(node, &req, limit),
                Result::is_ok,
            )
            .await;
        tried.unwrap_or_else(|| Err(TransportErrorKind::custom_str("no RPC URL configured")))
    }

    /// Sends `req` to every URL; answers with the first that accepts it, else with the
    /// first answer in the configured order (a refusal), else the last failure.
    async fn broadcast(self, req: RequestPacket) -> Result<ResponsePacket, TransportError> {
        let sent = self
            .nodes
            .to_all(
                |node| {
                    let (this, req) = (self.clone(), req.clone());
                    async move { this.attempt(node, &req, this.timeout).await }
                },
                |outcome| outcome.as_ref().is_ok_and(ResponsePacket::is_success),
            )
            .await;
        let outcomes = match sent {
            Ok(accepted) => return accepted,
            Err(outcomes) => outcomes,
        };
        let mut last = None;
        for outcome in outcomes {
            match outcome {
                Ok(refusal) => return Ok(refusal),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| TransportErrorKind::custom_str("no RPC URL answered")))
    }

    /// One try of `req` at `node` within `limit`, its outcome noted in the URL's health.
    async fn attempt(
        &self,
        node: usize,
        req: &RequestPacket,
        limit: Duration,
    ) -> Result<ResponsePacket, TransportError> {
        let started = std::time::Instant::now();
        let method = match req {
            RequestPacket::Single(call) => call.method(),
            RequestPacket::Batch(_) => "batch",
        };
        let posted = tokio::time::timeout(limit, self.post(node, req)).await;
        let ended = match &posted {
            Ok(Ok(_)) => "ok",
            Ok(Err(_)) => "error",
            Err(_) => "timeout",
        };
        crate::metrics::rpc_call(&self.chain, method, ended, started.elapsed());
        let outcome = posted.unwrap_or_else(|_| {
            Err(Failure {
                error: TransportErrorKind::custom_str(&format!(
                    "no answer within {} ms",
                    limit.as_millis()
                )),
                retry_after: None,
            })
        });
        match outcome {
            Ok(answer) => {
                self.nodes.succeeded(node);
                Ok(answer)
            }
            Err(Failure { error, retry_after }) => {
                tracing::debug!(url = %redacted(self.nodes.url(node)), %error, "RPC call failed");
                self.nodes.failed(node, retry_after);
                Err(error)
            }
        }
    }

    async fn post(&self, node: usize, req: &RequestPacket) -> Result<ResponsePacket, Failure> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let failed = |e: reqwest::Error| Failure {
            // Without the URL: a provider's key is often in its path.
            error: TransportErrorKind::custom(e.without_url()),
            retry_after: None,
        };
        let reply = self
            .http
            .post(self.urls[node].clone())
            .json(req)
            .send()
            .await
            .map_err(failed)?;
        let status = reply.status();
        let retry_after = reply
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = reply.bytes().await.map_err(failed)?;
        if !status.is_success() {
            return Err(Failure {
                error: TransportErrorKind::http_error(
                    status.as_u16(),
                    String::from_utf8_lossy(&body).chars().take(200).collect(),
                ),
                // Asked to slow down without a delay: skipped briefly all the same.
                retry_after: (status == reqwest::StatusCode::TOO_MANY_REQUESTS)
                    .then(|| retry_after.unwrap_or(Duration::from_secs(1))),
            });
        }
        serde_json::from_slice(&body).map_err(|e| Failure {
            error: TransportError::deser_err(e, String::from_utf8_lossy(&body)),
            retry_after: None,
        })
    }
}

impl Service<RequestPacket> for Failover {
    type Response = ResponsePacket;
    type Error = TransportError;
    type Future = TransportFut<'static>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: RequestPacket) -> Self::Future {
        Box::pin(self.clone().dispatch(req))
    }
}
