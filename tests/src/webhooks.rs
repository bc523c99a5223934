//! A webhook receiver written from the Standard Webhooks convention alone: it verifies every
//! delivery's `webhook-signature` (`v1,<base64 HMAC-SHA256>` of `{id}.{timestamp}.{body}`
//! under the base64 key after `whsec_`, any of several space-separated signatures, the
//! timestamp within five minutes), keeps what it received, and answers as the test tells it:
//! a status, or never.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use anyhow::Context as _;
use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use base64::{Engine as _, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac as _};
use serde_json::Value;
use sha2::Sha256;

use crate::{Rest, poll_until};

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// This HTTP status (a delivery that fails verification gets 401 whatever this is).
    Status(u16),
    /// Never: the request is held open until the sender gives up.
    Hang,
}

/// One request received.
#[derive(Debug, Clone)]
pub struct Received {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: i64,
    /// `webhook-signature`.
    pub signature: String,
    /// The body as sent.
    pub raw: Vec<u8>,
    /// The body, parsed: the Standard Webhooks envelope (`type`, `timestamp`, `data`).
    pub envelope: Value,
    /// The record the envelope carries (its `data`).
    pub body: Value,
    /// Whether its signature verified under one of the secrets trusted.
    pub verified: bool,
    /// What it was answered (0: held open).
    pub answered: u16,
}

impl Received {
    /// The transaction id of the body.
    pub fn transaction(&self) -> &str {
        self.body["id"].as_str().unwrap_or_default()
    }

    /// The event type the envelope tells of (`transaction.confirmed`).
    pub fn event_type(&self) -> String {
        self.envelope["type"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The body as the convention's own Python library (`standardwebhooks`, which the test
    /// command installs into `.venv`) reads it after verifying it under `secret`: an error
    /// when it does not verify.
    pub async fn verified_by_standardwebhooks(&self, secret: &str) -> anyhow::Result<Value> {
        use tokio::io::AsyncWriteExt as _;
        const VERIFY: &str = "import json, sys\n\
            from standardwebhooks.webhooks import Webhook\n\
            headers = {'webhook-id': sys.argv[2], 'webhook-timestamp': sys.argv[3],\n\
                       'webhook-signature': sys.argv[4]}\n\
            print(json.dumps(Webhook(sys.argv[1]).verify(sys.stdin.buffer.read(), headers)))\n";
        let mut child = tokio::process::Command::new(crate::paths::venv_python()?)
            .args(["-c", VERIFY, secret, &self.id])
            .arg(self.timestamp.to_string())
            .arg(&self.signature)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let mut stdin = child.stdin.take().context("no stdin")?;
        stdin.write_all(&self.raw).await?;
        drop(stdin);
        let out = child.wait_with_output().await?;
        anyhow::ensure!(
            out.status.success(),
            "standardwebhooks refused the delivery: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// Whether the receiver took it (answered 2xx).
    pub fn taken(&self) -> bool {
        (200..300).contains(&self.answered)
    }
}

#[derive(Debug)]
struct Inner {
    secrets: Vec<String>,
    answer: Answer,
    received: Vec<Received>,
}

/// A running receiver.
#[derive(Debug, Clone)]
pub struct Receiver {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

/// Whether `header` holds a valid signature of `id`, `timestamp`, `body` under `secret`.
pub fn verify(secret: &str, id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
    let Some(key) = secret
        .strip_prefix("whsec_")
        .and_then(|k| STANDARD.decode(k).ok())
    else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else {
        return false;
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    header
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|sig| sig == expected)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let id = header(&headers, "webhook-id").to_owned();
    let ts_text = header(&headers, "webhook-timestamp").to_owned();
    let signature = header(&headers, "webhook-signature").to_owned();
    let timestamp: i64 = ts_text.parse().unwrap_or_default();
    let fresh = (chrono::Utc::now().timestamp() - timestamp).abs() <= 300;
    let answer = {
        let mut inner = inner.lock().expect("receiver state");
        let verified = fresh
            && !id.is_empty()
            && inner
                .secrets
                .iter()
                .any(|s| verify(s, &id, &ts_text, &body, &signature));
        let answered = match (verified, inner.answer) {
            (false, _) => 401,
            (true, Answer::Status(s)) => s,
            (true, Answer::Hang) => 0,
        };
        let envelope: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        inner.received.push(Received {
            id,
            timestamp,
            signature,
            raw: body.to_vec(),
            body: envelope["data"].clone(),
            envelope,
            verified,
            answered,
        });
        answered
    };
    if answer == 0 {
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(answer).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl Receiver {
    /// Starts a receiver on a loopback port, answering 200.
    pub async fn start() -> anyhow::Result<Self> {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST).await
    }

    /// Starts a receiver on a port of `ip` (an address of the loopback network, 127.0.0.2
    /// say, to tell it apart from services on 127.0.0.1), answering 200.
    pub async fn start_on(ip: std::net::Ipv4Addr) -> anyhow::Result<Self> {
        let inner = Arc::new(Mutex::new(Inner {
            secrets: Vec::new(),
            answer: Answer::Status(200),
            received: Vec::new(),
        }));
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { addr, inner })
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Verifies deliveries with `secret` too.
    pub fn trust(&self, secret: &str) {
        self.inner
            .lock()
            .expect("receiver state")
            .secrets
            .push(secret.to_owned());
    }

    /// The secret it trusted last (the one `register` got).
    pub fn secret(&self) -> Option<String> {
        self.inner
            .lock()
            .expect("receiver state")
            .secrets
            .last()
            .cloned()
    }

    /// Verifies deliveries with `secret` only.
    pub fn trust_only(&self, secret: &str) {
        self.inner.lock().expect("receiver state").secrets = vec![secret.to_owned()];
    }

    /// Answers `answer` from now on.
    pub fn answer(&self, answer: Answer) {
        self.inner.lock().expect("receiver state").answer = answer;
    }

    /// Everything received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().expect("receiver state").received.clone()
    }

    /// What it took (answered 2xx), in arrival order.
    pub fn taken(&self) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(Received::taken)
            .collect()
    }

    /// Waits until `done` holds of everything received; that then.
    pub async fn wait_until(
        &self,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> anyhow::Result<Vec<Received>> {
        poll_until(what, || async {
            let received = self.received();
            Ok(done(&received).then_some(received))
        })
        .await
    }

    /// Waits until it has taken the `event_type` event of transaction `id`; that delivery.
    pub async fn wait_for_event(&self, id: &str, event_type: &str) -> anyhow::Result<Received> {
        let received = self
            .wait_until(&format!("the {event_type} webhook of {id}"), |r| {
                r.iter()
                    .any(|d| d.taken() && d.transaction() == id && d.event_type() == event_type)
            })
            .await?;
        Ok(received
            .into_iter()
            .find(|d| d.taken() && d.transaction() == id && d.event_type() == event_type)
            .expect("found above"))
    }

    /// Registers this receiver with `api` (`POST /webhooks`) for `event_types` (empty: all)
    /// and trusts its secret; the endpoint's id.
    pub async fn register(&self, api: &Rest, event_types: &[&str]) -> anyhow::Result<String> {
        let reply = api
            .post(
                "/webhooks",
                &serde_json::json!({"url": self.url(), "eventTypes": event_types}),
            )
            .await?;
        anyhow::ensure!(reply.status == 201, "POST /webhooks: {}", reply.text);
        let secret = reply.body["secret"].as_str().unwrap_or_default();
        anyhow::ensure!(secret.starts_with("whsec_"), "no secret: {}", reply.text);
        self.trust(secret);
        Ok(reply.body["id"].as_str().unwrap_or_default().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convention's own example.
    #[test]
    fn verifies_as_the_convention_says() {
        let (secret, id, ts) = (
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
        );
        let body = br#"{"test": 2432232314}"#;
        let sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert!(verify(secret, id, ts, body, sig));
        assert!(verify(secret, id, ts, body, &format!("v1,bm90IGl0 {sig}")));
        assert!(!verify(secret, id, ts, br#"{"test": 1}"#, sig));
        assert!(!verify(secret, "msg_other", ts, body, sig));
    }
}
