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
    let (failed, value, _) = call_with_notes(client, tool, arguments).await?;
    Ok((failed, value))
}

/// Calls `tool` with `arguments`; whether it failed, its JSON (the first text), and the
/// texts after it.
pub async fn call_with_notes(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<(bool, Value, Vec<String>)> {
    let result = call_raw(client, tool, arguments).await?;
    let mut texts = result.content.iter().map(|c| match c {
        ContentBlock::Text(t) => Ok(t.text.clone()),
        other => anyhow::bail!("{tool}: content that is not text: {other:?}"),
    });
    let json = texts
        .next()
        .ok_or_else(|| anyhow::anyhow!("{tool}: no content"))??;
    let notes = texts.collect::<anyhow::Result<Vec<_>>>()?;
    Ok((
        result.is_error == Some(true),
        serde_json::from_str(&json)?,
        notes,
    ))
}

/// Calls `tool` with `arguments`; the whole result, `_meta` included.
pub async fn call_raw(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> anyhow::Result<CallToolResult> {
    Ok(client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().cloned().unwrap_or_default()),
        )
        .await?)
}

/// Calls `tool`, which must succeed; its JSON.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> anyhow::Result<Value> {
    let (failed, value) = call(client, tool, arguments).await?;
    anyhow::ensure!(!failed, "{tool} failed: {value}");
    Ok(value)
}
