//! The plain HTTP listener on :8082: `/metrics`, `/healthz`, `/readyz`. It never serves
//! `/deploy/v1` (docs/design/requirements.md R003.2: the deploy API is TLS-only on :8443); such
//! paths are 404 here.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::metrics::Metrics;

/// State of the :8082 listener.
#[derive(Clone)]
pub struct Probes {
    /// Metrics to encode.
    pub metrics: Metrics,
    /// Set once the operator finished starting (client built, tasks spawned).
    pub ready: Arc<AtomicBool>,
}

/// The :8082 router.
pub fn router(probes: Probes) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(probes)
}

async fn metrics(State(probes): State<Probes>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        probes.metrics.encode(),
    )
}

async fn readyz(State(probes): State<Probes>) -> impl IntoResponse {
    if probes.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting")
    }
}

/// Serves `router` on plain HTTP at `address` until `shutdown` flips.
pub async fn serve(
    address: SocketAddr,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| Error::Serve {
            address: address.to_string(),
            source,
        })?;
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = shutdown.changed().await;
        })
        .await
        .map_err(|source| Error::Serve {
            address: address.to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get(router: &Router, path: &str) -> (StatusCode, String) {
        let response = router
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// docs/design/requirements.md R003.2: the plain HTTP port 8082 never serves /deploy/v1.
    #[tokio::test]
    async fn seed_003_port_8082_never_serves_deploy_v1() {
        let probes = Probes {
            metrics: Metrics::new(),
            ready: Arc::new(AtomicBool::new(false)),
        };
        let router = router(probes.clone());
        for path in [
            "/deploy/v1/groups/playground",
            "/deploy/v1/groups/playground/leases",
        ] {
            assert_eq!(get(&router, path).await.0, StatusCode::NOT_FOUND, "{path}");
        }
        assert_eq!(
            get(&router, "/healthz").await,
            (StatusCode::OK, "ok".into())
        );
        assert_eq!(
            get(&router, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        probes.ready.store(true, Ordering::SeqCst);
        assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
        let (status, text) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(text.contains("bloodraven_poll_duration_seconds"), "{text}");
    }
}
