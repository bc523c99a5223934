//! Chain writes over gRPC: the same pipeline and idempotency as over REST, and grpcurl's
//! writes as the README types them.

use alloy::primitives::{Address, U256};
use serde_json::{Value, json};
use walletops_proto::v1::{self as pb, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{Backend, grpcurl, on_both_backends, write_request};

use super::{Evm, submitted_id};

async fn grpc_writes_share_the_pipeline(b: Backend) -> anyhow::Result<()> {
    let e = Evm::start(b, "", &[]).await?;
    let counter = e.anvil.deploy_counter().await?;
    let mut client = WalletOpsServiceClient::new(e.svc.channel().await?);
    let key = uuid::Uuid::new_v4().to_string();
    let call = || -> anyhow::Result<tonic::Request<pb::CallContractRequest>> {
        write_request(
            pb::CallContractRequest {
                chain: "anvil".to_owned(),
                to: counter.to_string(),
                function: Some("add(uint256)".to_owned()),
                args: Some(prost_types::ListValue {
                    values: vec![prost_types::Value {
                        kind: Some(prost_types::value::Kind::StringValue("40".to_owned())),
                    }],
                }),
                ..Default::default()
            },
            &e.svc.api_key,
            &key,
        )
    };
    let first = client
        .call_contract(call()?)
        .await?
        .into_inner()
        .submission
        .expect("submission");
    assert_eq!(first.status(), pb::SubmissionStatus::Submitted);
    let again = client
        .call_contract(call()?)
        .await?
        .into_inner()
        .submission
        .expect("submission");
    assert_eq!(again, first, "a retry over gRPC replays the stored answer");
    // The same write over REST, or over gRPC with its empty optional fields set (as a client
    // that sets every field sends them), is the same request under the key.
    let body = json!({"chain": "anvil", "to": counter.to_string(),
                      "function": "add(uint256)", "args": ["40"]});
    let rest = e
        .api()
        .post_with_key("/contracts/send", &key, &body.to_string())
        .await?;
    assert_eq!(submitted_id(&rest)?, first.id);
    let mut every_field = call()?;
    let req = every_field.get_mut();
    req.from = Some(String::new());
    req.value = Some(String::new());
    req.data = Some(String::new());
    let again = client
        .call_contract(every_field)
        .await?
        .into_inner()
        .submission
        .expect("submission");
    assert_eq!(again, first);
    e.wait_for(&first.id, "CONFIRMED").await?;
    assert_eq!(e.anvil.counter_state(counter).await?.0, U256::from(40u64));
    assert_eq!(e.anvil.nonce(e.wallet).await?, 1);
    Ok(())
}

async fn grpcurl_approves_and_calls_a_contract(b: Backend) -> anyhow::Result<()> {
    // The README's grpcurl writes, as a caller types them: JSON field names, enum-free bodies,
    // `args` as a JSON list.
    let e = Evm::start(b, "", &[]).await?;
    let token = e.anvil.deploy_token("GRPC", 18).await?;
    let counter = e.anvil.deploy_counter().await?;
    let spender: Address = "0x2222222222222222222222222222222222222222".parse()?;
    let call = async |method: &str, body: Value| -> anyhow::Result<String> {
        let out = grpcurl([
            "-plaintext".to_owned(),
            "-H".to_owned(),
            format!("x-api-key: {}", e.svc.api_key),
            "-H".to_owned(),
            format!("idempotency-key: {}", uuid::Uuid::new_v4()),
            "-d".to_owned(),
            body.to_string(),
            e.svc.grpc_addr.clone(),
            format!("walletops.v1.WalletOpsService/{method}"),
        ])
        .await?;
        let reply: Value = serde_json::from_str(&out)?;
        Ok(reply["submission"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned())
    };
    let approved = call(
        "ApproveToken",
        json!({"chain": "anvil", "token": token, "spender": spender, "amount": "1000000"}),
    )
    .await?;
    e.wait_for(&approved, "CONFIRMED").await?;
    assert_eq!(
        e.anvil.allowance(token, e.wallet, spender).await?,
        U256::from(1_000_000u64)
    );
    let called = call(
        "CallContract",
        json!({"chain": "anvil", "to": counter, "function": "add(uint256)", "args": [7]}),
    )
    .await?;
    e.wait_for(&called, "CONFIRMED").await?;
    let (count, _, caller) = e.anvil.counter_state(counter).await?;
    assert_eq!((count, caller), (U256::from(7u64), e.wallet));
    Ok(())
}

on_both_backends!(
    grpc_writes_share_the_pipeline,
    grpcurl_approves_and_calls_a_contract,
);
