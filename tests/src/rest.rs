//! The REST edge as a caller uses it: requests with or without a key, the contract's error
//! body checked in one place, and waits on a transaction record.

use anyhow::{Context, bail};
use reqwest::{Method, StatusCode, header::HeaderMap};
use serde_json::Value;

use crate::wait::poll_until;

/// A REST client of the edge.
#[derive(Debug, Clone)]
pub struct Rest {
    base: String,
    key: Option<String>,
    client: reqwest::Client,
}

/// One REST answer.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body as JSON (`Value::Null` when the body is not JSON).
    pub body: Value,
    /// Body as text.
    pub text: String,
}

impl Reply {
    /// The `x-request-id` header.
    pub fn request_id(&self) -> Option<&str> {
        self.headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
    }

    /// The contract error code of the body.
    pub fn code(&self) -> Option<&str> {
        self.body.get("code").and_then(Value::as_str)
    }

    /// Asserts an INVALID_INPUT answer (400 and the contract's error body) whose message
    /// names `field` as one at fault (`invalid input: a: …; field: …`).
    pub fn assert_invalid(&self, field: &str) -> anyhow::Result<()> {
        self.assert_error(400, "INVALID_INPUT")?;
        let message = self.body["error"].as_str().unwrap_or_default();
        let named = message
            .strip_prefix("invalid input: ")
            .is_some_and(|faults| {
                faults.starts_with(&format!("{field}: "))
                    || faults.contains(&format!("; {field}: "))
            });
        anyhow::ensure!(named, "expected {field} named: {message}");
        Ok(())
    }

    /// Asserts `assert_error`, and that the message begins with the field at fault.
    pub fn assert_error_on(&self, status: u16, code: &str, field: &str) -> anyhow::Result<()> {
        self.assert_error(status, code)?;
        let message = self.body["error"].as_str().unwrap_or_default();
        anyhow::ensure!(
            message.starts_with(&format!("{field}: ")),
            "expected the message to name {field}: {message}"
        );
        Ok(())
    }

    /// Asserts the contract's error shape: `status`, `code`, `{error, code, requestId}` with
    /// `requestId` equal to the `x-request-id` header, and nothing else in the body.
    pub fn assert_error(&self, status: u16, code: &str) -> anyhow::Result<()> {
        if self.status.as_u16() != status || self.code() != Some(code) {
            bail!(
                "expected {status} {code}, got {} {}",
                self.status,
                self.text
            );
        }
        let obj = self
            .body
            .as_object()
            .context("error body is not an object")?;
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        if keys != ["code", "error", "requestId"] {
            bail!("error body keys are {keys:?}");
        }
        let message = obj["error"].as_str().unwrap_or_default();
        if message.is_empty() {
            bail!("error message is empty");
        }
        let header = self.request_id().context("no x-request-id header")?;
        if obj["requestId"].as_str() != Some(header) {
            bail!(
                "requestId {} differs from header {header}",
                obj["requestId"]
            );
        }
        Ok(())
    }
}

impl Rest {
    /// A client of the edge at `http` (e.g. `http://127.0.0.1:8080`) acting with `key`.
    pub fn new(http: &str, key: &str) -> Rest {
        Rest {
            base: format!("{http}/api/v1"),
            key: Some(key.to_owned()),
            client: crate::http::client(),
        }
    }

    /// A client of the edge at `http` with no key.
    pub fn anonymous(http: &str) -> Rest {
        Rest {
            base: format!("{http}/api/v1"),
            key: None,
            client: crate::http::client(),
        }
    }

    /// The same client connecting from local address `ip` (any of 127.0.0.0/8 is this
    /// machine): to the service, another client.
    pub fn from_address(&self, ip: std::net::IpAddr) -> anyhow::Result<Rest> {
        Ok(Rest {
            client: crate::http::builder().local_address(ip).build()?,
            ..self.clone()
        })
    }

    /// The same client acting with another key.
    pub fn with_key(&self, key: &str) -> Rest {
        Rest {
            key: Some(key.to_owned()),
            ..self.clone()
        }
    }

    /// Sends a request; `path` is relative to `/api/v1`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> anyhow::Result<Reply> {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.key {
            req = req.header("x-api-key", key);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(body) = body {
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
            {
                req = req.header("content-type", "application/json");
            }
            req = req.body(body.to_owned());
        }
        let resp = req.send().await?;
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.request(Method::GET, path, &[], None).await
    }

    /// POST `body` to `path` with a fresh `Idempotency-Key`.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Reply> {
        let key = uuid::Uuid::new_v4().to_string();
        self.post_with_key(path, &key, &body.to_string()).await
    }

    /// POST the text `body` (as JSON) to `path` under `Idempotency-Key: idempotency_key`.
    pub async fn post_with_key(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &str,
    ) -> anyhow::Result<Reply> {
        self.request(
            Method::POST,
            path,
            &[("Idempotency-Key", idempotency_key)],
            Some(body),
        )
        .await
    }

    /// The address of the caller's default wallet of the chain family `family`
    /// (`ethereum`, `solana`).
    pub async fn default_wallet(&self, family: &str) -> anyhow::Result<String> {
        let reply = self
            .get(&format!("/wallets?chain={family}&defaultOnly=true"))
            .await?;
        anyhow::ensure!(reply.status == 200, "GET /wallets: {}", reply.text);
        reply.body["wallets"][0]["address"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no default {family} wallet: {}", reply.text))
    }

    /// The record of transaction `id` (`GET /tx/{id}`), which must be found.
    pub async fn transaction(&self, id: &str) -> anyhow::Result<Value> {
        let reply = self.get(&format!("/tx/{id}")).await?;
        anyhow::ensure!(reply.status == 200, "GET /tx/{id}: {}", reply.text);
        Ok(reply.body)
    }

    /// Waits until transaction `id` reaches `status`; its record then.
    pub async fn wait_for_status(&self, id: &str, status: &str) -> anyhow::Result<Value> {
        self.wait_for_record(&format!("transaction {id} to become {status}"), id, |tx| {
            tx["status"] == status
        })
        .await
    }

    /// Waits at most a second (how soon a change to a key reaches every core's reads) until
    /// this client's key is refused (`GET /wallets` answers 401); `what` names the change.
    pub async fn wait_refused(&self, what: &str) -> anyhow::Result<()> {
        let within = std::time::Duration::from_secs(1);
        crate::wait::poll_until_within(what, within, || async {
            Ok((self.get("/wallets").await?.status == 401).then_some(()))
        })
        .await
    }

    /// Waits until the status history of transaction `id` mentions `note`; its record then.
    pub async fn wait_for_note(&self, id: &str, note: &str) -> anyhow::Result<Value> {
        self.wait_for_record(&format!("transaction {id} to note {note:?}"), id, |tx| {
            tx["statusHistory"].to_string().contains(note)
        })
        .await
    }

    /// Polls the record of transaction `id` until `done` holds for it. An answer of the
    /// spent read budget (429) is asked again: the budget refills while the record is
    /// awaited.
    async fn wait_for_record(
        &self,
        what: &str,
        id: &str,
        done: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        poll_until(what, || async {
            let reply = self.get(&format!("/tx/{id}")).await?;
            if reply.status == StatusCode::TOO_MANY_REQUESTS {
                return Ok(None);
            }
            anyhow::ensure!(reply.status == 200, "GET /tx/{id}: {}", reply.text);
            Ok(done(&reply.body).then_some(reply.body))
        })
        .await
    }
}
