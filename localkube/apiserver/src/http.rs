//! The HTTP layer. `serve` dispatches each request: who sends it (`identity`:
//! authentication, impersonation), a non-resource path (`non_resource`: discovery,
//! OpenAPI, health, version), else a resource request parsed and authorized (`request`),
//! answered by its verb's handler (`verbs`; `watch` for watch streams, traps 2 and 3) in
//! the output the client negotiated (`response`: objects, metadata, tables).

mod identity;
mod non_resource;
mod request;
mod response;
mod verbs;
mod watch;

use super::cluster::Cluster;
use super::error::ApiError;
use super::plugin::Plugin;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::Router;
use request::ResourceRequest;
use response::error_response;
use std::sync::Arc;
use std::time::Duration;

/// Largest accepted request body (the real server's 3 MiB).
pub const BODY_BYTES_MAX: usize = 3 * 1024 * 1024;

/// What the handlers share.
pub struct ServerState {
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// `host:port` clients reach.
    pub address: String,
    /// Interval of watch BOOKMARK events.
    pub bookmark_interval: Duration,
    /// Flips to true on shutdown; streams end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The CA client certificates are verified against.
    pub client_ca: super::tls::ClientCa,
    /// The plugins; the first that serves streams gets `pods/exec`, `attach`, `portforward`.
    pub plugins: Vec<Arc<dyn Plugin>>,
}

/// The router serving every path.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// Serves one request; an error is its Status.
async fn handle(State(st): State<Arc<ServerState>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    match serve(st, req).await {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(%method, %path, code = error.code, reason = error.reason.as_str(), message = %error.message, "request failed");
            error_response(&error)
        }
    }
}

/// The response to one request, or the error it fails with.
async fn serve(st: Arc<ServerState>, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let public = matches!(
        segs.first().copied(),
        Some("healthz") | Some("livez") | Some("readyz") | Some("version")
    );
    let user = identity::user(&st, &parts, public)?;
    if let Some(response) = non_resource::serve(&st, &parts, &segs, &user, public)? {
        return Ok(response);
    }
    let target = request::parse_target(&st.cluster, &segs).ok_or_else(ApiError::path_not_found)?;
    if let Some(subresource) = target.stream_subresource() {
        return verbs::stream(&st, &target, subresource, &user, parts).await;
    }
    let request = ResourceRequest::authorize(st, target, user, parts)?;
    dispatch(request, body).await
}

/// The handler of an authorized resource request: by method, and whether the path names
/// one object.
async fn dispatch(req: ResourceRequest, body: Body) -> Result<Response, ApiError> {
    match (req.method.clone(), req.target.name.clone()) {
        (Method::GET, Some(name)) if req.target.watch_prefix => {
            let mut fields = req.fields;
            fields.terms.push(("metadata.name".into(), name, true));
            let (st, target) = (&req.st, &req.target);
            watch::watch(st, target, req.labels, fields, &req.query, &req.headers).await
        }
        (Method::GET, Some(name)) => verbs::get(&req, &name).await,
        (Method::GET, None) if req.verb == "watch" => {
            let (st, target) = (&req.st, &req.target);
            watch::watch(st, target, req.labels, req.fields, &req.query, &req.headers).await
        }
        (Method::GET, None) => verbs::list(&req),
        (Method::POST, None) => verbs::create(&req, body).await,
        (Method::POST, Some(name)) => verbs::create_subresource(&req, &name, body).await,
        (Method::PUT, Some(name)) => verbs::update(&req, &name, body).await,
        (Method::PATCH, Some(name)) => verbs::patch(&req, &name, body).await,
        (Method::DELETE, Some(name)) => verbs::delete(&req, &name, body).await,
        (Method::DELETE, None) => verbs::delete_collection(&req, body).await,
        (method, _) => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {method}"
        ))),
    }
}
