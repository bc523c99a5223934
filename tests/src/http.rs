//! The tests' HTTP clients. They speak plain HTTP to servers on loopback, so no client loads
//! the machine's root certificates: reqwest's default reads and decodes every certificate
//! of the system store each time a client is built, which in an unoptimised test build cost
//! more CPU than many tests themselves (a client is built per call in places). A test of
//! TLS builds its own client with the roots it trusts.

/// A client builder that trusts no certificate (plain HTTP only, unless given roots).
pub fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder().tls_certs_only([])
}

/// A client for plain HTTP on loopback.
pub fn client() -> reqwest::Client {
    builder()
        .build()
        .expect("a plain HTTP client builds without a certificate store")
}

/// `GET url` with a fresh client.
pub async fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    client().get(url).send().await
}
