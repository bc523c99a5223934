//! The door of `/mcp`: every request must carry a valid API key (`x-api-key` or
//! `Authorization: Bearer`), checked by the core before the MCP server reads a byte; one
//! without is 401 with a `WWW-Authenticate` challenge, as the MCP authorization spec asks.
//! A key holds at most `sessions_per_key` MCP sessions open at once: the session a request
//! would open beyond them is closed at once and the request refused 429. A session is its
//! key's: a request naming one that is not open, or another key's, is 404.

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
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// What the core said the admitted key may call (`GetCurrentApiKey`'s `operations`), put
/// in the request's extensions for the tools: `tools/list` shows those and asks no more.
#[derive(Debug, Clone)]
pub(super) struct Admitted {
    pub(super) operations: Vec<String>,
}

/// What the door knows: the core that checks keys, the sessions open, and whose they are.
#[derive(Clone)]
pub(crate) struct Gate {
    keys: ApiKeyServiceClient<CoreChannel>,
    sessions: Arc<LocalSessionManager>,
    /// The key (id) that opened each session; pruned of closed ones as sessions open.
    owners: Arc<Mutex<HashMap<SessionId, String>>>,
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
            owners: Arc::default(),
            sessions_per_key,
        }
    }

    /// Counts `session`, just opened by key `key`; false, and the session forgotten, when the
    /// key holds its most already.
    async fn counted(&self, key: String, session: SessionId) -> bool {
        let live = self.sessions.sessions.read().await;
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        owners.retain(|s, _| live.contains_key(s));
        if owners.values().filter(|k| **k == key).count() >= self.sessions_per_key {
            return false;
        }
        owners.insert(session, key);
        true
    }

    /// Whether `session` is open and key `key`'s.
    async fn owns(&self, key: &str, session: &SessionId) -> bool {
        let live = self.sessions.sessions.read().await.contains_key(session);
        let owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        live && owners.get(session).is_some_and(|k| k == key)
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
pub(super) async fn admit(State(gate): State<Gate>, mut req: Request, next: Next) -> Response {
    let headers = keyed(req.headers().clone());
    let asked = match call(&headers, Ok(pb::GetCurrentApiKeyRequest {})) {
        Ok(asked) => asked,
        Err(e) => return e.into_response(),
    };
    let key = match gate.keys.clone().get_current_api_key(asked).await {
        Ok(reply) => match reply.into_inner() {
            pb::GetCurrentApiKeyResponse {
                api_key: Some(key),
                operations,
                ..
            } => {
                req.extensions_mut().insert(Admitted { operations });
                key.id
            }
            _ => {
                return challenge(EdgeError::Local {
                    code: ErrorCode::Unauthorized,
                    message: "an API key is required (x-api-key or Authorization: Bearer)"
                        .to_owned(),
                    status: None,
                });
            }
        },
        Err(status) if status.code() == tonic::Code::Unauthenticated => {
            return challenge(EdgeError::from(status));
        }
        Err(status) => return EdgeError::from(status).into_response(),
    };
    let named = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(SessionId::from);
    if let Some(session) = &named
        && !gate.owns(&key, session).await
    {
        return EdgeError::Local {
            code: ErrorCode::NotFound,
            message: "no such MCP session of this API key: initialize a new one".to_owned(),
            status: None,
        }
        .into_response();
    }
    let opening = named.is_none();
    let ending = req.method() == axum::http::Method::DELETE;
    let mut answer = next.run(req).await;
    // The transport answers a session ended with 202 Accepted, which says the work is still
    // under way; it is done, and the MCP spec's clients expect 200 or 204.
    if ending && answer.status() == axum::http::StatusCode::ACCEPTED {
        *answer.status_mut() = axum::http::StatusCode::NO_CONTENT;
        *answer.body_mut() = axum::body::Body::empty();
        answer
            .headers_mut()
            .remove(axum::http::header::CONTENT_LENGTH);
    }
    let opened = answer
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(SessionId::from);
    let (true, Some(session)) = (opening, opened) else {
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

/// `refusal`, 401, with the challenge the MCP authorization spec asks for.
fn challenge(refusal: EdgeError) -> Response {
    let mut refused = refusal.into_response();
    refused.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Bearer realm="walletops""#),
    );
    refused
}
