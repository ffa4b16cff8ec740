//! The sidecar's HTTP API (see [`bloodraven_api::sidecar`] for the table of endpoints).

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::Body,
    extract::{ConnectInfo, Request, State},
    http::{header, StatusCode},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post, put},
    Json, Router,
};
use bloodraven_api::auth::{
    required_principal, AuthError, PresentedHeaders, SignedRequest, Verifier, HEADER_NONCE,
    HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use bloodraven_api::sidecar::{
    Authority, AuthorityResponse, EnsureDatabaseRequest, EnsureDatabaseResponse, ErrorBody,
    FenceRequest, FenceResponse, LeaseRequest, LeaseResponse, PromoteDrain, PromoteRequest,
    PromoteResponse, RepointRequest, RepointResponse, SidecarStatus, PATH_AUTHORITY,
    PATH_DATABASES, PATH_FENCE, PATH_HEALTHZ, PATH_LEASE, PATH_METRICS, PATH_PROMOTE, PATH_REPOINT,
    PATH_STATUS,
};
use bloodraven_mysql::{GtidSet, ReplicationSource, WaitOutcome};

use crate::{
    clock::wall_now,
    error::Error,
    observation::{from_snapshot, report, unreachable},
    state::{without_unfence_in_flight, Shared},
};

/// The longest drain a promote request may ask for.
const PROMOTE_TIMEOUT_MAX: Duration = Duration::from_secs(600);

/// The longest request body read before its signature is checked.
const BODY_BYTES_MAX: usize = 64 * 1024;

/// What the authentication layer needs: the shared state (group, site, metrics) and the
/// verifier, `None` only under `--insecure-allow-unauthenticated`.
pub(crate) struct Gate {
    shared: Arc<Shared>,
    verifier: Option<Mutex<Verifier>>,
}

impl Gate {
    pub(crate) fn new(shared: Arc<Shared>, verifier: Option<Verifier>) -> Arc<Self> {
        Arc::new(Self {
            shared,
            verifier: verifier.map(Mutex::new),
        })
    }
}

/// Builds the router. Every route passes [`authenticate`] first.
pub(crate) fn router(shared: Arc<Shared>, gate: Arc<Gate>) -> Router {
    Router::new()
        .route(PATH_STATUS, get(status))
        .route(PATH_AUTHORITY, put(push_authority))
        .route(PATH_LEASE, post(lease))
        .route(PATH_FENCE, post(fence))
        .route(PATH_PROMOTE, post(promote))
        .route(PATH_REPOINT, post(repoint))
        .route(PATH_DATABASES, post(ensure_database))
        .route(
            bloodraven_api::sidecar::PATH_BACKUP,
            post(crate::backup::backup),
        )
        .route(
            bloodraven_api::sidecar::PATH_RESTORE,
            post(crate::backup::restore),
        )
        .route(
            bloodraven_api::sidecar::PATH_RESEED,
            post(crate::backup::reseed),
        )
        .route(
            bloodraven_api::sidecar::PATH_ARCHIVE,
            post(crate::backup::archive),
        )
        .route(PATH_HEALTHZ, get(healthz))
        .route(PATH_METRICS, get(metrics))
        .route_layer(middleware::from_fn_with_state(gate, authenticate))
        .with_state(shared)
}

/// docs/design/history.md#issue-10-case-8: a request [`required_principal`] names a signer for
/// is served only if its signature verifies ([`Verifier::verify`]); otherwise it is answered
/// 401 (503 when the replay memory is full) with an [`ErrorBody`] naming what was wrong, before
/// any handler runs, so nothing changes. Reads pass untouched.
async fn authenticate(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let (Some(principal), Some(verifier)) = (required_principal(&method, &path), &gate.verifier)
    else {
        return next.run(request).await;
    };
    let remote = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.to_string())
        .unwrap_or_default();
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, BODY_BYTES_MAX).await {
        Ok(body) => body,
        Err(error) => {
            return ApiError(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "read the body of {method} {path} (at most {BODY_BYTES_MAX} bytes): {error}"
                ),
            )
            .into_response()
        }
    };
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .map(|value| value.to_str().unwrap_or("<not visible ascii>"))
    };
    let presented = PresentedHeaders {
        timestamp: header(HEADER_TIMESTAMP),
        nonce: header(HEADER_NONCE),
        signature: header(HEADER_SIGNATURE),
    };
    let signed = SignedRequest {
        group: gate.shared.group(),
        site: gate.shared.site(),
        method: &method,
        path: &path,
        body: &body,
    };
    let verdict = verifier
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .verify(principal, &signed, &presented, wall_now());
    match verdict {
        Ok(()) => next.run(Request::from_parts(parts, Body::from(body))).await,
        Err(error) => {
            gate.shared.metrics.unauthenticated(error.reason());
            tracing::warn!(
                site = gate.shared.site(),
                group = gate.shared.group(),
                method = %method,
                path = %path,
                remote = %remote,
                principal = ?principal,
                reason = error.reason(),
                %error,
                "request refused: not authenticated"
            );
            let status = if matches!(error, AuthError::ReplayCacheFull { .. }) {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::UNAUTHORIZED
            };
            ApiError(status, format!("authenticate {method} {path}: {error}")).into_response()
        }
    }
}

/// An error answered with a status and an [`ErrorBody`].
struct ApiError(StatusCode, String);

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        let status = match &error {
            Error::WrongGroup { .. } | Error::NotWritable { .. } => StatusCode::CONFLICT,
            Error::Statement(_)
            | Error::InvalidDatabase { .. }
            | Error::DatabaseNameRefused { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError(status, error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorBody { error: self.1 })).into_response()
    }
}

fn check_group(shared: &Shared, group: &str) -> Result<(), ApiError> {
    if group == shared.group() {
        Ok(())
    } else {
        Err(Error::WrongGroup {
            requested: group.to_owned(),
            served: shared.group().to_owned(),
        }
        .into())
    }
}

/// `GET /healthz`: 200 `ok`, or 503 naming the stall when the enforcer has not finished a pass
/// for [`Shared::enforcer_stall`] (the liveness probe then restarts the sidecar).
async fn healthz(State(shared): State<Arc<Shared>>) -> Response {
    let since = shared.since_enforced();
    let stall = shared.enforcer_stall();
    if since > stall {
        tracing::warn!(
            site = shared.site(),
            since_ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX),
            stall_ms = u64::try_from(stall.as_millis()).unwrap_or(u64::MAX),
            "healthz: the enforcer is stalled"
        );
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "enforcer stalled: no enforcement pass for {}ms (limit {}ms)",
                since.as_millis(),
                stall.as_millis()
            ),
        )
            .into_response();
    }
    "ok".into_response()
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    match shared.metrics.encode() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `GET /v1/status`: a fresh observation of mysqld plus the lease state. A read-only seen
/// while an unfence was in flight is reported unknown (`crate::state::without_unfence_in_flight`).
async fn status(State(shared): State<Arc<Shared>>) -> Json<SidecarStatus> {
    let epoch_before = shared.unfence_epoch();
    let observed = match shared.mysql.observe().await {
        Ok(snapshot) => from_snapshot(&snapshot),
        Err(error) => {
            shared.metrics.mysql_error();
            unreachable(&error)
        }
    };
    shared.set_observation(&observed);
    let now = shared.clock.now();
    let lease = shared.lease();
    let observed = without_unfence_in_flight(observed, epoch_before, shared.unfence_epoch());
    Json(SidecarStatus {
        group: shared.group().to_owned(),
        site: shared.site().to_owned(),
        observed_at: wall_now(),
        mysql: observed,
        fenced: lease.desired(now).read_only(),
        fence: lease.fence_state().cloned(),
        lease: lease.lease_state(now),
        authority: lease.authority().cloned(),
        known_generation: lease.known_generation(),
        latest_authority: lease.latest_authority().cloned(),
        last_granted_ago_ms: lease.last_granted_ago_ms(now),
        backups: shared.backups(),
        job: shared.job(),
        runtime: Some(shared.runtime(now)),
    })
}

/// `PUT /v1/authority`: the monotonic rule decides; enforcement runs at once.
async fn push_authority(
    State(shared): State<Arc<Shared>>,
    Json(pushed): Json<Authority>,
) -> Json<AuthorityResponse> {
    // Not serialised with enforcement on purpose: a push never waits for a slow mysqld. An
    // unfence decided just before a "moving" notice is covered by the lease it was decided
    // under (the operator waits for that lease to run out); enforcement is woken at once.
    let response = {
        let now = shared.clock.now();
        let mut lease = shared.lease();
        let decision = lease.push_authority(pushed.clone());
        let cached = lease.authority().cloned();
        if decision == bloodraven_api::sidecar::AuthorityDecision::Accepted {
            tracing::info!(
                site = shared.site(),
                group = shared.group(),
                generation = pushed.topology_generation,
                active_site = pushed.active_site.as_deref().unwrap_or("<moving>"),
                "authority accepted"
            );
        } else if !decision.is_in_force() {
            tracing::warn!(
                site = shared.site(),
                generation = pushed.topology_generation,
                cached_generation = cached.as_ref().map(|a| a.topology_generation),
                decision = ?decision,
                "authority refused"
            );
        }
        AuthorityResponse {
            decision,
            cached,
            last_granted_ago_ms: lease.last_granted_ago_ms(now),
        }
    };
    shared.wake_enforcer.notify_one();
    shared.wake_lease.notify_one();
    Json(response)
}

/// `POST /v1/lease`: a peer asks for the write lease.
async fn lease(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<LeaseRequest>,
) -> Json<LeaseResponse> {
    let now = shared.clock.now();
    let response = shared.lease().answer_lease(&request, now);
    shared.metrics.answered(&request.site, response.granted);
    tracing::debug!(
        site = shared.site(),
        requester = %request.site,
        generation = request.topology_generation,
        granted = response.granted,
        reason = ?response.reason,
        "lease request answered"
    );
    Json(response)
}

/// `POST /v1/fence`: read-only now and until a newer authority; optionally kill clients.
async fn fence(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<FenceRequest>,
) -> Result<Json<FenceResponse>, ApiError> {
    check_group(&shared, &request.group)?;
    let _serialised = shared.mutation.lock().await;
    let fence = shared
        .lease()
        .fence(request.topology_generation, request.reason.clone());
    let outcome = crate::enforcer::fence_now(&shared).await;
    shared.metrics.fenced("operator_fence");
    let read_only = report(&outcome);
    shared.set_observation(&read_only.observed);
    let killed_connections = if request.kill_connections {
        match shared
            .mysql
            .kill_client_connections(&shared.protected_users())
            .await
        {
            Ok(killed) => Some(killed),
            Err(error) => {
                tracing::warn!(site = shared.site(), %error, "kill client connections");
                None
            }
        }
    } else {
        None
    };
    tracing::info!(
        site = shared.site(),
        generation = fence.topology_generation,
        read_only = ?read_only.observed.read_only,
        killed_connections,
        reason = %fence.reason,
        "fenced by operator"
    );
    Ok(Json(FenceResponse {
        fence,
        read_only,
        killed_connections,
    }))
}

/// `POST /v1/promote`: drain, then detach replication. Writability follows the lease rule
/// once the operator pushes an authority naming this site.
///
/// - [`PromoteDrain::UntilGtidSet`] (planned failover): wait, replication running, until the
///   set is applied; if the wait times out, replication stays attached (`drained: false`).
/// - [`PromoteDrain::Received`] (emergency failover): stop receiving, wait until everything
///   received is applied, then detach, also when the request's bound passed first (the rest
///   of the relay log is lost then, and `drained` says so).
async fn promote(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<PromoteRequest>,
) -> Result<Json<PromoteResponse>, ApiError> {
    check_group(&shared, &request.group)?;
    let timeout = Duration::from_millis(request.timeout_ms).min(PROMOTE_TIMEOUT_MAX);
    let drained = match &request.drain {
        PromoteDrain::UntilGtidSet(text) => {
            let set = GtidSet::parse(shared.settings.flavor, text).map_err(Error::from)?;
            let reached = match shared.mysql.wait_for_gtid_set(&set, timeout).await {
                Ok(WaitOutcome::Reached) => true,
                Ok(WaitOutcome::TimedOut) => false,
                Err(error) => return Err(Error::from(error).into()),
            };
            if !reached {
                tracing::warn!(
                    site = shared.site(),
                    "promote: drain did not reach the target; replication left attached"
                );
                let observed = match shared.mysql.observe().await {
                    Ok(snapshot) => from_snapshot(&snapshot),
                    Err(error) => unreachable(&error),
                };
                return Ok(Json(PromoteResponse {
                    drained: false,
                    detach: bloodraven_api::sidecar::MutationReport {
                        error: Some("drain did not reach the target GTID set in time".to_owned()),
                        observed,
                    },
                }));
            }
            true
        }
        PromoteDrain::Received => {
            let drain = shared
                .mysql
                .drain_received(timeout)
                .await
                .map_err(Error::from)?;
            let retrieved = drain.retrieved.as_ref().map(ToString::to_string);
            match drain.outcome {
                WaitOutcome::Reached => {
                    tracing::info!(site = shared.site(), retrieved = ?retrieved, "promote: everything received is applied");
                    true
                }
                WaitOutcome::TimedOut => {
                    tracing::warn!(site = shared.site(), retrieved = ?retrieved, timeout_ms = request.timeout_ms, "promote: what was received is not all applied within the bound; detaching anyway, the rest is lost");
                    false
                }
            }
        }
    };
    let _serialised = shared.mutation.lock().await;
    let outcome = shared.mysql.detach().await;
    let detach = report(&outcome);
    shared.set_observation(&detach.observed);
    tracing::info!(site = shared.site(), applied = ?outcome.applied, "promote: replication detached");
    shared.wake_enforcer.notify_one();
    Ok(Json(PromoteResponse { drained, detach }))
}

/// `POST /v1/repoint`: replicate from the given source with GTID auto-positioning.
async fn repoint(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<RepointRequest>,
) -> Result<Json<RepointResponse>, ApiError> {
    check_group(&shared, &request.group)?;
    let source = ReplicationSource {
        host: request.source_host.clone(),
        port: request.source_port,
        user: shared.settings.replication_user.clone(),
        password: shared.settings.replication_password.clone(),
        connect_retry_seconds: 1,
    };
    let _serialised = shared.mutation.lock().await;
    // The active site never replicates: a repoint that reaches the site this sidecar's
    // authority names (a request delayed past its promotion) would attach the new primary to
    // a replica's stream and merge the old primary's lost writes into it.
    let named = shared
        .lease()
        .authority()
        .cloned()
        .filter(|authority| authority.active_site.as_deref() == Some(shared.site()));
    if let Some(authority) = named {
        tracing::warn!(site = shared.site(), source_host = %request.source_host, generation = authority.topology_generation, "repoint refused: this site is the active site");
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!(
                "repoint {} to {}: this site is the active site at topology generation {}; the active site never replicates",
                shared.site(),
                request.source_host,
                authority.topology_generation
            ),
        ));
    }
    if let Some(drain_ms) = request.drain_received_ms {
        if let Some(refused) = drain_before_repoint(&shared, &request, drain_ms).await? {
            return Ok(Json(RepointResponse { repoint: refused }));
        }
    }
    let outcome = shared.mysql.repoint(&source).await;
    let repoint = report(&outcome);
    shared.set_observation(&repoint.observed);
    tracing::info!(
        site = shared.site(),
        source_host = %request.source_host,
        source_port = request.source_port,
        applied = ?outcome.applied,
        "repointed replication"
    );
    Ok(Json(RepointResponse { repoint }))
}

/// A catch-up repoint's first step: apply everything received from the current source
/// (changing the source discards the relay log). `None` when it is all applied; otherwise the
/// report that refuses the repoint (receiving stays stopped, the source unchanged).
async fn drain_before_repoint(
    shared: &Shared,
    request: &RepointRequest,
    drain_ms: u64,
) -> Result<Option<bloodraven_api::sidecar::MutationReport>, ApiError> {
    let timeout = Duration::from_millis(drain_ms).min(PROMOTE_TIMEOUT_MAX);
    let drain = shared
        .mysql
        .drain_received(timeout)
        .await
        .map_err(Error::from)?;
    let retrieved = drain.retrieved.as_ref().map(ToString::to_string);
    match drain.outcome {
        WaitOutcome::Reached => {
            tracing::info!(site = shared.site(), retrieved = ?retrieved, source_host = %request.source_host, "repoint: everything received is applied before the source changes");
            Ok(None)
        }
        WaitOutcome::TimedOut => {
            tracing::warn!(site = shared.site(), retrieved = ?retrieved, drain_ms, source_host = %request.source_host, "repoint refused: what was received is not all applied within the bound");
            let observed = match shared.mysql.observe().await {
                Ok(snapshot) => from_snapshot(&snapshot),
                Err(error) => unreachable(&error),
            };
            Ok(Some(bloodraven_api::sidecar::MutationReport {
                error: Some(format!(
                    "not repointed to {}: what was received ({}) is not all applied within {drain_ms} ms, and a repoint would discard it",
                    request.source_host,
                    retrieved.as_deref().unwrap_or("unknown set")
                )),
                observed,
            }))
        }
    }
}

/// `POST /v1/databases`: the schema exists afterwards, created here only on the writable
/// active site (409 otherwise: a fenced site never takes a write).
async fn ensure_database(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<EnsureDatabaseRequest>,
) -> Result<Json<EnsureDatabaseResponse>, ApiError> {
    check_group(&shared, &request.group)?;
    match crate::databases::ensure(&shared, &request).await {
        Ok(response) => Ok(Json(response)),
        Err(error) => {
            tracing::warn!(site = shared.site(), database = %request.database, %error, "ensure database refused or failed");
            Err(error.into())
        }
    }
}
