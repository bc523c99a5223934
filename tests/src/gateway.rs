//! A JSON-RPC gateway in front of a node, as hosted providers run them: it passes calls on,
//! and can be told to fail, refuse or hold back what a provider's gateway may.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use serde_json::{Value, json};

/// What a `Gateway` does with `eth_sendRawTransaction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sends {
    /// Passes it on.
    PassOn,
    /// Answers with the bare "Internal error" such gateways give, which says nothing of the
    /// transaction, without passing it on.
    Fail,
    /// Passes it on, then answers with a refusal in words no node is known to use: the node
    /// holds the transaction all the same.
    PassOnThenRefuse,
    /// Refuses it in those words without passing it on: a definite refusal.
    Refuse,
}

/// A gateway's refusal of a send, in words no node is known to use.
fn relay_refusal(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id,
           "error": {"code": -32000, "message": "transaction rejected by relay policy"}})
}

/// What a `Gateway` refuses besides sends, as hosted providers do.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// A JSON-RPC batch of more calls is refused whole.
    pub max_batch: Option<usize>,
    /// An `eth_call` whose calldata starts with this is answered with a rate-limit error.
    pub limited_call: Option<&'static str>,
    /// Receipts and transactions by hash are answered with null, as by a node a block
    /// behind the one that answers the nonces.
    pub behind: bool,
    /// Methods answered as a provider answers one it does not serve (-32601).
    pub without: Vec<&'static str>,
}

/// A JSON-RPC gateway in front of a node, as hosted providers run them: it passes every call
/// on, `eth_sendRawTransaction` as its `Sends` mode says, within its `Limits`.
#[derive(Debug)]
pub struct Gateway {
    url: String,
    sends: Arc<Mutex<Sends>>,
    limits: Arc<Mutex<Limits>>,
    /// The raw transactions refused without being passed on, oldest first.
    refused: Arc<Mutex<Vec<String>>>,
    /// HTTP requests received (a JSON-RPC batch is one).
    requests: Arc<AtomicU64>,
    /// The params of every Solana `sendTransaction` passed on.
    solana_sends: Arc<Mutex<Vec<Value>>>,
    /// Calls received, by method (each call of a batch counts).
    calls: Arc<Mutex<HashMap<String, u64>>>,
}

impl Gateway {
    /// Starts a gateway on a free loopback port in front of the node at `node`, passing
    /// every call on.
    pub async fn start(node: &str) -> anyhow::Result<Self> {
        let sends = Arc::new(Mutex::new(Sends::PassOn));
        let limits = Arc::new(Mutex::new(Limits::default()));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (node, http) = (node.to_owned(), crate::http::client());
        let (mode, limited, kept) = (sends.clone(), limits.clone(), refused.clone());
        let solana_sends = Arc::new(Mutex::new(Vec::new()));
        let seen = solana_sends.clone();
        let calls = Arc::new(Mutex::new(HashMap::new()));
        let tally = calls.clone();
        let one = move |call: Value| {
            let (node, http, kept) = (node.clone(), http.clone(), kept.clone());
            *tally
                .lock()
                .expect("gateway calls")
                .entry(call["method"].as_str().unwrap_or_default().to_owned())
                .or_insert(0) += 1;
            if call["method"] == "sendTransaction" {
                seen.lock()
                    .expect("gateway sends")
                    .push(call["params"].clone());
            }
            let mode = *mode.lock().expect("gateway mode");
            let (limited_call, behind, without) = {
                let limits = limited.lock().expect("gateway limits");
                (limits.limited_call, limits.behind, limits.without.clone())
            };
            async move {
                if let Some(method) = call["method"].as_str()
                    && without.contains(&method)
                {
                    return Ok(
                        json!({"jsonrpc": "2.0", "id": call["id"], "error": {"code": -32601,
                        "message": format!("the method {method} does not exist/is not available")}}),
                    );
                }
                if behind
                    && (call["method"] == "eth_getTransactionReceipt"
                        || call["method"] == "eth_getTransactionByHash")
                {
                    return Ok(json!({"jsonrpc": "2.0", "id": call["id"], "result": null}));
                }
                let data = &call["params"][0];
                let data = data["input"].as_str().or(data["data"].as_str());
                if call["method"] == "eth_call"
                    && limited_call.is_some_and(|l| data.is_some_and(|d| d.starts_with(l)))
                {
                    return Ok::<_, reqwest::Error>(json!({"jsonrpc": "2.0", "id": call["id"],
                        "error": {"code": -32005, "message": "request rate exceeded"}}));
                }
                let is_send = call["method"] == "eth_sendRawTransaction";
                if is_send && mode == Sends::Fail {
                    return Ok(json!({"jsonrpc": "2.0", "id": call["id"],
                        "error": {"code": -32603, "message": "Internal error"}}));
                }
                if is_send && mode == Sends::Refuse {
                    if let Some(raw) = call["params"][0].as_str() {
                        kept.lock().expect("gateway refusals").push(raw.to_owned());
                    }
                    return Ok(relay_refusal(&call["id"]));
                }
                let answer = http
                    .post(&node)
                    .json(&call)
                    .send()
                    .await?
                    .json::<Value>()
                    .await?;
                if is_send && mode == Sends::PassOnThenRefuse {
                    return Ok(relay_refusal(&call["id"]));
                }
                Ok(answer)
            }
        };
        let max_batch = limits.clone();
        let requests = Arc::new(AtomicU64::new(0));
        let counted = requests.clone();
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
                counted.fetch_add(1, Ordering::Relaxed);
                let one = one.clone();
                let max_batch = max_batch.lock().expect("gateway limits").max_batch;
                async move {
                    let answer = match body {
                        Value::Array(calls) if max_batch.is_some_and(|m| calls.len() > m) => {
                            Ok(json!({"jsonrpc": "2.0", "id": null,
                                "error": {"code": -32600, "message": "batch size too large"}}))
                        }
                        Value::Array(calls) => {
                            let mut answers = Vec::new();
                            for call in calls {
                                answers.push(one(call).await);
                            }
                            answers
                                .into_iter()
                                .collect::<Result<Vec<_>, _>>()
                                .map(Value::Array)
                        }
                        call => one(call).await,
                    };
                    axum::Json(answer.unwrap_or_else(|e| json!({"error": e.to_string()})))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self {
            url,
            sends,
            limits,
            refused,
            requests,
            solana_sends,
            calls,
        })
    }

    /// The calls of `method` received so far.
    pub fn calls(&self, method: &str) -> u64 {
        self.calls
            .lock()
            .expect("gateway calls")
            .get(method)
            .copied()
            .unwrap_or(0)
    }

    /// The params of every Solana `sendTransaction` passed on so far.
    pub fn solana_sends(&self) -> Vec<Value> {
        self.solana_sends.lock().expect("gateway sends").clone()
    }

    /// The HTTP requests received so far (a JSON-RPC batch counts once).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The gateway's JSON-RPC URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Handles `eth_sendRawTransaction` as `sends` says from now on.
    pub fn set(&self, sends: Sends) {
        *self.sends.lock().expect("gateway mode") = sends;
    }

    /// Refuses what `limits` says from now on.
    pub fn limit(&self, limits: Limits) {
        *self.limits.lock().expect("gateway limits") = limits;
    }

    /// The raw transactions refused so far.
    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().expect("gateway refusals").clone()
    }
}
