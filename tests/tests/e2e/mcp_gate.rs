//! The door of `/mcp`: a request without a valid key is 401 with a `WWW-Authenticate`
//! challenge and opens no session; a key holds at most so many sessions; a client without a
//! session must key its writes itself.

use alloy::primitives::utils::parse_ether;
use serde_json::{Value, json};
use walletops_tests::{Backend, Options, Service, anvil::Anvil, mcp::connect, on_both_backends};

const RECIPIENT: &str = "0x1111111111111111111111111111111111111111";

/// A raw POST of `body` to `svc`'s `/mcp` with `key` (none: no key) and `headers`.
async fn post(
    svc: &Service,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: &Value,
) -> anyhow::Result<reqwest::Response> {
    let mut req = walletops_tests::http::client()
        .post(format!("{}/mcp", svc.http))
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    Ok(req.send().await?)
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "gate-test", "version": "1"}}})
}

async fn every_request_needs_a_key(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    for key in [None, Some("wops_abcd_0123456789abcdef0123456789abcdef")] {
        let reply = post(&svc, key, &[], &initialize()).await?;
        assert_eq!(reply.status(), 401, "{key:?}");
        let challenge = reply.headers().get("www-authenticate");
        assert!(
            challenge.is_some_and(|v| v.as_bytes().starts_with(b"Bearer ")),
            "{challenge:?}"
        );
        assert!(reply.headers().get("mcp-session-id").is_none());
        let body: Value = reply.json().await?;
        assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    }
    let stream = walletops_tests::http::client()
        .get(format!("{}/mcp", svc.http))
        .header("accept", "text/event-stream")
        .send()
        .await?;
    assert_eq!(stream.status(), 401);
    assert!(
        connect(&svc, "wops_abcd_0123456789abcdef0123456789abcdef", false)
            .await
            .is_err()
    );
    // With a key, the same request opens a session.
    let reply = post(&svc, Some(&svc.api_key), &[], &initialize()).await?;
    assert_eq!(reply.status(), 200);
    assert!(reply.headers().get("mcp-session-id").is_some());
    Ok(())
}

async fn a_key_holds_at_most_so_many_sessions(b: Backend) -> anyhow::Result<()> {
    let options = Options {
        env: vec![("WALLETOPS_MCP_SESSIONS_PER_KEY".to_owned(), "2".to_owned())],
        ..Options::default()
    };
    let svc = Service::start_with(b, options).await?;
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let reply = post(&svc, Some(&svc.api_key), &[], &initialize()).await?;
        assert_eq!(reply.status(), 200);
        let id = reply.headers().get("mcp-session-id").cloned();
        sessions.push(id.expect("a session"));
    }
    let refused = post(&svc, Some(&svc.api_key), &[], &initialize()).await?;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get("retry-after").is_some());
    let body: Value = refused.json().await?;
    assert_eq!(body["code"], "RATE_LIMITED", "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("2 MCP sessions"))
    );
    // Another key has sessions of its own, and no use of this key's; a session no one
    // opened is no session.
    let other = svc.create_key("other").await?;
    let theirs = post(&svc, Some(&other), &[], &initialize()).await?;
    assert_eq!(theirs.status(), 200);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let first = sessions[0].to_str()?.to_owned();
    for (key, session) in [(&other, first.as_str()), (&svc.api_key, "made-up")] {
        let reply = post(&svc, Some(key), &[("mcp-session-id", session)], &list).await?;
        assert_eq!(reply.status(), 404, "{session}");
    }
    // One ended, the key may open one again.
    let ended = walletops_tests::http::client()
        .delete(format!("{}/mcp", svc.http))
        .bearer_auth(&svc.api_key)
        .header("mcp-session-id", sessions[0].clone())
        .send()
        .await?;
    // Ended, not accepted for later: 200 or 204, as MCP clients expect.
    assert_eq!(ended.status(), 204, "{}", ended.status());
    assert_eq!(
        post(&svc, Some(&svc.api_key), &[], &initialize())
            .await?
            .status(),
        200
    );
    Ok(())
}

/// The JSON-RPC answer in an MCP reply: its JSON body, or the `data:` of its event stream.
async fn answer(reply: reqwest::Response) -> anyhow::Result<Value> {
    let text = reply.text().await?;
    let json = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.contains("\"result\"") || d.contains("\"error\""))
        .unwrap_or(&text);
    Ok(serde_json::from_str(json)?)
}

async fn a_client_without_a_session_keys_its_writes(b: Backend) -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let svc = Service::start_with(b, anvil.service_options("", &[])).await?;
    let api = svc.rest(&svc.api_key);
    let wallet = anvil.fund_default_wallet(&api, parse_ether("1")?).await?;
    let stateless = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "send"),
    ];
    let send = |key: Option<String>| {
        let mut arguments =
            json!({"chain": "anvil", "to": RECIPIENT, "asset": "native", "amount": "5"});
        if let Some(key) = key {
            arguments["idempotencyKey"] = key.into();
        }
        // A 2026-07-28 request carries what the handshake once said in its `_meta`.
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "send", "arguments": arguments, "_meta": meta}})
    };
    let refused = answer(post(&svc, Some(&svc.api_key), &stateless, &send(None)).await?).await?;
    let result = &refused["result"];
    assert_eq!(result["isError"], true, "{refused}");
    assert_eq!(
        result["structuredContent"]["code"], "INVALID_INPUT",
        "{refused}"
    );
    assert!(
        result["structuredContent"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("idempotencyKey")),
        "{refused}"
    );
    assert_eq!(anvil.nonce(wallet).await?, 0, "nothing was signed");
    let key = Some(uuid::Uuid::new_v4().to_string());
    let made = answer(post(&svc, Some(&svc.api_key), &stateless, &send(key)).await?).await?;
    let id = made["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap_or_default();
    assert!(!id.is_empty(), "{made}");
    api.wait_for_status(id, "CONFIRMED").await?;
    Ok(())
}

on_both_backends!(
    every_request_needs_a_key,
    a_key_holds_at_most_so_many_sessions,
    a_client_without_a_session_keys_its_writes,
);
