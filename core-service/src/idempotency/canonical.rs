//! What a key stands for: the request's path and its canonical protobuf encoding.

use prost::Message;
use sha2::{Digest, Sha256};

/// A write request as its idempotency key stands for it: what the handlers read the same is
/// the same request. An empty optional field counts as absent (a gRPC client that sets every
/// field sends `from: ""` where REST leaves `from` out), and so does an empty `args` list.
pub trait Canonical: Message + Sized {
    /// The request with every field the handlers read alike written one way.
    fn canonical(&self) -> Self;

    /// The canonical encoding: the same bytes for the same fields, whatever the JSON key
    /// order or the empty optionals were.
    fn canonical_bytes(&self) -> Vec<u8> {
        self.canonical().encode_to_vec()
    }
}

/// The hash that identifies a request: its endpoint path and its canonical encoding.
pub fn request_hash(path: &str, canonical: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(canonical);
    hex::encode(h.finalize())
}

/// `v`, or nothing when it is empty.
pub fn absent_if_empty(v: &Option<String>) -> Option<String> {
    v.clone().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use walletops_proto::v1 as pb;

    #[test]
    fn hashes_bind_path_and_body() {
        let a = request_hash("/send", b"abc");
        assert_eq!(a, request_hash("/send", b"abc"));
        assert_ne!(a, request_hash("/token/approve", b"abc"));
        assert_ne!(a, request_hash("/send", b"abd"));
    }

    #[test]
    fn empty_optionals_count_as_absent() {
        let full = pb::SendRequest {
            chain: "anvil".to_owned(),
            from: Some(String::new()),
            token: Some(String::new()),
            ..Default::default()
        };
        let bare = pb::SendRequest {
            chain: "anvil".to_owned(),
            ..Default::default()
        };
        assert_eq!(full.canonical_bytes(), bare.canonical_bytes());
    }
}
