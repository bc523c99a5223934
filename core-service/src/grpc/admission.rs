//! The admission layer: every call is let in here, once, by the gate its path has in the one
//! table (`auth::Gate`), before a handler runs or its message is decoded. A handler reads
//! what the call was admitted as from the request (`caller`, `session`); it never admits.
//! A method without a gate reaches its handler with nothing admitted, and a handler that
//! asks for a caller then refuses it: a new method is closed until the table names it.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tonic::{Status, body::Body, metadata::MetadataMap};
use tower::{Layer, Service};

use super::Surface;
use crate::{
    Core,
    app::Admitted,
    auth::{Caller, Gate},
};
use walletops_domain::DashboardSession;

/// Admits the calls of one listener's surface.
#[derive(Debug, Clone)]
pub(super) struct AdmissionLayer {
    core: Core,
    surface: Surface,
}

impl AdmissionLayer {
    /// The layer admitting `surface`'s calls to `core`.
    pub(super) fn new(core: Core, surface: Surface) -> Self {
        Self { core, surface }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            core: self.core.clone(),
            surface: self.surface,
        }
    }
}

/// The service of `AdmissionLayer`.
#[derive(Debug, Clone)]
pub(super) struct Admission<S> {
    inner: S,
    core: Core,
    surface: Surface,
}

impl<S, B> Service<http::Request<B>> for Admission<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The clone that was made ready is the one that serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let core = self.core.clone();
        // A gate of the other listener's surface is not this one's to open: the call goes on
        // to the routes, which do not serve it.
        let gate = Gate::of(req.uri().path())
            .filter(|gate| (*gate == Gate::Admin) == (self.surface == Surface::Admin));
        Box::pin(async move {
            if let Some(gate) = gate {
                let metadata = MetadataMap::from_headers(req.headers().clone());
                match core.admit_call(&metadata, gate).await {
                    Ok(admitted) => {
                        req.extensions_mut().insert(admitted);
                    }
                    Err(refused) => return Ok(Status::from(refused).into_http()),
                }
            }
            inner.call(req).await
        })
    }
}

/// What `request` was admitted as.
fn admitted<T>(request: &tonic::Request<T>) -> Option<&Admitted> {
    request.extensions().get::<Admitted>()
}

/// The caller `request` was admitted as: a key or a session holding the scope its method
/// needs, already drawn from its budget.
pub(super) fn caller<T>(request: &tonic::Request<T>) -> Result<Caller, Status> {
    match admitted(request) {
        Some(Admitted::Caller(caller)) => Ok(caller.clone()),
        _ => Err(not_admitted()),
    }
}

/// The dashboard session `request` was admitted with, and its token.
pub(super) fn session<T>(
    request: &tonic::Request<T>,
) -> Result<(DashboardSession, String), Status> {
    match admitted(request) {
        Some(Admitted::Session { session, token }) => Ok((session.clone(), token.clone())),
        _ => Err(not_admitted()),
    }
}

/// Whether `request` was admitted by the admin token.
pub(super) fn admin<T>(request: &tonic::Request<T>) -> Result<(), Status> {
    match admitted(request) {
        Some(Admitted::Admin) => Ok(()),
        _ => Err(not_admitted()),
    }
}

/// A handler reached with nothing admitted: its method has no gate in the table.
fn not_admitted() -> Status {
    tracing::error!("a call reached its handler without being admitted: give its method a gate");
    Status::internal("internal error")
}
