//! The `/deploy/v1` router (docs/design/requirements.md R003): `GET /deploy/v1/groups/{group}` and
//! `POST|PUT|DELETE /deploy/v1/groups/{group}/leases`, decided by `bloodraven_core::deploy`.
//!
//! Order of checks on every request: leader (followers answer `503 {"error":"not_leader"}`),
//! bearer token (TokenReview, audience `bloodraven-deploy`), body, group, then core decides;
//! leadership is checked again right before a change is stored (same 503 when it lapsed).
//! Every request logs `msg="deploy api"` with handler, group, instance, operationId, status.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bloodraven_api::{HealthStatus, PlannedFailoverPhase, Timestamp};
use bloodraven_core::deploy::{
    is_known_client, DeployLeases, ForbiddenReason, LeaseCredentials, LeaseRequest, LeaseSummary,
    LeaseToken, Refusal, RequestContext,
};
use bloodraven_core::engine::{lease_stability, unstable_reason};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::backend::{DeployBackend, GroupRef};
use super::review::{Rejection, TokenReviewer};
use crate::hold_gate::GateLock;
use crate::leader::LeaderFlag;
use crate::metrics::Metrics;

/// A clock for the API (the operator's wall clock; tests supply their own).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A generator of lease tokens (random in the operator; tests supply their own).
pub type TokenSource = Arc<dyn Fn() -> LeaseToken + Send + Sync>;

/// Everything the handlers share.
#[derive(Clone)]
pub struct DeployApi {
    /// Whether this replica is the leader.
    pub leader: LeaderFlag,
    /// Token authentication.
    pub reviewer: Arc<dyn TokenReviewer>,
    /// The cluster.
    pub backend: Arc<dyn DeployBackend>,
    /// Serialises lease load-modify-save (shared with the poll loop's store) and guards the
    /// failover-hold gates: a request is decided as between confirmed states while its
    /// group's gate is closed ([`crate::hold_gate`]).
    pub lock: GateLock,
    /// The operator's clock.
    pub clock: Clock,
    /// Lease token generator.
    pub tokens: TokenSource,
    /// Metrics (`bloodraven_deploy_leases_active`).
    pub metrics: Metrics,
}

/// A fresh random lease token: 32 bytes from the OS-seeded thread RNG, hex.
pub fn random_token() -> LeaseToken {
    let bytes: [u8; 32] = rand::random();
    LeaseToken::new(
        bytes
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect::<String>(),
    )
}

/// The router of `/deploy/v1` (mounted only on the TLS listener).
pub fn router(api: DeployApi) -> Router {
    Router::new()
        .route("/deploy/v1/groups/{group}", get(get_group))
        .route(
            "/deploy/v1/groups/{group}/leases",
            axum::routing::post(post_lease)
                .put(put_lease)
                .delete(delete_lease),
        )
        .with_state(api)
}

/// `?namespace=` disambiguates groups of the same name in several namespaces.
#[derive(Debug, Default, Deserialize)]
pub struct GroupQuery {
    /// The group's namespace.
    pub namespace: Option<String>,
}

/// Body of `GET /deploy/v1/groups/{group}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupBody {
    /// Group name.
    pub group: String,
    /// Group namespace.
    pub namespace: String,
    /// The site authority names active.
    pub active_site: Option<String>,
    /// `status.topologyGeneration`, the fence.
    pub topology_generation: u64,
    /// Whether the group is at a confirmed, quiet state.
    pub stable: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unstable_reason: Option<&'static str>,
    /// The health block (`replicationLagSeconds`).
    pub health: HealthStatus,
    /// Operation phases in flight.
    pub operations: Vec<OperationBody>,
    /// Unexpired leases.
    pub leases: Vec<LeaseSummary>,
}

/// An operation in flight.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationBody {
    /// `plannedFailover`.
    pub kind: &'static str,
    /// Its phase.
    pub phase: PlannedFailoverPhase,
    /// Its target site.
    pub target: String,
}

struct Outcome {
    status: StatusCode,
    body: Option<serde_json::Value>,
    instance: String,
    operation_id: String,
}

impl Outcome {
    fn error(status: StatusCode, body: serde_json::Value) -> Self {
        Self {
            status,
            body: Some(body),
            instance: String::new(),
            operation_id: String::new(),
        }
    }

    fn refusal(refusal: &Refusal) -> Self {
        Self::error(
            status(refusal.status_code()),
            serde_json::to_value(refusal).unwrap_or_default(),
        )
    }

    fn with_ids(mut self, instance: &str, operation_id: &str) -> Self {
        if self.instance.is_empty() {
            self.instance = instance.to_string();
        }
        if self.operation_id.is_empty() {
            self.operation_id = operation_id.to_string();
        }
        self
    }

    fn respond(self, handler: &'static str, group: &str) -> Response {
        tracing::info!(
            handler,
            group,
            instance = %self.instance,
            operationId = %self.operation_id,
            status = self.status.as_u16(),
            "deploy api"
        );
        match self.body {
            Some(body) => (self.status, Json(body)).into_response(),
            None => self.status.into_response(),
        }
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn unavailable(what: &str, error: &crate::error::Error) -> Outcome {
    tracing::warn!(%error, "deploy api: failed to {what}");
    Outcome::error(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": "unavailable", "message": format!("failed to {what}: {error}")}),
    )
}

/// Leader, token and group checks shared by every handler.
async fn admit(
    api: &DeployApi,
    headers: &HeaderMap,
    group: &str,
    namespace: Option<&str>,
) -> Result<(bloodraven_core::deploy::Caller, GroupRef), Outcome> {
    if !api.leader.is_leader() {
        return Err(Outcome::refusal(&Refusal::NotLeader));
    }
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty());
    let Some(token) = token else {
        return Err(Outcome::error(
            StatusCode::UNAUTHORIZED,
            json!({"error": "unauthenticated", "message": "a bearer token with audience bloodraven-deploy is required"}),
        ));
    };
    let caller = match api.reviewer.review(token).await {
        Err(error) => return Err(unavailable("review token", &error)),
        Ok(Err(Rejection::NotAuthenticated(message))) => {
            return Err(Outcome::error(
                StatusCode::UNAUTHORIZED,
                json!({"error": "unauthenticated", "message": message}),
            ))
        }
        Ok(Err(Rejection::NotServiceAccount(_))) => {
            return Err(Outcome::refusal(&Refusal::Forbidden {
                reason: ForbiddenReason::NotAuthorized,
            }))
        }
        Ok(Ok(caller)) => caller,
    };
    let groups = api
        .backend
        .find_groups(group, namespace)
        .await
        .map_err(|error| unavailable("find group", &error))?;
    match <[GroupRef; 1]>::try_from(groups) {
        Ok([found]) => Ok((caller, found)),
        Err(groups) if groups.is_empty() => Err(Outcome::error(
            StatusCode::NOT_FOUND,
            json!({"error": "group_not_found", "message": format!("no MysqlFailoverGroup named {group}")}),
        )),
        Err(_) => Err(Outcome::error(
            StatusCode::BAD_REQUEST,
            json!({"error": "invalid_request", "field": "namespace", "message": "several groups have this name: add ?namespace="}),
        )),
    }
}

async fn get_group(
    State(api): State<DeployApi>,
    Path(group): Path<String>,
    Query(query): Query<GroupQuery>,
    headers: HeaderMap,
) -> Response {
    let outcome = match admit(&api, &headers, &group, query.namespace.as_deref()).await {
        Err(outcome) => outcome,
        Ok((caller, found)) => describe(&api, &caller, &found).await,
    };
    outcome.respond("get_group", &group)
}

async fn describe(
    api: &DeployApi,
    caller: &bloodraven_core::deploy::Caller,
    group: &GroupRef,
) -> Outcome {
    let clients = match api.backend.authorized_clients(group).await {
        Ok(clients) => clients,
        Err(error) => return unavailable("list authorized clients", &error),
    };
    if !is_known_client(&clients, caller) {
        return Outcome::refusal(&Refusal::Forbidden {
            reason: ForbiddenReason::NotAuthorized,
        });
    }
    let leases = match api.backend.load(group).await {
        Ok(leases) => leases,
        Err(error) => return unavailable("load deploy leases", &error),
    };
    let now = (api.clock)();
    let memory = &group.memory;
    let unstable = unstable_reason(memory);
    let operations = memory
        .planned_failover
        .as_ref()
        .filter(|planned| match planned.phase {
            PlannedFailoverPhase::Admitting
            | PlannedFailoverPhase::Deferred
            | PlannedFailoverPhase::Draining
            | PlannedFailoverPhase::Promoting => true,
            PlannedFailoverPhase::Completed | PlannedFailoverPhase::Rejected => false,
        })
        .map(|planned| OperationBody {
            kind: "plannedFailover",
            phase: planned.phase,
            target: planned.target.clone(),
        })
        .into_iter()
        .collect();
    api.metrics
        .set_deploy_leases_active(&group.key(), leases.active_count(now));
    let body = GroupBody {
        group: group.name.clone(),
        namespace: group.namespace.clone(),
        // Generation 0: no authority was ever issued, so no site is active yet.
        active_site: (memory.topology_generation > 0).then(|| memory.active_site.clone()),
        topology_generation: memory.topology_generation,
        stable: unstable.is_none(),
        unstable_reason: unstable.map(|reason| reason.as_str()),
        health: memory.to_status().health.unwrap_or_default(),
        operations,
        leases: leases.summaries(now),
    };
    Outcome {
        status: StatusCode::OK,
        body: serde_json::to_value(&body).ok(),
        instance: String::new(),
        operation_id: String::new(),
    }
}

/// Which lease operation a request is.
#[derive(Clone, Copy)]
enum Operation {
    Acquire,
    Renew,
    Release,
}

async fn post_lease(
    State(api): State<DeployApi>,
    Path(group): Path<String>,
    Query(query): Query<GroupQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    lease_request(&api, Operation::Acquire, &group, query, &headers, &body)
        .await
        .respond("post_lease", &group)
}

async fn put_lease(
    State(api): State<DeployApi>,
    Path(group): Path<String>,
    Query(query): Query<GroupQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    lease_request(&api, Operation::Renew, &group, query, &headers, &body)
        .await
        .respond("put_lease", &group)
}

async fn delete_lease(
    State(api): State<DeployApi>,
    Path(group): Path<String>,
    Query(query): Query<GroupQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    lease_request(&api, Operation::Release, &group, query, &headers, &body)
        .await
        .respond("delete_lease", &group)
}

enum Parsed {
    Acquire(LeaseRequest),
    Credentials(LeaseCredentials),
}

fn parse(operation: Operation, body: &[u8]) -> Result<Parsed, Outcome> {
    let invalid = |error: serde_json::Error| {
        Outcome::refusal(&Refusal::InvalidRequest {
            field: "body",
            message: error.to_string(),
        })
    };
    match operation {
        Operation::Acquire => serde_json::from_slice(body)
            .map(Parsed::Acquire)
            .map_err(invalid),
        Operation::Renew | Operation::Release => serde_json::from_slice(body)
            .map(Parsed::Credentials)
            .map_err(invalid),
    }
}

async fn lease_request(
    api: &DeployApi,
    operation: Operation,
    group: &str,
    query: GroupQuery,
    headers: &HeaderMap,
    body: &[u8],
) -> Outcome {
    let (caller, found) = match admit(api, headers, group, query.namespace.as_deref()).await {
        Ok(admitted) => admitted,
        Err(outcome) => return outcome,
    };
    let parsed = match parse(operation, body) {
        Ok(parsed) => parsed,
        Err(outcome) => return outcome,
    };
    let (instance, operation_id) = match &parsed {
        Parsed::Acquire(request) => (request.instance.clone(), request.operation_id.clone()),
        Parsed::Credentials(credentials) => (String::new(), credentials.operation_id.clone()),
    };
    let clients = match api.backend.authorized_clients(&found).await {
        Ok(clients) => clients,
        Err(error) => {
            return unavailable("list authorized clients", &error)
                .with_ids(&instance, &operation_id)
        }
    };
    let topology_generation = found.memory.topology_generation;

    let gates = api.lock.lock().await;
    // Judged under the lock: a planned failover that closed the gate after `found` was read
    // is already between confirmed states (docs/design/history.md#issue-10-case-6: no hold
    // granted after the gate closed can be promised).
    let stability = gates.stability(
        &found.namespace,
        &found.name,
        lease_stability(&found.memory, found.poll_interval),
        found.poll_interval,
    );
    let before = match api.backend.load(&found).await {
        Ok(leases) => leases,
        Err(error) => {
            return unavailable("load deploy leases", &error).with_ids(&instance, &operation_id)
        }
    };
    let now = (api.clock)();
    let context = RequestContext {
        caller: &caller,
        clients: &clients,
        topology_generation,
        stability,
        now,
    };
    let mut after: DeployLeases = before.clone();
    let (outcome, revoked) = match &parsed {
        Parsed::Acquire(request) => {
            let handled = after.acquire(&context, request, (api.tokens)());
            let outcome = Outcome {
                status: status(handled.outcome.status_code()),
                body: serde_json::to_value(handled.outcome.body()).ok(),
                instance: instance.clone(),
                operation_id: operation_id.clone(),
            };
            (outcome, handled.revoked)
        }
        Parsed::Credentials(credentials) => {
            let stored_instance = before
                .lease(credentials.kind)
                .filter(|lease| lease.operation_id == credentials.operation_id)
                .map(|lease| lease.instance.clone())
                .unwrap_or_default();
            let (code, body, revoked) = match operation {
                Operation::Renew => {
                    let handled = after.renew(&context, credentials);
                    (
                        handled.outcome.status_code(),
                        serde_json::to_value(handled.outcome.body()).ok(),
                        handled.revoked,
                    )
                }
                Operation::Release | Operation::Acquire => {
                    let handled = after.release(&context, credentials);
                    (
                        handled.outcome.status_code(),
                        handled
                            .outcome
                            .body()
                            .and_then(|body| serde_json::to_value(body).ok()),
                        handled.revoked,
                    )
                }
            };
            let outcome = Outcome {
                status: status(code),
                body,
                instance: stored_instance,
                operation_id: operation_id.clone(),
            };
            (outcome, revoked)
        }
    };
    if after != before {
        // docs/design/history.md#issue-10-case-5: the review, reads and lock wait since `admit`
        // took time; a grant is a side effect of the leader's, so leadership is re-checked
        // right before it.
        if !api.leader.may_act() {
            tracing::warn!(group = %found.name, instance = %outcome.instance, operation_id = %operation_id, "deploy api: leadership lost while handling the request; nothing stored");
            return Outcome::refusal(&Refusal::NotLeader)
                .with_ids(&outcome.instance, &operation_id);
        }
        if let Err(error) = api.backend.save(&found, &before, &after).await {
            // Not persisted: the client must not believe it holds (or renewed) anything.
            return unavailable("store deploy leases", &error)
                .with_ids(&outcome.instance, &operation_id);
        }
    }
    drop(gates);
    if !revoked.is_empty() {
        api.backend.leases_revoked(&found, &revoked).await;
    }
    api.metrics
        .set_deploy_leases_active(&found.key(), after.active_count(now));
    outcome
}
