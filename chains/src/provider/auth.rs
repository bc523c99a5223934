//! Authorization signatures (`privy-authorization-signature`): ECDSA P-256 with SHA-256 over
//! the RFC 8785 canonical JSON of `{version, method, url, body, headers}`, DER-encoded and
//! base64. Only `privy-` headers take part; GET requests are never signed.

use std::collections::BTreeMap;

use anyhow::Context as _;
use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use p256::{
    ecdsa::{Signature, SigningKey, signature::Signer as _},
    pkcs8::DecodePrivateKey as _,
};
use serde_json::{Value, json};
use zeroize::Zeroizing;

/// The app's authorization key.
#[derive(Clone)]
pub(crate) struct AuthorizationKey(SigningKey);

impl std::fmt::Debug for AuthorizationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthorizationKey(..)")
    }
}

/// The prefix the provider's dashboard shows authorization keys with.
const DASHBOARD_PREFIX: &str = "wallet-auth:";

impl AuthorizationKey {
    /// The key in `text`: base64 of a PKCS#8 DER P-256 private key, with or without the
    /// dashboard's `wallet-auth:` prefix. The error never quotes the key.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let text = text.trim();
        let b64 = text.strip_prefix(DASHBOARD_PREFIX).unwrap_or(text);
        let der = Zeroizing::new(
            BASE64
                .decode(b64)
                .ok()
                .context("provider.authorization_key is not base64")?,
        );
        let key = SigningKey::from_pkcs8_der(&der)
            .ok()
            .context("provider.authorization_key is not a PKCS#8 P-256 private key")?;
        Ok(Self(key))
    }

    /// The signature of a POST of `body` to `url` with the `privy-` `headers`.
    pub(crate) fn sign(&self, url: &str, body: &Value, headers: &BTreeMap<&str, &str>) -> String {
        let payload = json!({
            "version": 1,
            "method": "POST",
            "url": url,
            "body": body,
            "headers": headers,
        });
        // A `Value` always serializes.
        let canonical = serde_jcs::to_vec(&payload).unwrap_or_default();
        let signature: Signature = self.0.sign(&canonical);
        BASE64.encode(signature.to_der().as_bytes())
    }

    /// The public half, for tests that verify what was signed.
    #[cfg(test)]
    pub(crate) fn verifying_key(&self) -> p256::ecdsa::VerifyingKey {
        *self.0.verifying_key()
    }
}

/// The canonical bytes a signature of a POST of `body` to `url` covers: what a verifier
/// recomputes.
#[cfg(test)]
pub(crate) fn signed_bytes(url: &str, body: &Value, headers: &BTreeMap<&str, &str>) -> Vec<u8> {
    serde_jcs::to_vec(&json!({
        "version": 1, "method": "POST", "url": url, "body": body, "headers": headers,
    }))
    .unwrap_or_default()
}
