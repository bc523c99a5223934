//! Counts and times every gRPC call by method and contract code (see `metrics`). The code
//! is read off the answer: `OK` without a `grpc-status` in its headers (a success's status
//! comes in its trailers), else the reason of the error's `ErrorInfo`, or the gRPC code's
//! name for an error made outside the service (a timeout, an unknown method).

use std::{
    task::{Context, Poll},
    time::Instant,
};

use futures::future::BoxFuture;
use http::{Request, Response};
use tonic_types::StatusExt as _;
use tower::{Layer, Service};

/// The layer of `Metered`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct MeteredLayer;

impl<S> Layer<S> for MeteredLayer {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Metered { inner }
    }
}

/// A service whose calls are counted and timed.
#[derive(Debug, Clone)]
pub(super) struct Metered<S> {
    inner: S,
}

impl<S, B, R> Service<Request<B>> for Metered<S>
where
    S: Service<Request<B>, Response = Response<R>> + Send,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let rpc = req.uri().path().to_owned();
        let started = Instant::now();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await;
            if let Ok(response) = &answer {
                let code = code_of(response);
                // A path no service serves is the caller's to choose: one label for them
                // all, so a caller cannot make the series without end.
                let rpc = if code == "UNIMPLEMENTED" {
                    "unknown".to_owned()
                } else {
                    rpc
                };
                crate::metrics::request(rpc, code, started.elapsed());
            }
            answer
        })
    }
}

/// The contract code of `response` (see the module docs).
fn code_of<R>(response: &Response<R>) -> &'static str {
    let headers = response.headers();
    if headers.get("grpc-status").is_none_or(|s| s == "0") {
        return "OK";
    }
    let Some(status) = tonic::Status::from_header_map(headers) else {
        return "UNKNOWN";
    };
    status
        .get_error_details()
        .error_info()
        .and_then(|info| info.reason.parse::<walletops_proto::ErrorCode>().ok())
        .map_or_else(|| grpc_code_name(status.code()), |code| code.as_str())
}

fn grpc_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Unavailable => "UNAVAILABLE",
        C::Unauthenticated => "UNAUTHENTICATED",
        _ => "UNKNOWN",
    }
}
