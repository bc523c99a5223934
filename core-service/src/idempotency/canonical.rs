//! What a key stands for: the request's path and its canonical protobuf encoding.

use prost::Message;
use sha2::{Digest, Sha256};
use walletops_proto::v1 as pb;

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
fn absent_if_empty(v: &Option<String>) -> Option<String> {
    v.clone().filter(|s| !s.is_empty())
}

impl Canonical for pb::SendRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            token: absent_if_empty(&self.token),
            ..self.clone()
        }
    }
}

impl Canonical for pb::ApproveTokenRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            ..self.clone()
        }
    }
}

impl Canonical for pb::CallContractRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            value: absent_if_empty(&self.value),
            data: absent_if_empty(&self.data),
            function: absent_if_empty(&self.function),
            args: self.args.clone().filter(|l| !l.values.is_empty()),
            ..self.clone()
        }
    }
}

impl Canonical for pb::SwapRequest {
    fn canonical(&self) -> Self {
        Self {
            from: absent_if_empty(&self.from),
            protocols: absent_if_empty(&self.protocols),
            exclude_protocols: absent_if_empty(&self.exclude_protocols),
            quote_id: absent_if_empty(&self.quote_id),
            min_dst_amount: absent_if_empty(&self.min_dst_amount),
            // Absent and false build the same swap.
            include_gas: self.include_gas.filter(|on| *on),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
