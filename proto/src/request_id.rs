//! The request-id rule, applied by the edge and the core alike: a caller's well-formed
//! `x-request-id` is kept, anything else is replaced by a new UUID v7, so every request and
//! every response (errors, 404 and 405 included) carries one id that logs can be joined on.

use http::{HeaderValue, Request};
use tower_http::request_id::{MakeRequestId, RequestId};

/// Header (and gRPC metadata key) that carries the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest request id kept as given; longer ones are replaced.
const MAX_LEN: usize = 128;

/// Whether `value` may be kept as a request id: 1 to 128 characters out of ASCII letters,
/// digits and `-_.:`. Anything else (spaces, quotes, control bytes) could corrupt a log line
/// or a JSON body, so it is replaced rather than echoed.
pub fn is_well_formed(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_LEN
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Removes a malformed `x-request-id` so that the id layer makes a fresh one in its place.
pub fn drop_malformed<B>(mut req: Request<B>) -> Request<B> {
    let malformed = req
        .headers()
        .get_all(REQUEST_ID_HEADER)
        .iter()
        .enumerate()
        .any(|(i, v)| i > 0 || !is_well_formed(v));
    if malformed {
        req.headers_mut().remove(REQUEST_ID_HEADER);
    }
    req
}

/// Makes UUID v7 request ids: unique, and sortable by time in logs.
#[derive(Debug, Clone, Copy, Default)]
pub struct MakeRequestUuidV7;

impl MakeRequestId for MakeRequestUuidV7 {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&uuid::Uuid::now_v7().to_string())
            .ok()
            .map(RequestId::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_well_formed_ids() {
        assert!(is_well_formed(&HeaderValue::from_static("abc-123_x.y:z")));
        assert!(!is_well_formed(&HeaderValue::from_static("")));
        assert!(!is_well_formed(&HeaderValue::from_static("has space")));
        assert!(!is_well_formed(&HeaderValue::from_static("quote\"")));
        let long = "a".repeat(MAX_LEN + 1);
        assert!(!is_well_formed(
            &HeaderValue::from_str(&long).expect("ascii")
        ));
    }

    #[test]
    fn drops_malformed_and_duplicated_ids() {
        let req = Request::builder()
            .header(REQUEST_ID_HEADER, "bad id")
            .body(())
            .expect("request");
        assert!(
            drop_malformed(req)
                .headers()
                .get(REQUEST_ID_HEADER)
                .is_none()
        );
        let req = Request::builder()
            .header(REQUEST_ID_HEADER, "a")
            .header(REQUEST_ID_HEADER, "b")
            .body(())
            .expect("request");
        assert!(
            drop_malformed(req)
                .headers()
                .get(REQUEST_ID_HEADER)
                .is_none()
        );
        let req = Request::builder()
            .header(REQUEST_ID_HEADER, "good-1")
            .body(())
            .expect("request");
        assert_eq!(
            drop_malformed(req).headers().get(REQUEST_ID_HEADER),
            Some(&HeaderValue::from_static("good-1"))
        );
    }
}
