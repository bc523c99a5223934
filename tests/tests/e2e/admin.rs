//! The admin API on a listener of its own (`admin_addr`): `AdminService` is served there,
//! with its token, and never on the public gRPC listener; the admin listener serves nothing
//! else; without `admin_addr` the admin API is served nowhere.

use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};
use walletops_proto::v1::{
    self as pb, admin_service_client::AdminServiceClient,
    wallet_ops_service_client::WalletOpsServiceClient,
};
use walletops_tests::{
    Backend, Service, as_admin, launch, on_both_backends, walletops_bin, with_key,
};

async fn the_admin_api_has_a_listener_of_its_own(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let admin_addr = svc.admin_addr.clone().expect("an admin listener");
    assert_ne!(admin_addr, svc.grpc_addr);
    let mut admin = AdminServiceClient::new(svc.admin_channel().await?);
    let users = admin
        .list_users(as_admin(pb::ListUsersRequest {})?)
        .await?
        .into_inner();
    assert_eq!(users.users[0].name, "owner");
    let status = HealthClient::new(svc.admin_channel().await?)
        .check(HealthCheckRequest {
            service: "walletops.v1.AdminService".to_owned(),
        })
        .await?
        .into_inner()
        .status();
    assert_eq!(status, ServingStatus::Serving);
    // Not on the public listener, even with the token.
    let err = AdminServiceClient::new(svc.channel().await?)
        .list_users(as_admin(pb::ListUsersRequest {})?)
        .await
        .expect_err("AdminService on the public listener");
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    // Nor does the admin listener serve what API keys call.
    let err = WalletOpsServiceClient::new(svc.admin_channel().await?)
        .list_wallets(with_key(pb::ListWalletsRequest::default(), &svc.api_key)?)
        .await
        .expect_err("WalletOpsService on the admin listener");
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    Ok(())
}

async fn without_admin_addr_the_admin_api_is_off(b: Backend) -> anyhow::Result<()> {
    let data = tempfile::tempdir()?;
    let db = walletops_tests::TestDatabase::new(b).await?;
    let mut cmd = tokio::process::Command::new(walletops_bin()?);
    cmd.args([
        "serve",
        "--http-addr",
        "127.0.0.1:0",
        "--grpc-addr",
        "127.0.0.1:0",
    ])
    .env("WALLETOPS_DATA_DIR", data.path())
    .env("WALLETOPS_DATABASE_URL", &db.url)
    .env("WALLETOPS_ADMIN_TOKEN", walletops_tests::ADMIN_TOKEN)
    .env("RUST_LOG", "warn")
    .env_remove("WALLETOPS_ADMIN_ADDR")
    .env_remove("DATABASE_URL");
    let mut served = launch(cmd, &["REST listening on ", "gRPC listening on "]).await?;
    assert_eq!(served.admin_addr(), None, "{:?}", served.lines);
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", served.grpc_addr()?))?
            .connect()
            .await?;
    let err = AdminServiceClient::new(channel)
        .list_users(as_admin(pb::ListUsersRequest {})?)
        .await
        .expect_err("no admin API");
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    served.child.start_kill()?;
    served.child.wait().await?;
    // An admin listener without a token is refused at start.
    let refused = tokio::process::Command::new(walletops_bin()?)
        .args([
            "serve",
            "--admin-addr",
            "127.0.0.1:0",
            "--http-addr",
            "127.0.0.1:0",
        ])
        .args(["--grpc-addr", "127.0.0.1:0"])
        .env("WALLETOPS_DATA_DIR", data.path())
        .env("WALLETOPS_DATABASE_URL", &db.url)
        .env_remove("WALLETOPS_ADMIN_TOKEN")
        .kill_on_drop(true)
        .output();
    let out = walletops_tests::within("the start to be refused", refused).await??;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin_token"));
    Ok(())
}

on_both_backends!(
    the_admin_api_has_a_listener_of_its_own,
    without_admin_addr_the_admin_api_is_off,
);
