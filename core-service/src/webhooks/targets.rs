//! Which URLs may receive webhooks. A delivery is a request the service makes on a user's
//! behalf from inside its network: a URL that resolves to loopback, a private network,
//! link-local addresses (cloud metadata services live there) or any other address not on
//! the public internet is refused, unless the operator allows private targets
//! (`webhooks.allow_private_targets`, for deployments whose receivers are internal, and
//! tests).

use std::net::IpAddr;

use url::Url;

/// Why a URL may not receive webhooks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not an absolute `http` or `https` URL with a host.
    #[error("must be an http or https URL with a host")]
    NotHttp,
    /// Its host does not resolve.
    #[error("its host does not resolve: {0}")]
    Unresolved(String),
    /// It resolves to an address off the public internet.
    #[error(
        "it resolves to {0}, which is not a public address (set webhooks.allow_private_targets to allow it)"
    )]
    Private(IpAddr),
}

/// Checks `raw` and, unless `allow_private`, every address its host resolves to; the URL.
pub async fn check(raw: &str, allow_private: bool) -> Result<Url, Refused> {
    let url = Url::parse(raw.trim()).map_err(|_| Refused::NotHttp)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refused::NotHttp);
    }
    let host = url.host_str().ok_or(Refused::NotHttp)?.to_owned();
    if allow_private {
        return Ok(url);
    }
    let port = url.port_or_known_default().unwrap_or(443);
    // An IPv6 literal comes bracketed in the URL.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<IpAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| Refused::Unresolved(e.to_string()))?
            .map(|a| a.ip())
            .collect(),
    };
    if addresses.is_empty() {
        return Err(Refused::Unresolved("no address".to_owned()));
    }
    match addresses.into_iter().find(|ip| !is_public(*ip)) {
        Some(ip) => Err(Refused::Private(ip)),
        None => Ok(url),
    }
}

/// Whether a delivery may go to `url` as written: an address in the URL itself (which no
/// resolver sees) must be public. Names are checked by `PublicOnly` as they are resolved.
pub fn literal_allowed(url: &Url) -> Result<(), Refused> {
    match url.host() {
        Some(url::Host::Ipv4(v4)) if !is_public(IpAddr::V4(v4)) => {
            Err(Refused::Private(IpAddr::V4(v4)))
        }
        Some(url::Host::Ipv6(v6)) if !is_public(IpAddr::V6(v6)) => {
            Err(Refused::Private(IpAddr::V6(v6)))
        }
        Some(_) => Ok(()),
        None => Err(Refused::NotHttp),
    }
}

/// The resolver of the delivery client: it resolves as the system does and refuses a name
/// with any address off the public internet, at connection time, so a name that resolved to
/// a public address at registration cannot be pointed inside the network later (DNS
/// rebinding).
#[derive(Debug, Clone, Copy)]
pub struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addresses: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(private) = addresses.iter().find(|a| !is_public(a.ip())) {
                return Err(Box::new(Refused::Private(private.ip()))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether `ip` is an address on the public internet.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                // Carrier-grade NAT, 100.64.0.0/10.
                || (a == 100 && (64..128).contains(&b))
                // "This network" and the reserved 240.0.0.0/4.
                || a == 0
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Unique local fc00::/7 and link-local fe80::/10.
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn private_and_local_targets_are_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1:9000/hook",
            "http://localhost/hook",
            "https://10.1.2.3/hook",
            "https://192.168.0.10/hook",
            "http://169.254.169.254/latest/meta-data",
            "http://100.64.0.1/hook",
            "http://[::1]/hook",
            "http://[fd00::1]/hook",
            "http://[::ffff:127.0.0.1]/hook",
        ] {
            assert!(
                matches!(check(url, false).await, Err(Refused::Private(_))),
                "{url} accepted"
            );
            assert!(check(url, true).await.is_ok(), "{url} refused when allowed");
        }
    }

    #[test]
    fn literal_private_addresses_are_refused_at_delivery() {
        for url in [
            "http://127.0.0.1:9/h",
            "http://[::1]/h",
            "http://10.0.0.1/h",
        ] {
            let url = Url::parse(url).expect("url");
            assert!(
                matches!(literal_allowed(&url), Err(Refused::Private(_))),
                "{url}"
            );
        }
        for url in ["https://8.8.8.8/h", "https://example.com/h"] {
            assert_eq!(literal_allowed(&Url::parse(url).expect("url")), Ok(()));
        }
    }

    #[tokio::test]
    async fn names_resolving_to_private_addresses_are_refused_when_connecting() {
        use reqwest::dns::Resolve as _;
        let name: reqwest::dns::Name = "localhost".parse().expect("name");
        assert!(PublicOnly.resolve(name).await.is_err());
    }

    #[tokio::test]
    async fn public_addresses_pass_and_other_schemes_do_not() {
        assert!(check("https://8.8.8.8/hook", false).await.is_ok());
        assert!(
            check("https://[2001:4860:4860::8888]/hook", false)
                .await
                .is_ok()
        );
        for url in ["ftp://8.8.8.8/x", "not a url", "mailto:a@b.c", "https://"] {
            assert_eq!(check(url, true).await, Err(Refused::NotHttp), "{url}");
        }
    }
}
