//! Which client a call comes from, for the failed-authentication throttle: the peer's
//! address, or, from a peer trusted to say so (loopback, where the in-process edge calls
//! from, and `trusted_proxies`), the address in its `x-client-address` entry. The entry is
//! rewritten before any service sees it, so that a caller cannot name another client to
//! escape the count of its own failures.

use std::net::IpAddr;

use http::{HeaderValue, Request};
use tonic::transport::server::TcpConnectInfo;
use walletops_proto::CLIENT_ADDRESS_HEADER;

/// Sets `x-client-address` on `req` to the address its failures are counted against.
pub(super) fn resolve<B>(mut req: Request<B>, trusted: &[IpAddr]) -> Request<B> {
    let peer = req
        .extensions()
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .map(|a| a.ip());
    let claimed = req
        .headers()
        .get(CLIENT_ADDRESS_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<IpAddr>().ok());
    let believed = match (peer, claimed) {
        (Some(peer), Some(claimed)) if peer.is_loopback() || trusted.contains(&peer) => {
            Some(claimed)
        }
        (peer, _) => peer,
    };
    let headers = req.headers_mut();
    headers.remove(CLIENT_ADDRESS_HEADER);
    if let Some(value) = believed.and_then(|ip| HeaderValue::from_str(&ip.to_string()).ok()) {
        headers.insert(CLIENT_ADDRESS_HEADER, value);
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(peer: &str, claimed: Option<&str>) -> Request<()> {
        let mut req = Request::new(());
        if let Some(claimed) = claimed {
            req.headers_mut().insert(
                CLIENT_ADDRESS_HEADER,
                HeaderValue::from_str(claimed).expect("value"),
            );
        }
        req.extensions_mut().insert(TcpConnectInfo {
            local_addr: None,
            remote_addr: Some(peer.parse().expect("addr")),
        });
        req
    }

    fn believed(req: &Request<()>) -> Option<&str> {
        req.headers()
            .get(CLIENT_ADDRESS_HEADER)
            .and_then(|v| v.to_str().ok())
    }

    #[test]
    fn only_trusted_peers_name_the_client() {
        let proxy: IpAddr = "10.0.0.5".parse().expect("ip");
        let from_loopback = resolve(call("127.0.0.1:9", Some("203.0.113.7")), &[]);
        assert_eq!(believed(&from_loopback), Some("203.0.113.7"));
        let from_proxy = resolve(call("10.0.0.5:9", Some("203.0.113.7")), &[proxy]);
        assert_eq!(believed(&from_proxy), Some("203.0.113.7"));
        let spoofed = resolve(call("198.51.100.2:9", Some("203.0.113.7")), &[proxy]);
        assert_eq!(believed(&spoofed), Some("198.51.100.2"));
        let garbage = resolve(call("127.0.0.1:9", Some("not an address")), &[]);
        assert_eq!(believed(&garbage), Some("127.0.0.1"));
    }
}
