//! The Solana RPC sender over a cluster's RPC URLs (the rule is `chains::failover`): each
//! call goes to the first healthy URL and on to the next when the node cannot be reached,
//! fails over HTTP, times out or answers something that is not JSON-RPC; a JSON-RPC error
//! is the node's answer and is returned as it is. `sendTransaction` goes to every URL at
//! once, the first acceptance answering it.

use std::{sync::Arc, time::Duration};

use solana_rpc_client::{
    http_sender::HttpSender,
    rpc_sender::{RpcSender, RpcTransportStats},
};
use solana_rpc_client_api::{
    client_error::{Error as ClientError, ErrorKind, Result},
    request::{RpcError, RpcRequest},
};

use super::{Nodes, redacted};

/// An RPC sender over several URLs (see the module docs).
#[derive(Clone)]
pub(crate) struct Failover {
    /// The cluster's slug, for the metrics.
    chain: Arc<str>,
    senders: Arc<[HttpSender]>,
    nodes: Arc<Nodes>,
    timeout: Duration,
}

impl Failover {
    /// A sender to cluster `chain` over `urls` (at least one), each call taking `timeout` at
    /// most.
    pub(crate) fn new(chain: &str, urls: &[String], timeout: Duration) -> Self {
        Self {
            chain: chain.into(),
            senders: urls
                .iter()
                .map(|url| HttpSender::new_with_timeout(url.clone(), timeout))
                .collect(),
            nodes: Arc::new(Nodes::new(urls)),
            timeout,
        }
    }

    /// One try at `node` within `limit`, its outcome noted in the URL's health.
    async fn attempt(
        &self,
        node: usize,
        request: RpcRequest,
        params: serde_json::Value,
        limit: Duration,
    ) -> Result<serde_json::Value> {
        let started = std::time::Instant::now();
        let sent = tokio::time::timeout(limit, self.senders[node].send(request, params)).await;
        let timed_out = sent.is_err();
        let answer = sent.unwrap_or_else(|_| {
            Err(ClientError::from(ErrorKind::Custom(format!(
                "no answer within {} ms",
                limit.as_millis()
            ))))
        });
        let outcome = match &answer {
            Err(e) if unanswered(e) => {
                tracing::debug!(url = %redacted(self.nodes.url(node)), error = %e, "RPC call failed");
                self.nodes.failed(node, None);
                if timed_out { "timeout" } else { "error" }
            }
            _ => {
                self.nodes.succeeded(node);
                "ok"
            }
        };
        crate::metrics::rpc_call(
            &self.chain,
            &request.to_string(),
            outcome,
            started.elapsed(),
        );
        answer
    }

    /// Sends to every URL; the first acceptance answers, else the first answer in the
    /// configured order (a refusal), else the last failure.
    async fn broadcast(
        &self,
        request: RpcRequest,
        params: serde_json::Value,
    ) -> Result<serde_json::Value> {
        let sent = self
            .nodes
            .to_all(
                |node| {
                    let (this, params) = (self.clone(), params.clone());
                    async move { this.attempt(node, request, params, this.timeout).await }
                },
                Result::is_ok,
            )
            .await;
        let mut outcomes = match sent {
            Ok(accepted) => return accepted,
            Err(outcomes) => outcomes,
        };
        match outcomes
            .iter()
            .position(|o| o.as_ref().is_err_and(|e| !unanswered(e)))
        {
            Some(refusal) => outcomes.swap_remove(refusal),
            None => outcomes.pop().unwrap_or_else(|| {
                Err(ClientError::from(ErrorKind::Custom(
                    "no RPC URL answered".to_owned(),
                )))
            }),
        }
    }
}

/// Whether `e` says the node did not answer the call (rather than refusing it).
fn unanswered(e: &ClientError) -> bool {
    match e.kind() {
        ErrorKind::RpcError(RpcError::RpcResponseError { .. }) => false,
        ErrorKind::Io(_)
        | ErrorKind::Reqwest(_)
        | ErrorKind::Middleware(_)
        | ErrorKind::SerdeJson(_)
        | ErrorKind::Custom(_)
        | ErrorKind::RpcError(_) => true,
        ErrorKind::SigningError(_) | ErrorKind::TransactionError(_) => false,
    }
}

#[async_trait::async_trait]
impl RpcSender for Failover {
    async fn send(
        &self,
        request: RpcRequest,
        params: serde_json::Value,
    ) -> Result<serde_json::Value> {
        if self.nodes.len() > 1 && request == RpcRequest::SendTransaction {
            return self.broadcast(request, params).await;
        }
        let tried = self
            .nodes
            .in_order(
                self.timeout,
                |node, limit| self.attempt(node, request, params.clone(), limit),
                |outcome| !outcome.as_ref().is_err_and(unanswered),
            )
            .await;
        tried.unwrap_or_else(|| {
            Err(ClientError::from(ErrorKind::Custom(
                "no RPC URL configured".to_owned(),
            )))
        })
    }

    fn get_transport_stats(&self) -> RpcTransportStats {
        self.senders
            .first()
            .map(RpcSender::get_transport_stats)
            .unwrap_or_default()
    }

    fn url(&self) -> String {
        self.nodes.url(0).to_owned()
    }
}
