//! TLS on the REST listener (rustls), its certificate reloadable without a restart: each
//! new connection is accepted with the configuration current when it arrives, so a reload
//! (on SIGHUP) changes what new connections see and leaves open ones as they are.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use anyhow::Context;
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
};
use tokio_rustls::TlsAcceptor;

/// The listener's certificate and key files, and the configuration last loaded from them.
#[derive(Debug)]
pub struct ServerTls {
    cert_file: PathBuf,
    key_file: PathBuf,
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Loads `cert_file` (PEM, the chain) and `key_file` (PEM).
    pub fn load(cert_file: &Path, key_file: &Path) -> anyhow::Result<Self> {
        let config = server_config(cert_file, key_file)?;
        Ok(Self {
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// Reads the files again; the connections accepted from now on use them. A failed
    /// reload keeps the configuration in use.
    pub fn reload(&self) -> anyhow::Result<()> {
        let config = server_config(&self.cert_file, &self.key_file)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
        Ok(())
    }

    /// An acceptor with the configuration in use now.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

fn server_config(cert_file: &Path, key_file: &Path) -> anyhow::Result<ServerConfig> {
    let chain = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the certificates in {}", cert_file.display()))?;
    anyhow::ensure!(
        !chain.is_empty(),
        "no certificate in {}",
        cert_file.display()
    );
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("reading the private key in {}", key_file.display()))?;
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .context("the certificate and the key do not match")?;
    // The edge serves HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
