//! TLS with certificates made at test time: the REST and gRPC listeners speak only TLS, a
//! certificate replaced and reloaded on SIGHUP reaches new connections while open ones are
//! kept, and an edge run apart reaches its core over TLS, with a client certificate when
//! the core asks for one (and is refused without it).

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::process::Command;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use walletops_proto::v1::{ListWalletsRequest, wallet_ops_service_client::WalletOpsServiceClient};
use walletops_tests::{
    Backend, Options, Rest, Service, launch, on_both_backends, poll_until, walletops_bin, with_key,
};

/// A CA made for one test.
struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    fn new() -> anyhow::Result<Self> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key)?.pem();
        Ok(Self {
            pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// A certificate for 127.0.0.1 and localhost it signed, and its key (PEM).
    fn issue(&self) -> anyhow::Result<(String, String)> {
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?
            .signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// `issue`, written to `<name>.pem` and `<name>.key` in `dir`; their paths.
    fn issue_into(&self, dir: &Path, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let (cert, key) = self.issue()?;
        let files = (
            dir.join(format!("{name}.pem")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&files.0, cert)?;
        std::fs::write(&files.1, key)?;
        Ok(files)
    }
}

fn trusting(ca_pem: &str, pooled: bool) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca_pem.as_bytes())?]);
    if !pooled {
        builder = builder.pool_max_idle_per_host(0);
    }
    Ok(builder.build()?)
}

/// A new gRPC connection to `addr` over TLS trusting `ca_pem`, presenting `identity`.
async fn grpc_over_tls(
    addr: &str,
    ca_pem: &str,
    identity: Option<(&str, &str)>,
) -> anyhow::Result<Channel> {
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem));
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Ok(Channel::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect()
        .await?)
}

/// Whether the first user's wallets are listed over `channel`.
async fn lists_wallets(channel: Channel, key: &str) -> bool {
    let Ok(request) = with_key(ListWalletsRequest::default(), key) else {
        return false;
    };
    WalletOpsServiceClient::new(channel)
        .list_wallets(request)
        .await
        .is_ok()
}

fn with_tls(options: Options, cert: &Path, key: &Path) -> Options {
    options
        .with_env("WALLETOPS_TLS__CERT_FILE", &cert.display().to_string())
        .with_env("WALLETOPS_TLS__KEY_FILE", &key.display().to_string())
}

async fn both_listeners_speak_tls_and_reload_on_sighup(b: Backend) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let first = Authority::new()?;
    let (cert_file, key_file) = first.issue_into(dir.path(), "listener")?;
    let svc = Service::start_with(b, with_tls(Options::default(), &cert_file, &key_file)).await?;
    assert!(svc.http.starts_with("https://"), "{}", svc.http);
    assert!(
        svc.sign_in_link.starts_with("https://"),
        "{}",
        svc.sign_in_link
    );
    let wallets = format!("{}/api/v1/wallets", svc.http);
    let kept = trusting(&first.pem, true)?;
    let get = |client: &reqwest::Client| {
        client
            .get(&wallets)
            .header("x-api-key", &svc.api_key)
            .send()
    };
    assert_eq!(get(&kept).await?.status(), 200);
    let kept_grpc = grpc_over_tls(&svc.grpc_addr, &first.pem, None).await?;
    assert!(lists_wallets(kept_grpc.clone(), &svc.api_key).await);
    // No plain HTTP on either TLS port.
    let plain = walletops_tests::http::client()
        .get(wallets.replacen("https://", "http://", 1))
        .header("x-api-key", &svc.api_key)
        .send()
        .await;
    assert!(plain.map(|r| r.status() != 200).unwrap_or(true));
    let plain_grpc = Channel::from_shared(format!("http://{}", svc.grpc_addr))?
        .connect()
        .await;
    assert!(
        match plain_grpc {
            Ok(channel) => !lists_wallets(channel, &svc.api_key).await,
            Err(_) => true,
        },
        "the gRPC listener answered plain HTTP/2"
    );
    // A new certificate from another CA, then SIGHUP.
    let second = Authority::new()?;
    let (cert2, key2) = second.issue()?;
    std::fs::write(&cert_file, cert2)?;
    std::fs::write(&key_file, key2)?;
    let pid = svc.pid().expect("running");
    let hup = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .await?;
    assert!(hup.success());
    let fresh = trusting(&second.pem, false)?;
    poll_until("new connections to get the new certificate", || async {
        Ok(get(&fresh)
            .await
            .ok()
            .filter(|r| r.status() == 200)
            .map(|_| ()))
    })
    .await?;
    let fresh_grpc = grpc_over_tls(&svc.grpc_addr, &second.pem, None).await?;
    assert!(lists_wallets(fresh_grpc, &svc.api_key).await);
    // New connections trusting only the old CA fail; the connections kept open still work.
    assert!(
        get(&trusting(&first.pem, false)?).await.is_err(),
        "the old certificate still served over REST"
    );
    assert!(
        grpc_over_tls(&svc.grpc_addr, &first.pem, None)
            .await
            .is_err(),
        "the old certificate still served over gRPC"
    );
    assert_eq!(get(&kept).await?.status(), 200);
    assert!(lists_wallets(kept_grpc, &svc.api_key).await);
    Ok(())
}

async fn only_edges_with_a_client_certificate_reach_a_core(b: Backend) -> anyhow::Result<()> {
    let svc = Service::start(b).await?;
    let dir = tempfile::tempdir()?;
    let (servers, clients) = (Authority::new()?, Authority::new()?);
    let (core_cert, core_key) = servers.issue_into(dir.path(), "core")?;
    let (edge_cert, edge_key) = clients.issue_into(dir.path(), "edge")?;
    let (servers_file, clients_file) = (
        dir.path().join("servers.pem"),
        dir.path().join("clients.pem"),
    );
    std::fs::write(&servers_file, &servers.pem)?;
    std::fs::write(&clients_file, &clients.pem)?;
    let path = |p: &Path| p.display().to_string();
    let mut core = Command::new(walletops_bin()?);
    core.args(["core", "--grpc-addr", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .envs(svc.cli_env())
        .env("WALLETOPS_TLS__CERT_FILE", path(&core_cert))
        .env("WALLETOPS_TLS__KEY_FILE", path(&core_key))
        .env("WALLETOPS_TLS__CLIENT_CA_FILE", path(&clients_file));
    let core = launch(core, &["gRPC listening on "]).await?;
    let core_addr = core.grpc_addr()?;
    let edge = |identity: bool| {
        let mut edge = Command::new(walletops_bin()?);
        edge.args([
            "edge",
            "--core-url",
            &format!("https://{core_addr}"),
            "--http-addr",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .env("WALLETOPS_TLS__CORE_CA_FILE", path(&servers_file));
        if identity {
            edge.env("WALLETOPS_TLS__CLIENT_CERT_FILE", path(&edge_cert))
                .env("WALLETOPS_TLS__CLIENT_KEY_FILE", path(&edge_key));
        }
        anyhow::Ok(edge)
    };
    let trusted = launch(edge(true)?, &["REST listening on "]).await?;
    let reply = Rest::new(&trusted.http()?, &svc.api_key)
        .get("/wallets")
        .await?;
    assert_eq!(reply.status, 200, "{}", reply.text);
    // An edge without a client certificate is refused by the core: the contract's 503.
    let stranger = launch(edge(false)?, &["REST listening on "]).await?;
    let reply = Rest::new(&stranger.http()?, &svc.api_key)
        .get("/wallets")
        .await?;
    assert_eq!(reply.status, 503, "{}", reply.text);
    assert_eq!(reply.body["code"], "SERVICE_UNAVAILABLE");
    // The same holds for any gRPC client.
    let refused = match grpc_over_tls(&core_addr, &servers.pem, None).await {
        Ok(channel) => !lists_wallets(channel, &svc.api_key).await,
        Err(_) => true,
    };
    assert!(refused, "a client without a certificate reached the core");
    let (cert, key) = (
        std::fs::read_to_string(&edge_cert)?,
        std::fs::read_to_string(&edge_key)?,
    );
    let admitted = grpc_over_tls(&core_addr, &servers.pem, Some((&cert, &key))).await?;
    assert!(lists_wallets(admitted, &svc.api_key).await);
    Ok(())
}

on_both_backends!(
    both_listeners_speak_tls_and_reload_on_sighup,
    only_edges_with_a_client_certificate_reach_a_core,
);
