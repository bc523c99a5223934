//! The one-time flash: a secret the core made for a form (a new API key, a webhook's new
//! signing secret) carried across the form's redirect to the page that shows it once.
//!
//! Every changing form answers 303, so reloading a page never posts again; the secret
//! cannot ride in the redirect's URL (history, logs, `Referer`), and the edge keeps no
//! store. So it travels in a cookie, sealed: AES-256-GCM under a key derived from the
//! session cookie's value, which the edge sees on every request and the core stores only
//! as a SHA-256. Any edge can open it on the next request of the same session; no other
//! session, and nobody reading the cookie alone, can. The cookie is `HttpOnly`,
//! `SameSite=Strict`, scoped to `/dashboard`, lives a minute at most, and the page that
//! shows it removes it in the same answer.

use aes_gcm::{
    Aes256Gcm, KeyInit, Nonce,
    aead::{Aead, Payload},
};
use axum_extra::extract::CookieJar;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD as B64};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Page, SESSION_COOKIE, Visit, dashboard_cookie};

/// The flash cookie.
const FLASH_COOKIE: &str = "walletops_flash";
/// Long enough to follow a redirect, short enough that an unread flash soon goes.
const FLASH_SECS: i64 = 60;
/// Binds a sealed flash to its purpose.
const AAD: &[u8] = b"walletops dashboard flash v1";

/// What a flash carries.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Flash {
    /// An API key just made: its name and value.
    NewKey { name: String, secret: String },
    /// A webhook's new signing secret: the endpoint's URL and the secret.
    NewSecret { url: String, secret: String },
}

/// The cipher of `session`'s flashes.
fn cipher(session: &str) -> Option<Aes256Gcm> {
    let key = Sha256::new()
        .chain_update(AAD)
        .chain_update(session.as_bytes())
        .finalize();
    Aes256Gcm::new_from_slice(key.as_slice()).ok()
}

/// `flash` sealed under `session`.
fn seal(session: &str, flash: &Flash) -> Option<String> {
    let plain = serde_json::to_vec(flash).ok()?;
    let mut nonce = [0u8; 12];
    rand::rng().fill_bytes(&mut nonce);
    let sealed = cipher(session)?
        .encrypt(
            Nonce::from_slice(&nonce),
            Payload {
                msg: &plain,
                aad: AAD,
            },
        )
        .ok()?;
    let mut out = nonce.to_vec();
    out.extend(sealed);
    Some(B64.encode(out))
}

/// The flash `value` sealed under `session`; `None` when it was sealed under another or
/// altered.
fn open(session: &str, value: &str) -> Option<Flash> {
    let bytes = B64.decode(value).ok()?;
    if bytes.len() < 12 {
        return None;
    }
    let (nonce, sealed) = bytes.split_at(12);
    let plain = cipher(session)?
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: sealed,
                aad: AAD,
            },
        )
        .ok()?;
    serde_json::from_slice(&plain).ok()
}

/// A redirect to `to` that carries `flash` to it. Without a session to seal it under (the
/// core accepted none, so this does not happen), the redirect goes alone.
pub(crate) fn redirect_with(visit: &Visit, secure: bool, to: String, flash: &Flash) -> Page {
    let sealed = visit
        .cookie(SESSION_COOKIE)
        .and_then(|session| seal(&session, flash));
    match sealed {
        Some(value) => {
            let cookie = dashboard_cookie(FLASH_COOKIE, value, FLASH_SECS, secure);
            Page::WithCookies(visit.jar.clone().add(cookie), Box::new(Page::SeeOther(to)))
        }
        None => {
            tracing::error!("a flash with no session to seal it under");
            Page::SeeOther(to)
        }
    }
}

/// The visit's flash, opened, and the jar that removes it (`None`: there was none).
pub(crate) fn take(visit: &Visit, secure: bool) -> (Option<Flash>, Option<CookieJar>) {
    let Some(value) = visit.cookie(FLASH_COOKIE) else {
        return (None, None);
    };
    let flash = visit
        .cookie(SESSION_COOKIE)
        .and_then(|session| open(&session, &value));
    let removed = dashboard_cookie(FLASH_COOKIE, String::new(), 0, secure);
    (flash, Some(visit.jar.clone().add(removed)))
}

/// `page` with `jar`'s cookie change, when there is one.
pub(crate) fn with_jar(jar: Option<CookieJar>, page: Page) -> Page {
    match jar {
        Some(jar) => Page::WithCookies(jar, Box::new(page)),
        None => page,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flash_opens_only_under_its_session() {
        let flash = Flash::NewKey {
            name: "bot".to_owned(),
            secret: "wops_abcd_x".to_owned(),
        };
        let sealed = seal("session-a", &flash).expect("sealed");
        assert!(!sealed.contains("wops_"), "the value is not readable");
        assert_eq!(open("session-a", &sealed), Some(flash));
        assert_eq!(open("session-b", &sealed), None);
        let mut altered = sealed.into_bytes();
        altered[20] ^= 1;
        assert_eq!(open("session-a", &String::from_utf8_lossy(&altered)), None);
    }
}
