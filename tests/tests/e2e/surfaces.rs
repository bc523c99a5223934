//! The service's discoverable surfaces: gRPC reflection (v1 and v1alpha) and health, grpcurl
//! as a newcomer uses it, and the OpenAPI document of the REST contract.

use futures::StreamExt;
use serde_json::json;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use walletops_tests::{Backend, Service, grpcurl, grpcurl_bin, on_both_backends, within};

/// The services of the public gRPC listener (`AdminService` has a listener of its own).
const OUR_SERVICES: [&str; 3] = [
    "walletops.v1.WalletOpsService",
    "walletops.v1.ApiKeyService",
    "walletops.v1.DashboardService",
];

/// The services gRPC reflection lists over `channel`, asked through the reflection API of
/// module `$api` (`v1` or `v1alpha`: the same messages in two packages).
macro_rules! reflected_services {
    ($api:ident, $channel:expr) => {{
        use tonic_reflection::pb::$api::{
            ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        };
        let req = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let mut stream = ServerReflectionClient::new($channel)
            .server_reflection_info(futures::stream::iter([req]))
            .await?
            .into_inner();
        match stream
            .next()
            .await
            .transpose()?
            .and_then(|r| r.message_response)
        {
            Some(MessageResponse::ListServicesResponse(l)) => {
                l.service.into_iter().map(|s| s.name).collect::<Vec<_>>()
            }
            other => anyhow::bail!("unexpected reflection answer {other:?}"),
        }
    }};
}

async fn reflection_lists_the_services_in_v1_and_v1alpha(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let channel = svc.channel().await?;
    let v1 = reflected_services!(v1, channel.clone());
    let v1alpha = reflected_services!(v1alpha, channel);
    for listed in [&v1, &v1alpha] {
        for name in OUR_SERVICES.iter().chain(&["grpc.health.v1.Health"]) {
            assert!(
                listed.iter().any(|s| s == name),
                "{name} missing from {listed:?}"
            );
        }
    }
    Ok(())
}

async fn health_reports_serving(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut health = HealthClient::new(svc.channel().await?);
    for service in std::iter::once("").chain(OUR_SERVICES) {
        let status = health
            .check(HealthCheckRequest {
                service: service.to_owned(),
            })
            .await?
            .into_inner()
            .status();
        assert_eq!(status, ServingStatus::Serving, "{service:?}");
    }
    let err = health
        .check(HealthCheckRequest {
            service: "no.such.Service".to_owned(),
        })
        .await
        .expect_err("unknown service");
    assert_eq!(err.code(), tonic::Code::NotFound);
    Ok(())
}

async fn health_turns_not_serving_when_the_core_drains(b: Backend) -> anyhow::Result<()> {
    let mut svc = Service::start(b).await?;
    let mut health = HealthClient::new(svc.channel().await?);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await?
        .into_inner();
    let status = |r: Option<tonic_health::pb::HealthCheckResponse>| r.map(|r| r.status());
    assert_eq!(status(watch.message().await?), Some(ServingStatus::Serving));
    svc.signal_stop().await?;
    let next = within("a health update after SIGTERM", watch.message()).await??;
    assert_eq!(status(next), Some(ServingStatus::NotServing));
    // Then the watch ends, so it does not hold the drain: the core stops at once, cleanly,
    // with the watcher still connected.
    assert_eq!(status(watch.message().await?), None);
    let exit = svc.exited().await?;
    assert!(exit.success(), "a drained stop exits 0: {exit}");
    drop((watch, health));
    Ok(())
}

async fn grpcurl_lists_describes_and_calls(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let addr = svc.grpc_addr.clone();
    let list = grpcurl(vec!["-plaintext".into(), addr.clone(), "list".into()]).await?;
    for name in OUR_SERVICES {
        assert!(list.contains(name), "{list}");
    }
    let described = grpcurl(vec![
        "-plaintext".into(),
        addr.clone(),
        "describe".into(),
        "walletops.v1.SendRequest".into(),
    ])
    .await?;
    assert!(described.contains("amount"), "{described}");
    let wallets = grpcurl(vec![
        "-plaintext".into(),
        "-H".into(),
        format!("x-api-key: {}", svc.api_key),
        "-d".into(),
        r#"{"chain": "solana"}"#.into(),
        addr.clone(),
        "walletops.v1.WalletOpsService/ListWallets".into(),
    ])
    .await?;
    let parsed: serde_json::Value = serde_json::from_str(&wallets)?;
    assert_eq!(parsed["wallets"][0]["chainType"], "solana", "{wallets}");
    // grpcurl decodes the error details through reflection, so the contract code shows.
    let out = tokio::process::Command::new(grpcurl_bin()?)
        .args([
            "-plaintext",
            "-d",
            "{}",
            &addr,
            "walletops.v1.WalletOpsService/ListWallets",
        ])
        .output()
        .await?;
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("Unauthenticated"), "{text}");
    Ok(())
}

async fn openapi_document_covers_the_rest_contract(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let doc: serde_json::Value =
        walletops_tests::http::get(format!("{}/api/v1/openapi.json", svc.http))
            .await?
            .json()
            .await?;
    assert!(
        doc["openapi"]
            .as_str()
            .unwrap_or_default()
            .starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    for (path, method) in [
        ("/api/v1/wallets", "get"),
        ("/api/v1/wallets/balances", "get"),
        ("/api/v1/wallets/{address}/balances", "get"),
        ("/api/v1/tx/{id}", "get"),
        ("/api/v1/send", "post"),
        ("/api/v1/token/approve", "post"),
        ("/api/v1/contracts/send", "post"),
        ("/api/v1/trade/quote", "post"),
        ("/api/v1/trade/swap", "post"),
    ] {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} missing");
        // Any call can meet a bad key, a spent budget or an unreachable core.
        for status in ["400", "401", "429", "500", "503"] {
            assert_eq!(
                op["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/ErrorBody",
                "{method} {path} {status}"
            );
        }
    }
    // Values are documented as strictly as the service checks them.
    let id = &doc["paths"]["/api/v1/tx/{id}"]["get"]["parameters"][0];
    assert_eq!(id["schema"]["format"], "uuid", "{id}");
    let key = doc["paths"]["/api/v1/send"]["post"]["parameters"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == "Idempotency-Key"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(key["schema"]["format"], "uuid", "{key}");
    let send = &doc["components"]["schemas"]["SendBody"];
    for field in ["chain", "to", "asset", "amount"] {
        assert!(
            send["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!(field))),
            "SendBody.{field} required: {send}"
        );
    }
    assert_eq!(
        send["properties"]["amount"]["pattern"],
        "^(0x[0-9a-fA-F]+|[0-9]+)$"
    );
    // The address of `/wallets/{address}/balances` is its path's alone.
    let params = doc["paths"]["/api/v1/wallets/{address}/balances"]["get"]["parameters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let addresses: Vec<_> = params.iter().filter(|p| p["name"] == "address").collect();
    assert_eq!(addresses.len(), 1, "{params:?}");
    assert_eq!(addresses[0]["in"], "path");
    // Each chain write documents every status it answers with.
    for path in [
        "/api/v1/send",
        "/api/v1/token/approve",
        "/api/v1/contracts/send",
    ] {
        let responses = &doc["paths"][path]["post"]["responses"];
        for status in ["200", "400", "403", "409", "502"] {
            assert!(
                responses[status].is_object(),
                "{path} {status}: {responses}"
            );
        }
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["api_key"]["name"],
        "x-api-key"
    );
    let error = &doc["components"]["schemas"]["ErrorBody"]["properties"];
    for field in ["error", "code", "requestId"] {
        assert!(error[field].is_object(), "ErrorBody.{field}");
    }
    Ok(())
}

on_both_backends!(
    reflection_lists_the_services_in_v1_and_v1alpha,
    health_reports_serving,
    health_turns_not_serving_when_the_core_drains,
    grpcurl_lists_describes_and_calls,
    openapi_document_covers_the_rest_contract,
);
