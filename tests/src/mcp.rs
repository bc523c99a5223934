//! An MCP client of a test service: rmcp's, over the streamable HTTP transport at `/mcp`.

use std::collections::HashMap;

use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ContentBlock},
    service::RunningService,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::Value;

use crate::Service;

/// A connected MCP client.
pub type Client = RunningService<RoleClient, ()>;

/// An MCP client of `svc` acting with `key`, sent as `Authorization: Bearer` when `bearer`.
pub async fn connect(svc: &Service, key: &str, bearer: bool) -> anyhow::Result<Client> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", svc.http));
    if bearer {
        config = config.auth_header(key.to_owned());
    } else {
        let mut headers = HashMap::new();
        headers.insert(
            http::HeaderName::from_static("x-api-key"),
            http::HeaderValue::from_str(key)?,
        );
        config = config.custom_headers(headers);
    }
    Ok(
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await?,
    )
}

/// The names of the tools `client` is shown, sorted.
pub async fn tool_names(client: &Client) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    Ok(names)
}

/// Calls `tool` with `arguments`; whether it failed, and its JSON.
pub async fn call(client: &Client, tool: &str, arguments: Value) -> anyhow::Result<(bool, Value)> {
    let result: CallToolResult = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().cloned().unwrap_or_default()),
        )
        .await?;
    let text = match result.content.first() {
        Some(ContentBlock::Text(t)) => t.text.clone(),
        other => anyhow::bail!("{tool}: no text content: {other:?}"),
    };
    Ok((result.is_error == Some(true), serde_json::from_str(&text)?))
}

/// Calls `tool`, which must succeed; its JSON.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> anyhow::Result<Value> {
    let (failed, value) = call(client, tool, arguments).await?;
    anyhow::ensure!(!failed, "{tool} failed: {value}");
    Ok(value)
}
