//! Which client a request comes from, for the core's failed-authentication counts: the
//! connection's peer, or, when the peer is one of `trusted_proxies` (a load balancer in
//! front of the edge), the address that proxy names in the one header it writes
//! (`forwarded_header`: `X-Forwarded-For`, or `Forwarded` of RFC 7239); the other header is
//! never read, since a proxy passes on what a client wrote there. The list is read from the
//! right, one hop per trusted proxy: entries further left were written by the client and
//! are never believed.

use std::net::{IpAddr, SocketAddr};

use axum::{
    extract::{Request, State},
    http::{HeaderMap, HeaderName, HeaderValue, header::FORWARDED},
    middleware::Next,
    response::Response,
};
use forwarded_header_value::ForwardedStanza;
use walletops_proto::CLIENT_ADDRESS_HEADER;

use crate::PeerAddr;

/// The de-facto header most proxies write.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// The most hops read, so that a long header costs bounded work.
const MAX_HOPS: usize = 16;

/// Reads the address out of one entry of a forwarding header.
type HopReader = fn(&str) -> Option<IpAddr>;

/// The header the trusted proxies write the client's address in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (nginx's `$proxy_add_x_forwarded_for`, most load balancers).
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239).
    Forwarded,
}

/// The proxies whose forwarding header is believed, and which header that is.
#[derive(Debug, Clone, Default)]
pub(crate) struct TrustedProxies {
    pub(crate) proxies: std::sync::Arc<[IpAddr]>,
    pub(crate) header: ForwardedHeader,
}

/// Says which client a request came from (`x-client-address`, copied to the core's
/// metadata), replacing whatever the request itself put there.
pub(crate) async fn stamp_client(
    State(trusted): State<TrustedProxies>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = req.extensions().get::<PeerAddr>().map(|p| p.0.ip());
    let client = peer.map(|peer| client_of(peer, req.headers(), &trusted));
    let headers = req.headers_mut();
    headers.remove(CLIENT_ADDRESS_HEADER);
    if let Some(value) = client.and_then(|ip| HeaderValue::from_str(&ip.to_string()).ok()) {
        headers.insert(CLIENT_ADDRESS_HEADER, value);
    }
    next.run(req).await
}

/// The client behind `peer`: while the address reached so far is a trusted proxy, the hop
/// it names (the rightmost entry not yet read) in the proxies' header. An entry that names
/// no address (`unknown`, an obfuscated name, garbage) ends the walk at the proxy that
/// wrote it.
fn client_of(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    if !trusted.proxies.contains(&peer) {
        return peer;
    }
    let (forwarded, hop): (Vec<&str>, HopReader) = match trusted.header {
        ForwardedHeader::Forwarded => (entries(headers, &FORWARDED), forwarded_for),
        ForwardedHeader::XForwardedFor => (entries(headers, &X_FORWARDED_FOR), x_forwarded_for),
    };
    let mut client = peer;
    for entry in forwarded.iter().rev().take(MAX_HOPS) {
        if !trusted.proxies.contains(&client) {
            break;
        }
        match hop(entry) {
            Some(ip) => client = ip,
            None => break,
        }
    }
    client
}

/// The comma-separated entries of every `name` header, in order.
fn entries<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Vec<&'h str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

/// The `for=` address of one `Forwarded` element.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    element.parse::<ForwardedStanza>().ok()?.forwarded_for_ip()
}

/// The address of one `X-Forwarded-For` entry, with or without a port.
fn x_forwarded_for(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROXY: &str = "10.0.0.5";
    const INNER: &str = "10.0.0.6";

    fn client(peer: &str, headers: &[(&str, &str)]) -> String {
        client_via(ForwardedHeader::XForwardedFor, peer, headers)
    }

    fn client_via(header: ForwardedHeader, peer: &str, headers: &[(&str, &str)]) -> String {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        let trusted = TrustedProxies {
            proxies: [PROXY.parse().expect("ip"), INNER.parse().expect("ip")].into(),
            header,
        };
        client_of(peer.parse().expect("ip"), &map, &trusted).to_string()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        assert_eq!(
            client("203.0.113.9", &[("x-forwarded-for", "198.51.100.1")]),
            "203.0.113.9"
        );
        assert_eq!(
            client("203.0.113.9", &[("forwarded", "for=198.51.100.1")]),
            "203.0.113.9"
        );
    }

    #[test]
    fn a_trusted_proxy_names_the_client_read_from_the_right() {
        // The client wrote the first entry; the proxy appended what it saw.
        assert_eq!(
            client(PROXY, &[("x-forwarded-for", "1.2.3.4, 198.51.100.1")]),
            "198.51.100.1"
        );
        // Two trusted hops: the inner proxy's entry is skipped.
        assert_eq!(
            client(
                PROXY,
                &[
                    ("x-forwarded-for", "1.2.3.4, 198.51.100.1"),
                    ("x-forwarded-for", INNER)
                ]
            ),
            "198.51.100.1"
        );
        assert_eq!(
            client(PROXY, &[("x-forwarded-for", "198.51.100.1:4711")]),
            "198.51.100.1"
        );
    }

    #[test]
    fn only_the_proxies_header_is_read() {
        let forwarded = r#"for=1.2.3.4, for="[2001:db8:cafe::17]:4711";proto=https"#;
        let both = [
            ("forwarded", forwarded),
            ("x-forwarded-for", "198.51.100.1"),
        ];
        // A proxy that writes X-Forwarded-For passes on a Forwarded the client wrote.
        assert_eq!(client(PROXY, &both), "198.51.100.1");
        assert_eq!(
            client_via(ForwardedHeader::Forwarded, PROXY, &both),
            "2001:db8:cafe::17"
        );
    }

    #[test]
    fn an_entry_naming_no_address_ends_at_the_proxy() {
        assert_eq!(
            client_via(
                ForwardedHeader::Forwarded,
                PROXY,
                &[("forwarded", "for=1.2.3.4, for=unknown")]
            ),
            PROXY
        );
        assert_eq!(client(PROXY, &[("x-forwarded-for", "nonsense")]), PROXY);
        assert_eq!(client(PROXY, &[]), PROXY);
        // Garbage to the left is never reached.
        assert_eq!(
            client(PROXY, &[("x-forwarded-for", "nonsense, 198.51.100.1")]),
            "198.51.100.1"
        );
    }
}
