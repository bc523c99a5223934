//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `"{webhook-id}.{webhook-timestamp}.{body}"`, keyed with the endpoint's secret, which is
//! shown to its owner as `whsec_<base64>`.

use base64::{Engine as _, engine::general_purpose::STANDARD};
use hmac::{Hmac, Mac as _};
use rand::RngCore as _;
use sha2::Sha256;

use walletops_domain::secret::Secret;

/// The prefix of a secret as shown to its owner.
const SECRET_PREFIX: &str = "whsec_";

/// Random bytes in a new secret (the convention asks for 24 to 64).
const SECRET_BYTES: usize = 32;

/// A new endpoint secret, as shown to its owner once.
pub fn new_secret() -> Secret {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    Secret::from(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
}

/// The `webhook-signature` header of delivery `id` made at `timestamp` (Unix seconds)
/// with `body`, under `secret` (`whsec_…`); `None` when the secret is not one.
pub fn signature(secret: &Secret, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD
        .decode(secret.expose().strip_prefix(SECRET_PREFIX)?)
        .ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convention's own example.
    #[test]
    fn signs_as_the_convention_says() {
        let secret = Secret::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned());
        assert_eq!(
            signature(
                &secret,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            )
            .as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn new_secrets_differ_and_sign() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with("whsec_"));
        assert!(signature(&a, "id", 1, b"{}").is_some());
        assert!(signature(&Secret::from("plain".to_owned()), "id", 1, b"{}").is_none());
    }
}
