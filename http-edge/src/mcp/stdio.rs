//! `walletops mcp`: an MCP server on stdin/stdout for desktop agents, which spawn their tool
//! servers as processes. It holds no rule of its own: it lists and calls the tools of a
//! service's `/mcp` with the key it was given, so the service's checks apply. A write the
//! agent sends without an idempotency key gets one made from the agent's call id (and this
//! process's run), so an agent retrying a call pays once.

use std::collections::HashMap;

use axum::http::{HeaderName, HeaderValue};
use rmcp::{
    ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, InitializeResult, ListToolsResult,
        PaginatedRequestParams, RequestId,
    },
    service::{RequestContext, RunningService, ServiceError},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use walletops_proto::API_KEY_HEADER;

/// The tools whose input takes an idempotency key.
const WRITES: [&str; 3] = ["send", "swap", "approve_token"];

/// Forwards tool calls to a service.
struct Bridge {
    service: RunningService<RoleClient, ()>,
    /// This run: with the agent's call id, it names a write's idempotency key.
    run: uuid::Uuid,
}

fn forwarded(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(format!("the WalletOps service: {other}"), None),
    }
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> InitializeResult {
        super::server_info()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.service
            .peer()
            .list_tools(request)
            .await
            .map_err(forwarded)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if WRITES.contains(&request.name.as_ref()) {
            let arguments = request.arguments.get_or_insert_with(Default::default);
            if !arguments.contains_key("idempotencyKey") {
                let id = match &ctx.id {
                    RequestId::Number(n) => n.to_string(),
                    RequestId::String(s) => s.to_string(),
                };
                let name = format!(
                    "walletops/mcp-stdio/{}/{id}/{}/{}",
                    self.run,
                    request.name,
                    serde_json::to_string(arguments).unwrap_or_default()
                );
                let key = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, name.as_bytes());
                arguments.insert("idempotencyKey".to_owned(), key.to_string().into());
            }
        }
        self.service
            .peer()
            .call_tool_once(request)
            .await
            .map_err(forwarded)
    }
}

/// Serves, on stdin/stdout, the tools of the service at `url` (its `/mcp`) under `api_key`,
/// until stdin closes.
pub async fn serve(url: &str, api_key: &str) -> anyhow::Result<()> {
    let mut headers = HashMap::new();
    headers.insert(
        HeaderName::from_static(API_KEY_HEADER),
        HeaderValue::from_str(api_key.trim())?,
    );
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(headers),
    );
    let service = ().serve(transport).await?;
    let bridge = Bridge {
        service,
        run: uuid::Uuid::new_v4(),
    };
    bridge
        .serve(rmcp::transport::stdio())
        .await?
        .waiting()
        .await?;
    Ok(())
}
