//! A fault-injection proxy between the service and a node: an HTTP server that passes
//! JSON-RPC requests on, or fails them the ways real RPC providers do, switchable while the
//! service runs.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// What the proxy does to each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Passes it on.
    None,
    /// Answers HTTP 500.
    ServerError,
    /// Answers HTTP 429 with `Retry-After: 1`.
    RateLimited,
    /// Closes the connection without an answer.
    Reset,
    /// Holds the request 20 seconds, then passes it on.
    Stall,
    /// Passes it on and answers with the first half of the node's answer.
    Truncated,
    /// Answers as a node stuck at the block current when the fault began: the block
    /// number, nonces and balances of that block, no receipt or transaction mined since.
    Stale,
    /// Answers fee reads (`eth_feeHistory`, `eth_gasPrice`, `eth_maxPriorityFeePerGas`) as
    /// a node whose base fee and tips are these, in gwei; passes the rest on.
    Fees {
        /// The base fee of every block in the history.
        base_gwei: u64,
        /// Every tip percentile of every block.
        tip_gwei: u64,
    },
}

/// How long `Fault::Stall` holds a request.
pub const STALL: std::time::Duration = std::time::Duration::from_secs(20);

#[derive(Debug)]
struct State {
    fault: Fault,
    /// The block a stale node is stuck at.
    stuck_at: u64,
    /// Requests met with a fault so far.
    faulted: u64,
}

/// A running fault-injection proxy.
#[derive(Debug)]
pub struct FaultProxy {
    url: String,
    node: String,
    state: Arc<Mutex<State>>,
    http: reqwest::Client,
}

impl FaultProxy {
    /// Starts a proxy on a free loopback port in front of the node at `node`, passing every
    /// request on.
    pub async fn start(node: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(Mutex::new(State {
            fault: Fault::None,
            stuck_at: 0,
            faulted: 0,
        }));
        let http = crate::http::client();
        let (shared, node_url, client) = (state.clone(), node.to_owned(), http.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (state, node, http) = (shared.clone(), node_url.clone(), client.clone());
                let service = hyper::service::service_fn(move |req: Request<_>| {
                    let (state, node, http) = (state.clone(), node.clone(), http.clone());
                    async move {
                        let body =
                            axum::body::to_bytes(Body::new(req.into_body()), usize::MAX).await?;
                        answer(&state, &node, &http, body).await
                    }
                });
                tokio::spawn(async move {
                    // An error from the service closes the connection unanswered.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Ok(Self {
            url,
            node: node.to_owned(),
            state,
            http,
        })
    }

    /// The proxy's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Injects `fault` into every request from now on.
    pub async fn inject(&self, fault: Fault) -> anyhow::Result<()> {
        let stuck_at = if fault == Fault::Stale {
            let reply: Value = self
                .http
                .post(&self.node)
                .json(
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}),
                )
                .send()
                .await?
                .json()
                .await?;
            block_number(&reply["result"]).unwrap_or_default()
        } else {
            0
        };
        let mut state = self.state.lock().expect("proxy state");
        (state.fault, state.stuck_at) = (fault, stuck_at);
        Ok(())
    }

    /// How many requests met a fault so far.
    pub fn faulted(&self) -> u64 {
        self.state.lock().expect("proxy state").faulted
    }

    /// Passes every request on again.
    pub async fn clear(&self) -> anyhow::Result<()> {
        self.inject(Fault::None).await
    }
}

type Reply = Response<Body>;

fn reply(status: u16, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Body::from(body.into()));
    *r.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
    r.headers_mut()
        .insert("content-type", "application/json".parse().expect("header"));
    r
}

async fn answer(
    state: &Mutex<State>,
    node: &str,
    http: &reqwest::Client,
    body: Bytes,
) -> anyhow::Result<Reply> {
    let (fault, stuck_at) = {
        let mut s = state.lock().expect("proxy state");
        if s.fault != Fault::None {
            s.faulted += 1;
        }
        (s.fault, s.stuck_at)
    };
    let pass_on = |body: Bytes| async move {
        anyhow::Ok(
            http.post(node)
                .body(body)
                .header("content-type", "application/json")
                .send()
                .await?
                .bytes()
                .await?,
        )
    };
    Ok(match fault {
        Fault::None => reply(200, pass_on(body).await?),
        Fault::ServerError => reply(500, "upstream failed"),
        Fault::RateLimited => {
            let mut r = reply(429, r#"{"error":"too many requests"}"#);
            r.headers_mut()
                .insert("retry-after", "1".parse().expect("header"));
            r
        }
        Fault::Reset => anyhow::bail!("connection reset"),
        Fault::Stall => {
            tokio::time::sleep(STALL).await;
            reply(200, pass_on(body).await?)
        }
        Fault::Truncated => {
            let full = pass_on(body).await?;
            reply(200, full.slice(..full.len() / 2))
        }
        Fault::Stale => reply(
            200,
            each_call(&body, |call| stale(call, stuck_at, &pass_on)).await?,
        ),
        Fault::Fees {
            base_gwei,
            tip_gwei,
        } => {
            let fees = |call| fee_answer(call, base_gwei, tip_gwei, &pass_on);
            reply(200, each_call(&body, fees).await?)
        }
    })
}

/// The answer to a JSON-RPC `body` (one call or a batch), each call answered by `answer`.
async fn each_call<F, Fut>(body: &[u8], answer: F) -> anyhow::Result<Vec<u8>>
where
    F: Fn(Value) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Value>>,
{
    let answers = match serde_json::from_slice(body)? {
        Value::Array(calls) => {
            let mut answers = Vec::new();
            for call in calls {
                answers.push(answer(call).await?);
            }
            Value::Array(answers)
        }
        call => answer(call).await?,
    };
    Ok(serde_json::to_vec(&answers)?)
}

/// One call answered as by a node whose base fee is `base_gwei` and tips `tip_gwei`.
async fn fee_answer<F, Fut>(
    call: Value,
    base_gwei: u64,
    tip_gwei: u64,
    pass_on: &F,
) -> anyhow::Result<Value>
where
    F: Fn(Bytes) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Bytes>>,
{
    let wei = |gwei: u64| json!(format!("{:#x}", u128::from(gwei) * 1_000_000_000));
    let result = match call["method"].as_str().unwrap_or_default() {
        "eth_gasPrice" => wei(base_gwei + tip_gwei),
        "eth_maxPriorityFeePerGas" => wei(tip_gwei),
        "eth_feeHistory" => {
            let blocks = block_number(&call["params"][0])
                .or_else(|| call["params"][0].as_u64())
                .unwrap_or(1);
            let percentiles = call["params"][2].as_array().map_or(0, Vec::len);
            let latest: Value = serde_json::from_slice(
                &pass_on(
                    serde_json::to_vec(
                        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}),
                    )?
                    .into(),
                )
                .await?,
            )?;
            let latest = block_number(&latest["result"]).unwrap_or_default();
            let blocks = blocks.min(latest + 1);
            json!({
                "oldestBlock": format!("{:#x}", latest + 1 - blocks),
                "baseFeePerGas": vec![wei(base_gwei); blocks as usize + 1],
                "gasUsedRatio": vec![json!(0.5); blocks as usize],
                "reward": vec![vec![wei(tip_gwei); percentiles]; blocks as usize],
            })
        }
        _ => {
            return Ok(serde_json::from_slice(
                &pass_on(serde_json::to_vec(&call)?.into()).await?,
            )?);
        }
    };
    Ok(json!({"jsonrpc": "2.0", "id": call["id"], "result": result}))
}

fn block_number(v: &Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.trim_start_matches("0x"), 16).ok()
}

/// One call answered as by a node stuck at block `stuck_at`.
async fn stale<F, Fut>(mut call: Value, stuck_at: u64, pass_on: &F) -> anyhow::Result<Value>
where
    F: Fn(Bytes) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Bytes>>,
{
    let at = json!(format!("{stuck_at:#x}"));
    let method = call["method"].as_str().unwrap_or_default().to_owned();
    match method.as_str() {
        "eth_blockNumber" => return Ok(json!({"jsonrpc": "2.0", "id": call["id"], "result": at})),
        // The state of the stuck block.
        "eth_getTransactionCount" | "eth_getBalance" | "eth_getCode" => call["params"][1] = at,
        "eth_call" => call["params"][1] = at,
        "eth_getBlockByNumber"
            if matches!(call["params"][0].as_str(), Some("latest" | "pending")) =>
        {
            call["params"][0] = at;
        }
        _ => {}
    }
    let mut answer: Value =
        serde_json::from_slice(&pass_on(serde_json::to_vec(&call)?.into()).await?)?;
    // Nothing mined after the stuck block is known.
    if matches!(
        method.as_str(),
        "eth_getTransactionReceipt" | "eth_getTransactionByHash"
    ) && block_number(&answer["result"]["blockNumber"]).is_some_and(|b| b > stuck_at)
    {
        answer["result"] = Value::Null;
    }
    Ok(answer)
}
