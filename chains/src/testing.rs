//! Test-only support (`#[cfg(test)]`): a scripted local HTTP server for the clients of
//! external APIs (the aggregators, the wallet provider): each request takes the next
//! scripted answer, and every request is kept for the test to inspect. It uses nothing of
//! the core but `upstream`, so the tests of any module may use it.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use reqwest::Url;
use serde_json::Value;

use crate::upstream::HttpPolicy;

/// Short timeouts and backoffs, so the failure tests take well under a second each.
pub(crate) fn policy() -> HttpPolicy {
    HttpPolicy {
        connect_timeout: Duration::from_millis(500),
        timeout: Duration::from_millis(300),
        attempts: 3,
        min_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(2),
    }
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A status and a JSON body.
    Json(u16, Value),
    /// A status, a `Retry-After` value and a JSON body.
    RetryAfter(u16, &'static str, Value),
    /// No answer for ten seconds.
    Stall,
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: HashMap<String, String>,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<Value>,
}

/// The script: each request takes the next reply; the last one repeats.
#[derive(Debug, Default)]
pub(crate) struct Script {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

impl Script {
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

async fn answer(
    State(script): State<Arc<Script>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = uri
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    script.seen.lock().expect("lock").push(Seen {
        method,
        path: uri.path().to_owned(),
        query,
        headers,
        body: serde_json::from_slice(&body).ok(),
    });
    let reply = {
        let mut replies = script.replies.lock().expect("lock");
        if replies.len() > 1 {
            replies.pop_front()
        } else {
            replies.front().cloned()
        }
    };
    let status = |code: u16| StatusCode::from_u16(code).expect("a status");
    match reply.expect("a scripted reply") {
        Reply::Json(code, body) => (status(code), axum::Json(body)).into_response(),
        Reply::RetryAfter(code, after, body) => {
            (status(code), [("retry-after", after)], axum::Json(body)).into_response()
        }
        Reply::Stall => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
    }
}

/// Serves `replies` on 127.0.0.1:0; returns the base URL (with `prefix` as its path) and
/// the script.
pub(crate) async fn serve(prefix: &str, replies: Vec<Reply>) -> (Url, Arc<Script>) {
    let script = Arc::new(Script {
        replies: Mutex::new(replies.into()),
        seen: Mutex::default(),
    });
    let app = Router::new().fallback(answer).with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://{addr}{prefix}").parse().expect("url");
    (url, script)
}

/// A base URL nothing listens on.
pub(crate) async fn dead_url() -> Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}").parse().expect("url")
}
