//! TLS on the REST listener with certificates made at test time: the API and the sign-in
//! link over https, no plain HTTP on that port, and a certificate replaced and reloaded on
//! SIGHUP: new connections get the new one, open connections are kept.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use walletops_tests::{Backend, Options, Service, on_both_backends, poll_until};

/// A CA's certificate (PEM), and a certificate for 127.0.0.1 it signed with its key.
fn authority() -> anyhow::Result<(String, String, String)> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?
        .signed_by(&key, &issuer)?;
    Ok((ca_pem, leaf.pem(), key.serialize_pem()))
}

fn trusting(ca_pem: &str, pooled: bool) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?);
    if !pooled {
        builder = builder.pool_max_idle_per_host(0);
    }
    Ok(builder.build()?)
}

async fn the_rest_listener_speaks_tls_and_reloads_on_sighup(b: Backend) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let (ca1, cert1, key1) = authority()?;
    std::fs::write(&cert_file, cert1)?;
    std::fs::write(&key_file, key1)?;
    let options = Options::default()
        .with_env("WALLETOPS_TLS__CERT_FILE", &cert_file.display().to_string())
        .with_env("WALLETOPS_TLS__KEY_FILE", &key_file.display().to_string());
    let svc = Service::start_with(b, options).await?;
    assert!(svc.http.starts_with("https://"), "{}", svc.http);
    assert!(
        svc.sign_in_link.starts_with("https://"),
        "{}",
        svc.sign_in_link
    );
    let wallets = format!("{}/api/v1/wallets", svc.http);
    let kept = trusting(&ca1, true)?;
    let get = |client: &reqwest::Client| {
        client
            .get(&wallets)
            .header("x-api-key", &svc.api_key)
            .send()
    };
    assert_eq!(get(&kept).await?.status(), 200);
    // No plain HTTP on the TLS port.
    let plain = reqwest::Client::new()
        .get(wallets.replacen("https://", "http://", 1))
        .header("x-api-key", &svc.api_key)
        .send()
        .await;
    assert!(plain.map(|r| r.status() != 200).unwrap_or(true));
    // A new certificate from another CA, then SIGHUP.
    let (ca2, cert2, key2) = authority()?;
    std::fs::write(&cert_file, cert2)?;
    std::fs::write(&key_file, key2)?;
    let pid = svc.pid().expect("running");
    let hup = tokio::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .await?;
    assert!(hup.success());
    let fresh = trusting(&ca2, false)?;
    poll_until("new connections to get the new certificate", || async {
        Ok(get(&fresh)
            .await
            .ok()
            .filter(|r| r.status() == 200)
            .map(|_| ()))
    })
    .await?;
    // New connections trusting only the old CA fail; the connection kept open still works.
    assert!(
        get(&trusting(&ca1, false)?).await.is_err(),
        "the old certificate still served"
    );
    assert_eq!(get(&kept).await?.status(), 200);
    Ok(())
}

on_both_backends!(the_rest_listener_speaks_tls_and_reloads_on_sighup);
