//! TLS for WalletOps's listeners (rustls, ring), each certificate reloadable without a
//! restart: every new connection is accepted with the configuration current when it
//! arrives, so a reload (on SIGHUP) changes what new connections see and leaves open ones
//! as they are. A listener may also require client certificates signed by a given CA
//! (mutual TLS, for the core's gRPC listener: only edges holding one reach it).

use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use anyhow::Context;
use rustls::{
    RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
pub use tokio_rustls::{TlsAcceptor, server::TlsStream};

/// What a listener speaks inside TLS, announced by ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1: the REST edge.
    Http1,
    /// HTTP/2: gRPC.
    Http2,
}

impl Protocol {
    fn alpn(self) -> Vec<u8> {
        match self {
            Self::Http1 => b"http/1.1".to_vec(),
            Self::Http2 => b"h2".to_vec(),
        }
    }
}

/// The PEM files a TLS listener is configured from.
#[derive(Debug, Clone)]
pub struct ListenerFiles {
    /// The certificate chain, leaf first.
    pub cert_file: PathBuf,
    /// The certificate's private key.
    pub key_file: PathBuf,
    /// When set, clients must present a certificate signed by a CA in this file.
    pub client_ca_file: Option<PathBuf>,
}

/// A listener's files and the configuration last loaded from them.
#[derive(Debug)]
pub struct ServerTls {
    files: ListenerFiles,
    protocol: Protocol,
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Loads `files` for a listener speaking `protocol`.
    pub fn load(files: ListenerFiles, protocol: Protocol) -> anyhow::Result<Self> {
        let config = server_config(&files, protocol)?;
        Ok(Self {
            files,
            protocol,
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// Reads the files again; the connections accepted from now on use them. A failed
    /// reload keeps the configuration in use.
    pub fn reload(&self) -> anyhow::Result<()> {
        let config = server_config(&self.files, self.protocol)?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
        Ok(())
    }

    /// An acceptor with the configuration in use now.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(
            self.current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(file: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the certificates in {}", file.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", file.display());
    Ok(certs)
}

fn server_config(files: &ListenerFiles, protocol: Protocol) -> anyhow::Result<ServerConfig> {
    let chain = certificates(&files.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .with_context(|| format!("reading the private key in {}", files.key_file.display()))?;
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match &files.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca_file) => {
            let mut roots = RootCertStore::empty();
            for ca in certificates(ca_file)? {
                roots
                    .add(ca)
                    .with_context(|| format!("a CA certificate in {}", ca_file.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .context("the client CA")?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("the certificate and the key do not match")?;
    config.alpn_protocols = vec![protocol.alpn()];
    Ok(config)
}
