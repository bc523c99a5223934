//! Errors over gRPC: the contract code in ErrorInfo, and the fields at fault in BadRequest
//! named as the contract spells them.

use tonic_types::StatusExt as _;
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    Backend, Service, as_admin, on_one_backend, reason, with_key, write_request,
};

async fn grpc_errors_carry_error_info_and_field_violations(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let mut client = WalletOpsServiceClient::new(svc.channel().await?);
    let req = write_request(
        pb::SendRequest {
            chain: "base".to_owned(),
            to: "nope".to_owned(),
            asset: pb::Asset::Native.into(),
            amount: "-5".to_owned(),
            ..Default::default()
        },
        &svc.api_key,
        &uuid::Uuid::new_v4().to_string(),
    )?;
    let err = client.send(req).await.expect_err("bad input");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(reason(&err).as_deref(), Some("INVALID_INPUT"));
    let details = err.get_error_details();
    let mut fields: Vec<String> = details
        .bad_request()
        .expect("BadRequest")
        .field_violations
        .iter()
        .map(|v| v.field.clone())
        .collect();
    fields.sort();
    assert_eq!(fields, ["amount", "to"]);
    let err = err_unknown_chain(&mut client, &svc.api_key).await?;
    assert_eq!(reason(&err).as_deref(), Some("CHAIN_UNKNOWN"));
    let err = client
        .get_transaction(with_key(
            pb::GetTransactionRequest {
                id: uuid::Uuid::new_v4().to_string(),
            },
            &svc.api_key,
        )?)
        .await
        .expect_err("unknown transaction");
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(reason(&err).as_deref(), Some("NOT_FOUND"));
    // Fields are named as the contract spells them (grpcurl's JSON), not as Rust does.
    let violated = |err: &tonic::Status| -> Vec<String> {
        err.get_error_details()
            .bad_request()
            .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
            .unwrap_or_default()
    };
    let err = err_unknown_chain(&mut client, &svc.api_key).await?;
    assert_eq!(violated(&err), ["chain"]);
    let mut admin = AdminServiceClient::new(svc.admin_channel().await?);
    let err = admin
        .create_wallet(as_admin(pb::CreateWalletRequest {
            user: "admin".to_owned(),
            chain_type: "dogecoin".to_owned(),
            make_default: None,
            custody: String::new(),
        })?)
        .await
        .expect_err("unknown chain type");
    assert_eq!(violated(&err), ["chainType"]);
    let own = svc.rest(&svc.api_key).default_wallet("ethereum").await?;
    let err = admin
        .update_wallet(as_admin(pb::UpdateWalletRequest {
            address: own,
            make_default: Some(false),
            automation_enabled: None,
        })?)
        .await
        .expect_err("makeDefault false");
    assert_eq!(violated(&err), ["makeDefault"]);
    Ok(())
}

/// The error of a balance read on an unknown chain.
async fn err_unknown_chain(
    client: &mut WalletOpsServiceClient<tonic::transport::Channel>,
    key: &str,
) -> anyhow::Result<tonic::Status> {
    Ok(client
        .get_balances(with_key(
            pb::GetBalancesRequest {
                chain: "nope".to_owned(),
                ..Default::default()
            },
            key,
        )?)
        .await
        .expect_err("unknown chain"))
}

on_one_backend!(grpc_errors_carry_error_info_and_field_violations,);
