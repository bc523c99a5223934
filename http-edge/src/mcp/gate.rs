//! The door of `/mcp`: every request must carry a valid API key (`x-api-key` or
//! `Authorization: Bearer`), checked by the core before the MCP server reads a byte; one
//! without is 401 with a `WWW-Authenticate` challenge, as the MCP authorization spec asks.
//! A key holds at most `sessions_per_key` MCP sessions open at once: the session a request
//! would open beyond them is closed at once and the request refused 429.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderValue, header::WWW_AUTHENTICATE},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::streamable_http_server::session::{
    SessionId, SessionManager, local::LocalSessionManager,
};
use walletops_proto::{
    ErrorCode,
    v1::{self as pb, api_key_service_client::ApiKeyServiceClient},
};

use crate::{CoreChannel, error::EdgeError, routes::call};

/// The header naming an MCP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// What the door knows: the core that checks keys, the sessions open, and whose they are.
#[derive(Clone)]
pub(crate) struct Gate {
    keys: ApiKeyServiceClient<CoreChannel>,
    sessions: Arc<LocalSessionManager>,
    /// The sessions each key opened, by key id; pruned of closed ones as keys open more.
    opened: Arc<Mutex<HashMap<String, Vec<SessionId>>>>,
    sessions_per_key: usize,
}

impl Gate {
    pub(crate) fn new(
        core: CoreChannel,
        sessions: Arc<LocalSessionManager>,
        sessions_per_key: usize,
    ) -> Self {
        Self {
            keys: ApiKeyServiceClient::new(core),
            sessions,
            opened: Arc::default(),
            sessions_per_key,
        }
    }

    /// Counts `session`, just opened by key `key`; false, and the session forgotten, when the
    /// key holds its most already.
    async fn counted(&self, key: String, session: SessionId) -> bool {
        let live = self.sessions.sessions.read().await;
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        let held = opened.entry(key).or_default();
        held.retain(|s| live.contains_key(s));
        if held.len() >= self.sessions_per_key {
            return false;
        }
        held.push(session);
        true
    }
}

/// `headers` as the core reads a key: a bearer token counts as `x-api-key`.
pub(super) fn keyed(mut headers: HeaderMap) -> HeaderMap {
    use walletops_proto::API_KEY_HEADER;
    if !headers.contains_key(API_KEY_HEADER)
        && let Some(token) = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .and_then(|t| HeaderValue::from_str(t.trim()).ok())
    {
        headers.insert(API_KEY_HEADER, token);
    }
    headers
}

/// Admits a request to `/mcp` whose key the core accepts, and counts the sessions it opens.
pub(super) async fn admit(State(gate): State<Gate>, req: Request, next: Next) -> Response {
    let headers = keyed(req.headers().clone());
    let asked = match call(&headers, Ok(pb::GetCurrentApiKeyRequest {})) {
        Ok(asked) => asked,
        Err(e) => return e.into_response(),
    };
    let key = match gate.keys.clone().get_current_api_key(asked).await {
        Ok(reply) => reply.into_inner().api_key.map(|k| k.id),
        Err(status) => {
            let unauthenticated = status.code() == tonic::Code::Unauthenticated;
            let mut refused = EdgeError::from(status).into_response();
            if unauthenticated {
                refused.headers_mut().insert(
                    WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Bearer realm="walletops""#),
                );
            }
            return refused;
        }
    };
    let opening = !req.headers().contains_key(SESSION_HEADER);
    let answer = next.run(req).await;
    let opened = answer
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(SessionId::from);
    let (true, Some(key), Some(session)) = (opening, key, opened) else {
        return answer;
    };
    if gate.counted(key, session.clone()).await {
        return answer;
    }
    if let Err(e) = gate.sessions.close_session(&session).await {
        tracing::warn!(error = %e, "closing an MCP session over its key's limit");
    }
    EdgeError::Local {
        code: ErrorCode::RateLimited,
        message: format!(
            "this API key holds {} MCP sessions open already, the most it may: end one (DELETE /mcp with its Mcp-Session-Id) or let one idle out",
            gate.sessions_per_key
        ),
        status: None,
    }
    .into_response()
}
