//! Which URLs may receive webhooks. A delivery is a request the service makes on a user's
//! behalf from inside its network: a URL that resolves to loopback, a private network,
//! link-local addresses (cloud metadata services live there) or any other address not on
//! the public internet is refused, unless the operator allows private targets
//! (`webhooks.allow_private_targets`, for deployments whose receivers are internal, and
//! tests). Addresses that carry an IPv4 address inside an IPv6 one (NAT64, 6to4, Teredo,
//! IPv4-compatible) are refused whole: the gateway that unwraps them may reach anything.
//!
//! A refusal names the host the user gave, never the addresses it resolved to: those would
//! tell a caller what lies inside the operator's network.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};
use url::Url;

/// Why a URL may not receive webhooks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not an absolute `http` or `https` URL with a host.
    #[error("must be an http or https URL with a host")]
    NotHttp,
    /// Its host does not resolve.
    #[error("its host {0} does not resolve")]
    Unresolved(String),
    /// It resolves to (or is) an address off the public internet.
    #[error(
        "its host {0} is or resolves to an address that is not public (set webhooks.allow_private_targets to allow it)"
    )]
    Private(String),
}

/// IPv4 ranges that are not the public internet (RFC 6890 and its updates).
const V4_REFUSED: [Ipv4Net; 15] = [
    Ipv4Net::new_assert(Ipv4Addr::new(0, 0, 0, 0), 8), // "this network"
    Ipv4Net::new_assert(Ipv4Addr::new(10, 0, 0, 0), 8), // private
    Ipv4Net::new_assert(Ipv4Addr::new(100, 64, 0, 0), 10), // carrier-grade NAT
    Ipv4Net::new_assert(Ipv4Addr::new(127, 0, 0, 0), 8), // loopback
    Ipv4Net::new_assert(Ipv4Addr::new(169, 254, 0, 0), 16), // link-local, cloud metadata
    Ipv4Net::new_assert(Ipv4Addr::new(172, 16, 0, 0), 12), // private
    Ipv4Net::new_assert(Ipv4Addr::new(192, 0, 0, 0), 24), // IETF protocol assignments
    Ipv4Net::new_assert(Ipv4Addr::new(192, 0, 2, 0), 24), // documentation
    Ipv4Net::new_assert(Ipv4Addr::new(192, 88, 99, 0), 24), // 6to4 relay anycast
    Ipv4Net::new_assert(Ipv4Addr::new(192, 168, 0, 0), 16), // private
    Ipv4Net::new_assert(Ipv4Addr::new(198, 18, 0, 0), 15), // benchmarking
    Ipv4Net::new_assert(Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 0), 24), // documentation
    Ipv4Net::new_assert(Ipv4Addr::new(224, 0, 0, 0), 4), // multicast
    Ipv4Net::new_assert(Ipv4Addr::new(240, 0, 0, 0), 4), // reserved, broadcast
];

const fn v6(a: u16, b: u16, len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(Ipv6Addr::new(a, b, 0, 0, 0, 0, 0, 0), len)
}

/// IPv6 ranges inside global unicast (2000::/3) that are not the public internet; every
/// address outside 2000::/3 (loopback, ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48,
/// discard 100::/64, fc00::/7, fe80::/10, multicast ff00::/8) is refused before these.
const V6_REFUSED: [Ipv6Net; 4] = [
    v6(0x2001, 0, 23),      // IETF protocol assignments: Teredo, benchmarking, ORCHID
    v6(0x2001, 0x0db8, 32), // documentation
    v6(0x2002, 0, 16),      // 6to4: an IPv4 address inside
    v6(0x3fff, 0, 20),      // documentation
];

/// Global unicast: the only IPv6 space routed on the public internet.
const V6_GLOBAL: Ipv6Net = v6(0x2000, 0, 3);

/// Whether `ip` is an address on the public internet.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !V4_REFUSED.iter().any(|net| net.contains(&v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            // ::ffff:a.b.c.d is a.b.c.d on the wire.
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => V6_GLOBAL.contains(&v6) && !V6_REFUSED.iter().any(|net| net.contains(&v6)),
        },
    }
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
            .map_err(|_| Refused::Unresolved(host.clone()))?
            .map(|a| a.ip())
            .collect(),
    };
    if addresses.is_empty() {
        return Err(Refused::Unresolved(host));
    }
    if addresses.into_iter().all(is_public) {
        Ok(url)
    } else {
        Err(Refused::Private(host))
    }
}

/// Whether a delivery may go to `url` as written: an address in the URL itself (which no
/// resolver sees) must be public. Names are checked by `PublicOnly` as they are resolved.
pub fn literal_allowed(url: &Url) -> Result<(), Refused> {
    match url.host() {
        Some(url::Host::Ipv4(v4)) if !is_public(IpAddr::V4(v4)) => {
            Err(Refused::Private(v4.to_string()))
        }
        Some(url::Host::Ipv6(v6)) if !is_public(IpAddr::V6(v6)) => {
            Err(Refused::Private(format!("[{v6}]")))
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
            if !addresses.iter().all(|a| is_public(a.ip())) {
                return Err(
                    Box::new(Refused::Private(host)) as Box<dyn std::error::Error + Send + Sync>
                );
            }
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
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

    /// Every reserved range, and every way of wrapping an IPv4 address in an IPv6 one, is
    /// refused; a range's neighbours on the public internet are not.
    #[test]
    fn reserved_and_wrapped_addresses_are_not_public() {
        for ip in [
            "0.1.2.3",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",     // IPv4-compatible
            "::8.8.8.8",       // IPv4-compatible, even of a public address
            "::ffff:10.0.0.1", // IPv4-mapped, private
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
            "64:ff9b::808:808",   // NAT64, even of a public address
            "64:ff9b:1::1",
            "100::1",
            "2001::1", // Teredo
            "2001:2::1",
            "2001:db8::1",
            "2002:a9fe:a9fe::1", // 6to4 of 169.254.169.254
            "3fff::1",
            "fc00::1",
            "fdff::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
        ] {
            let parsed: IpAddr = ip.parse().expect("an address");
            assert!(!is_public(parsed), "{ip} counted public");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "::ffff:8.8.8.8",
            "2001:4860:4860::8888",
            "2606:4700:4700::1111",
        ] {
            let parsed: IpAddr = ip.parse().expect("an address");
            assert!(is_public(parsed), "{ip} refused");
        }
    }

    /// A refusal names the host as given and never what it resolved to: `localhost`'s
    /// refusal does not say 127.0.0.1 or ::1.
    #[tokio::test]
    async fn refusals_do_not_tell_the_resolved_addresses() {
        let refused = check("http://localhost:8080/hook", false)
            .await
            .expect_err("refused")
            .to_string();
        assert!(refused.contains("localhost"), "{refused}");
        assert!(
            !refused.contains("127.") && !refused.contains("::1"),
            "{refused}"
        );
        use reqwest::dns::Resolve as _;
        let name: reqwest::dns::Name = "localhost".parse().expect("name");
        let Err(at_delivery) = PublicOnly.resolve(name).await else {
            panic!("localhost resolved for a delivery");
        };
        let at_delivery = at_delivery.to_string();
        assert!(
            !at_delivery.contains("127.") && !at_delivery.contains("::1"),
            "{at_delivery}"
        );
    }

    #[test]
    fn literal_private_addresses_are_refused_at_delivery() {
        for url in [
            "http://127.0.0.1:9/h",
            "http://[::1]/h",
            "http://10.0.0.1/h",
            "http://[64:ff9b::a00:1]/h",
            "http://[2002:a00:1::1]/h",
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
