//! The way the edge reaches a core: one boxed service type for a gRPC channel to a core
//! elsewhere and for the core's services in the same process (no connection between them).
//! It lives here, beside the contract both sides share, so that neither side depends on the
//! other for it.

/// How the edge reaches its core: a gRPC channel to a core elsewhere, or
/// the services of the core in this process, called without a connection between them.
pub type CoreChannel = tower::util::BoxCloneSyncService<
    http::Request<tonic::body::Body>,
    http::Response<tonic::body::Body>,
    CallFailed,
>;

/// Why a call to the core got no answer (the channel's error, a timeout). A type of its own
/// rather than a boxed error: the gRPC clients' bound on their channel's error does not hold
/// for a trait object inside an axum handler's future.
#[derive(Debug)]
pub struct CallFailed(pub tower::BoxError);

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for CallFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}
