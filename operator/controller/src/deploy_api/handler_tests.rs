//! Handler tests of `/deploy/v1` with the real axum router and core's deploy state machine
//! over an in-memory backend (docs/design/requirements.md R003). The TokenReview is a test
//! double here; the real TokenReview path is exercised against localkube in `tests/`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use bloodraven_api::{
    AuthorityState, AuthorityStatus, MysqlFailoverGroupStatus, SiteStatus, Timestamp,
};
use bloodraven_core::deploy::{AuthorizedClient, Caller, DeployLeases, LeaseToken, Tombstone};
use bloodraven_core::engine::{
    AuthorityValidity, EmergencyFailover, EmergencyPhase, InvalidReason,
};
use bloodraven_core::GroupMemory;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use super::backend::{DeployBackend, GroupRef};
use super::handlers::{router, DeployApi};
use super::review::{Rejection, TokenReviewer};
use crate::error::Result;
use crate::hold_gate::{GateLock, HoldGates};
use crate::leader::LeaderFlag;
use crate::metrics::Metrics;

const DEPLOYER_TOKEN: &str = "token-of-ci-deployer";
const OTHER_TOKEN: &str = "token-of-ci-other";
const STRANGER_TOKEN: &str = "token-of-elsewhere-stranger";

/// Maps fixed bearer tokens to ServiceAccounts.
struct FixedReviewer;

impl TokenReviewer for FixedReviewer {
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Result<Caller, Rejection>>> {
        let caller = |namespace: &str, service_account: &str| {
            Ok(Caller {
                namespace: namespace.into(),
                service_account: service_account.into(),
            })
        };
        let answer = match token {
            DEPLOYER_TOKEN => caller("ci", "deployer"),
            OTHER_TOKEN => caller("ci", "other"),
            STRANGER_TOKEN => caller("elsewhere", "stranger"),
            _ => Err(Rejection::NotAuthenticated(
                "token not authenticated".into(),
            )),
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// The cluster in memory: one group, its clients, its stored leases.
struct MemoryBackend {
    group: StdMutex<GroupRef>,
    clients: Vec<AuthorizedClient>,
    stored: StdMutex<DeployLeases>,
    revoked_events: StdMutex<Vec<Tombstone>>,
}

impl DeployBackend for MemoryBackend {
    fn find_groups<'a>(
        &'a self,
        name: &'a str,
        _namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<GroupRef>>> {
        let group = self.group.lock().map(|group| group.clone()).ok();
        Box::pin(async move {
            Ok(group
                .into_iter()
                .filter(|group| group.name == name)
                .collect())
        })
    }

    fn authorized_clients<'a>(
        &'a self,
        _group: &'a GroupRef,
    ) -> BoxFuture<'a, Result<Vec<AuthorizedClient>>> {
        let clients = self.clients.clone();
        Box::pin(async move { Ok(clients) })
    }

    fn load<'a>(&'a self, _group: &'a GroupRef) -> BoxFuture<'a, Result<DeployLeases>> {
        let stored = self
            .stored
            .lock()
            .map(|stored| stored.clone())
            .unwrap_or_default();
        Box::pin(async move { Ok(stored) })
    }

    fn save<'a>(
        &'a self,
        _group: &'a GroupRef,
        _before: &'a DeployLeases,
        after: &'a DeployLeases,
    ) -> BoxFuture<'a, Result<()>> {
        if let Ok(mut stored) = self.stored.lock() {
            *stored = after.clone();
        }
        Box::pin(async { Ok(()) })
    }

    fn leases_revoked<'a>(
        &'a self,
        _group: &'a GroupRef,
        revoked: &'a [Tombstone],
    ) -> BoxFuture<'a, ()> {
        if let Ok(mut events) = self.revoked_events.lock() {
            events.extend(revoked.iter().cloned());
        }
        Box::pin(async {})
    }
}

struct Harness {
    router: Router,
    backend: Arc<MemoryBackend>,
    leader: LeaderFlag,
    clock_millis: Arc<AtomicI64>,
    metrics: Metrics,
    /// The lock (and failover-hold gates) the API shares with the poll loop.
    lock: GateLock,
}

fn healthy_status(generation: u64) -> MysqlFailoverGroupStatus {
    let site = |name: &str, writable: bool, replicating: bool| SiteStatus {
        name: name.into(),
        reachable: true,
        writable,
        replicating,
        ..SiteStatus::default()
    };
    MysqlFailoverGroupStatus {
        active_site: Some("iad".into()),
        topology_generation: generation,
        authority: Some(AuthorityStatus {
            state: AuthorityState::Valid,
            reason: None,
        }),
        sites: vec![
            site("iad", true, false),
            site("pdx", false, true),
            site("reader", false, true),
        ],
        ..MysqlFailoverGroupStatus::default()
    }
}

/// The operator's memory as loaded from `status` (core's `from_status`).
fn memory_of(status: &MysqlFailoverGroupStatus) -> GroupMemory {
    let spec = serde_yaml::from_str(
        "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\n",
    )
    .expect("spec");
    GroupMemory::from_status(&spec, Some(status), Timestamp::from_unix_millis(0))
}

fn harness() -> Harness {
    harness_with(|_| Arc::new(FixedReviewer))
}

/// Leadership lapses while the token is reviewed (the renewal stalled meanwhile): the term
/// ends, then the fixed tokens are reviewed as usual.
struct LapsingReviewer(LeaderFlag);

impl TokenReviewer for LapsingReviewer {
    fn review<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Result<Caller, Rejection>>> {
        self.0.lead_until(tokio::time::Instant::now());
        FixedReviewer.review(token)
    }
}

/// The harness with the reviewer `reviewer` makes from the harness's leader flag.
fn harness_with(reviewer: impl FnOnce(&LeaderFlag) -> Arc<dyn TokenReviewer>) -> Harness {
    let backend = Arc::new(MemoryBackend {
        group: StdMutex::new(GroupRef {
            namespace: "bloodraven-playground".into(),
            name: "playground".into(),
            memory: memory_of(&healthy_status(17)),
            poll_interval: Duration::from_secs(2),
            owner: None,
            reference: None,
        }),
        clients: vec![
            AuthorizedClient {
                instance: "counter-app".into(),
                namespace: "ci".into(),
                service_account: "deployer".into(),
            },
            AuthorizedClient {
                instance: "counter-app".into(),
                namespace: "ci".into(),
                service_account: "other".into(),
            },
        ],
        stored: StdMutex::new(DeployLeases::new()),
        revoked_events: StdMutex::new(Vec::new()),
    });
    let leader = LeaderFlag::new(true);
    let clock_millis = Arc::new(AtomicI64::new(1_796_007_358_000));
    let counter = Arc::new(AtomicU64::new(0));
    let metrics = Metrics::new();
    let lock = HoldGates::new_lock();
    let api = DeployApi {
        leader: leader.clone(),
        reviewer: reviewer(&leader),
        backend: backend.clone(),
        lock: lock.clone(),
        clock: {
            let clock = clock_millis.clone();
            Arc::new(move || Timestamp::from_unix_millis(clock.load(Ordering::SeqCst)))
        },
        tokens: Arc::new(move || {
            LeaseToken::new(format!(
                "lease-token-{}",
                counter.fetch_add(1, Ordering::SeqCst)
            ))
        }),
        metrics: metrics.clone(),
    };
    Harness {
        router: router(api),
        backend,
        leader,
        clock_millis,
        metrics,
        lock,
    }
}

impl Harness {
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let body = body
            .map(|body| Body::from(body.to_string()))
            .unwrap_or_else(Body::empty);
        let response = self
            .router
            .clone()
            .oneshot(request.body(body).expect("request"))
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn post(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, LEASES, Some(token), Some(body))
            .await
    }

    /// `PUT` (renew) or `DELETE` (release) of `.../leases` with the credentials of
    /// `kind`/`operation_id`/`lease_token`.
    async fn with_credentials(
        &self,
        method: Method,
        token: &str,
        (kind, operation_id, lease_token): (&str, &str, &Value),
    ) -> (StatusCode, Value) {
        let body = credentials(kind, operation_id, lease_token);
        self.call(method, LEASES, Some(token), Some(body)).await
    }

    async fn renew(&self, token: &str, kind: &str, id: &str, lease: &Value) -> (StatusCode, Value) {
        self.with_credentials(Method::PUT, token, (kind, id, lease))
            .await
    }

    async fn release(
        &self,
        token: &str,
        kind: &str,
        id: &str,
        lease: &Value,
    ) -> (StatusCode, Value) {
        self.with_credentials(Method::DELETE, token, (kind, id, lease))
            .await
    }

    fn advance(&self, seconds: i64) {
        self.clock_millis
            .fetch_add(seconds * 1_000, Ordering::SeqCst);
    }

    fn set_memory(&self, memory: GroupMemory) {
        if let Ok(mut group) = self.backend.group.lock() {
            group.memory = memory;
        }
    }
}

const GROUP: &str = "/deploy/v1/groups/playground";
const LEASES: &str = "/deploy/v1/groups/playground/leases";

fn migration(operation_id: &str) -> Value {
    json!({"kind": "migration", "operationId": operation_id, "instance": "counter-app", "ttlSeconds": 30})
}

fn hold(operation_id: &str) -> Value {
    json!({"kind": "failover-hold", "operationId": operation_id, "instance": "counter-app", "ttlSeconds": 30})
}

fn credentials(kind: &str, operation_id: &str, token: &Value) -> Value {
    json!({"kind": kind, "operationId": operation_id, "token": token})
}

/// docs/design/history.md#issue-10-case-5: leadership is re-checked right before a grant is
/// stored. A leader whose term ends while the request is handled (after the first check)
/// answers 503 not_leader and stores nothing.
#[tokio::test]
async fn a_grant_is_not_stored_once_leadership_lapsed_during_the_request() {
    let harness = harness_with(|leader| Arc::new(LapsingReviewer(leader.clone())));
    assert!(harness.leader.is_leader());
    let (status, body) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, json!({"error": "not_leader"}));
    let stored = harness.backend.stored.lock().map(|stored| stored.clone());
    assert_eq!(stored.ok(), Some(DeployLeases::new()), "nothing stored");
}

/// docs/design/requirements.md R003.3: only the leader answers; a follower returns 503
/// {"error":"not_leader"}.
#[tokio::test]
async fn seed_003_followers_answer_503_not_leader() {
    let harness = harness();
    harness.leader.set(false);
    for (method, path, body) in [
        (Method::GET, GROUP, None),
        (Method::POST, LEASES, Some(migration("a1"))),
        (Method::PUT, LEASES, Some(json!({}))),
        (Method::DELETE, LEASES, Some(json!({}))),
    ] {
        let (status, body) = harness
            .call(method.clone(), path, Some(DEPLOYER_TOKEN), body)
            .await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{method} {path}");
        assert_eq!(body, json!({"error": "not_leader"}));
    }
}

/// docs/design/requirements.md R003.4-R003.5: authentication by TokenReview (no or bad token:
/// 401), authorization from deploymentClients (an unlisted ServiceAccount: 403).
#[tokio::test]
async fn seed_003_unauthenticated_and_unauthorized_callers_are_refused() {
    let harness = harness();
    let (status, body) = harness.call(Method::GET, GROUP, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "unauthenticated");
    let (status, _) = harness.call(Method::GET, GROUP, Some("forged"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = harness
        .call(Method::GET, GROUP, Some(STRANGER_TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body,
        json!({"error": "forbidden", "reason": "not_authorized"})
    );
    let (status, _) = harness.post(STRANGER_TOKEN, migration("a1")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, body) = harness
        .call(
            Method::GET,
            "/deploy/v1/groups/elsewhere",
            Some(DEPLOYER_TOKEN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "group_not_found");
}

/// docs/design/requirements.md R003.7-R003.14 walkthrough: GET, migration 201, second pipeline
/// 409 held, hold only for the migration holder (403 otherwise), hold 201, renewals 200,
/// re-POST 200 rotating the token.
#[tokio::test]
async fn seed_003_two_leases_in_one_order() {
    let harness = harness();
    let (status, body) = harness
        .call(Method::GET, GROUP, Some(DEPLOYER_TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["activeSite"], "iad");
    assert_eq!(body["topologyGeneration"], 17);
    assert_eq!(body["stable"], true);
    assert_eq!(body["leases"], json!([]));

    // A hold before the mutex: 403.
    let (status, body) = harness.post(DEPLOYER_TOKEN, hold("a1")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["reason"], "not_migration_holder");

    let (status, granted) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(granted["kind"], "migration");
    assert_eq!(granted["operationId"], "a1");
    assert_eq!(granted["topologyGeneration"], 17);
    assert_eq!(granted["expiresAt"], "2026-11-30T02:56:28.000Z");
    let migration_token = granted["token"].clone();
    assert!(migration_token.is_string());

    // The second pipeline: 409 held with the holder's operationId, instance, expiresAt.
    let (status, held) = harness.post(OTHER_TOKEN, migration("b2")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        held,
        json!({"error": "held", "kind": "migration", "operationId": "a1", "instance": "counter-app", "expiresAt": "2026-11-30T02:56:28.000Z"})
    );
    // Someone else asking for the hold: 403.
    let (status, _) = harness.post(OTHER_TOKEN, hold("b2")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, hold_grant) = harness.post(DEPLOYER_TOKEN, hold("a1")).await;
    assert_eq!(status, StatusCode::CREATED);
    let hold_token = hold_grant["token"].clone();

    harness.advance(10);
    let (status, renewed) = harness
        .renew(DEPLOYER_TOKEN, "failover-hold", "a1", &hold_token)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(renewed["expiresAt"], "2026-11-30T02:56:38.000Z");
    assert_eq!(renewed["topologyGeneration"], 17);
    assert!(renewed.get("token").is_none());

    let (status, body) = harness
        .call(Method::GET, GROUP, Some(DEPLOYER_TOKEN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["leases"].as_array().map(Vec::len), Some(2));
    assert!(harness
        .metrics
        .encode()
        .contains("bloodraven_deploy_leases_active{group=\"bloodraven-playground/playground\"} 2"));

    // Repeating the POST for the same operation: 200 and a rotated token; the old one is dead.
    let (status, rotated) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    assert_eq!(status, StatusCode::OK);
    assert_ne!(rotated["token"], migration_token);
    let (status, body) = harness
        .renew(DEPLOYER_TOKEN, "migration", "a1", &migration_token)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body, json!({"error": "token_mismatch"}));

    // Release: 204, and the mutex is free for the next pipeline.
    let (status, _) = harness
        .release(DEPLOYER_TOKEN, "failover-hold", "a1", &hold_token)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = harness
        .release(DEPLOYER_TOKEN, "migration", "a1", &rotated["token"])
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = harness.post(OTHER_TOKEN, migration("b2")).await;
    assert_eq!(status, StatusCode::CREATED);
}

/// docs/design/requirements.md R003.20-R003.23: a generation change revokes every lease
/// (TopologyChanged, 409 revoked with the new generation) and raises DeploymentLeaseRevoked;
/// the tombstone keeps refusing the same operation even after another took the mutex; an
/// expired lease is 404.
#[tokio::test]
async fn seed_003_generation_is_the_fence() {
    let harness = harness();
    let (_, granted) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    let token = granted["token"].clone();

    harness.set_memory(memory_of(&healthy_status(18)));
    let (status, body) = harness
        .renew(DEPLOYER_TOKEN, "migration", "a1", &token)
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        json!({"error": "revoked", "operationId": "a1", "reason": "TopologyChanged", "topologyGeneration": 18})
    );
    let events = harness
        .backend
        .revoked_events
        .lock()
        .map(|e| e.clone())
        .unwrap_or_default();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].operation_id, "a1");
    let stored = harness
        .backend
        .stored
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    assert!(stored.tombstone_of("a1").is_some(), "tombstone persisted");

    let (status, _) = harness.post(OTHER_TOKEN, migration("b2")).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, body) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"], "revoked");

    // b2 lapses: 404 on renewal.
    harness.advance(31);
    let (_, fresh) = harness
        .call(Method::GET, GROUP, Some(OTHER_TOKEN), None)
        .await;
    assert_eq!(fresh["leases"], json!([]));
    let (status, body) = harness
        .call(
            Method::PUT,
            LEASES,
            Some(OTHER_TOKEN),
            Some(credentials("migration", "b2", &json!("lease-token-1"))),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({"error": "not_found"}));
}

/// docs/design/requirements.md R003.13: between confirmed states a renewal is 423 unstable with
/// retryAfterSeconds and never extends the deadline; GET reports stable=false with the reason.
#[tokio::test]
async fn seed_003_unstable_renewal_is_423_and_extends_nothing() {
    let harness = harness();
    let (_, granted) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    let token = granted["token"].clone();
    // An emergency failover in flight: the authority is moving (core judges it from the
    // leader's memory, `engine::unstable_reason` / `engine::lease_stability`).
    let mut moving = memory_of(&healthy_status(17));
    moving.authority = AuthorityValidity::Invalid(InvalidReason::Moving);
    moving.emergency_failover = Some(EmergencyFailover {
        from: "iad".into(),
        phase: EmergencyPhase::AwaitingLeaseExpiry,
        announced_at: Timestamp::from_unix_millis(0),
        started_at: Timestamp::from_unix_millis(0),
        detected_at: Timestamp::from_unix_millis(0),
        fenced_at: None,
        holder_unknown: false,
    });
    harness.set_memory(moving);
    harness.advance(5);
    let (status, body) = harness
        .renew(DEPLOYER_TOKEN, "migration", "a1", &token)
        .await;
    assert_eq!(status, StatusCode::LOCKED);
    assert_eq!(body, json!({"error": "unstable", "retryAfterSeconds": 2}));
    let (_, view) = harness
        .call(Method::GET, GROUP, Some(DEPLOYER_TOKEN), None)
        .await;
    assert_eq!(view["stable"], false);
    assert_eq!(view["unstableReason"], "RecoveryPending");
    assert_eq!(
        view["leases"][0]["expiresAt"], granted["expiresAt"],
        "deadline unchanged"
    );
}

/// docs/design/requirements.md R003.9 and R003.13: stable is false during any operation phase
/// (Deferred included: AutomaticFailoverHeld), on SplitBrain, NoPrimary, Degraded and
/// stopped replication; lag alone never makes it false; a grant is refused (423) only between
/// confirmed states. Judged by core's `unstable_reason` / `lease_stability` over the memory.
#[tokio::test]
async fn seed_003_stable_unstable_reason_and_lease_stability_come_from_core() {
    use bloodraven_api::{Admission, PlannedFailoverPhase as Phase};
    use bloodraven_core::engine::{PlannedFailover, SiteState};

    let planned = |phase| {
        let mut memory = memory_of(&healthy_status(17));
        memory.planned_failover = Some(PlannedFailover {
            target: "pdx".into(),
            from: "iad".into(),
            phase,
            admission: Admission::default(),
            requested_at: Timestamp::from_unix_millis(0),
            phase_since: Timestamp::from_unix_millis(0),
            fenced_at: None,
            annotation_cleared: false,
        });
        memory
    };
    let mut lagging = memory_of(&healthy_status(17));
    lagging.sites[1].seconds_behind_source = Some(3_000);
    let mut split = memory_of(&healthy_status(17));
    split.sites[1].writable = true;
    let mut no_primary = memory_of(&healthy_status(17));
    no_primary.authority = AuthorityValidity::Invalid(InvalidReason::ActiveUnreachable);
    let mut unreachable = memory_of(&healthy_status(17));
    unreachable.sites[2].reachable = false;
    let mut fenced = memory_of(&healthy_status(17));
    fenced.sites[1].state = SiteState::Demoted;
    let mut stopped = memory_of(&healthy_status(17));
    stopped.sites[2].replicating = false;
    let never_polled = memory_of(&MysqlFailoverGroupStatus::default());
    const HELD: Option<&str> = Some("AutomaticFailoverHeld");
    // (case, memory, unstableReason, whether a grant is refused 423)
    let cases = [
        ("lag alone", lagging, None, false),
        ("admitting", planned(Phase::Admitting), HELD, false),
        ("deferred", planned(Phase::Deferred), HELD, false),
        ("draining", planned(Phase::Draining), HELD, true),
        ("promoting", planned(Phase::Promoting), HELD, true),
        ("completed", planned(Phase::Completed), None, false),
        ("rejected", planned(Phase::Rejected), None, false),
        ("split brain", split, Some("SplitBrain"), true),
        ("no primary", no_primary, Some("NoPrimary"), true),
        ("never polled", never_polled, Some("NoPrimary"), true),
        ("unreachable", unreachable, Some("Degraded"), false),
        ("fenced former primary", fenced, Some("Degraded"), false),
        (
            "replication stopped",
            stopped,
            Some("ReplicationNotRunning"),
            false,
        ),
    ];
    for (case, memory, reason, refused) in cases {
        let harness = harness();
        harness.set_memory(memory);
        let (_, view) = harness
            .call(Method::GET, GROUP, Some(DEPLOYER_TOKEN), None)
            .await;
        assert_eq!(view["stable"], reason.is_none(), "{case}");
        assert_eq!(
            view.get("unstableReason").and_then(Value::as_str),
            reason,
            "{case}"
        );
        let (status, body) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
        if refused {
            assert_eq!(status, StatusCode::LOCKED, "{case}: {body}");
            assert_eq!(body["error"], "unstable", "{case}");
        } else {
            assert_ne!(status, StatusCode::LOCKED, "{case}: {body}");
        }
    }
}

/// docs/design/requirements.md R003.7-R003.14: malformed bodies are 400 invalid_request, and
/// nothing is stored.
#[tokio::test]
async fn seed_003_bad_bodies_are_400() {
    let harness = harness();
    let (status, body) = harness.post(DEPLOYER_TOKEN, json!({"kind": "hold"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_request");
    let (status, body) = harness.post(DEPLOYER_TOKEN, migration("has space")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "operationId");
    let stored = harness
        .backend
        .stored
        .lock()
        .map(|s| s.leases().count())
        .unwrap_or(usize::MAX);
    assert_eq!(stored, 0);
}

/// docs/design/requirements.md R003.25: every request logs msg="deploy api" with handler,
/// group, instance, operationId and status, all top-level keys of the JSON line.
#[tokio::test(flavor = "current_thread")]
async fn seed_003_every_request_logs_deploy_api() {
    let harness = harness();
    let captured = crate::test_support::CapturedLogs::default();
    let _guard = captured.install();
    // Another thread, with no subscriber, reaches the handlers' log line first, as any other
    // test of this binary may while this one runs: the capture must still see the line.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(harness.call(Method::GET, GROUP, Some(DEPLOYER_TOKEN), None))
        });
    });
    let (_, granted) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
    harness
        .renew(DEPLOYER_TOKEN, "migration", "a1", &granted["token"])
        .await;
    harness.leader.set(false);
    harness
        .call(Method::GET, GROUP, Some(DEPLOYER_TOKEN), None)
        .await;

    let text = captured.text();
    let lines: Vec<Value> = captured
        .lines()
        .into_iter()
        .filter(|line| line["msg"] == "deploy api")
        .collect();
    let fields: Vec<(Value, Value, Value, Value, Value)> = lines
        .iter()
        .map(|f| {
            (
                f["handler"].clone(),
                f["group"].clone(),
                f["instance"].clone(),
                f["operationId"].clone(),
                f["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        vec![
            (
                json!("post_lease"),
                json!("playground"),
                json!("counter-app"),
                json!("a1"),
                json!(201)
            ),
            (
                json!("put_lease"),
                json!("playground"),
                json!("counter-app"),
                json!("a1"),
                json!(200)
            ),
            (
                json!("get_group"),
                json!("playground"),
                json!(""),
                json!(""),
                json!(503)
            ),
        ],
        "{text}"
    );
}

/// docs/design/requirements.md R003.2: /deploy/v1 is TLS only. The router served by the TLS
/// listener answers over HTTPS (here a follower's 503 not_leader); plain HTTP to the same port
/// gets no answer.
#[tokio::test]
async fn seed_003_deploy_api_is_served_over_tls_only() {
    let harness = harness();
    harness.leader.set(false);
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("certificate");
    let cert_pem = certified.cert.pem();
    let key_pem = certified.key_pair.serialize_pem();
    let config =
        crate::tls::server_config(cert_pem.as_bytes(), key_pem.as_bytes()).expect("tls config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(crate::tls::serve_listener(
        listener,
        config,
        harness.router.clone(),
        stopped,
    ));

    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).expect("root"))
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let response = client
        .get(format!("https://localhost:{}{GROUP}", address.port()))
        .bearer_auth(DEPLOYER_TOKEN)
        .send()
        .await
        .expect("https request");
    assert_eq!(response.status().as_u16(), 503);
    assert_eq!(
        response.json::<Value>().await.ok(),
        Some(json!({"error": "not_leader"}))
    );

    let plain = client
        .get(format!("http://127.0.0.1:{}{GROUP}", address.port()))
        .send()
        .await;
    assert!(plain.is_err(), "plain http must not be answered: {plain:?}");

    let _ = stop.send(true);
    let _ = server.await;
}

// ---------------------------------------------------------------------------------------
// docs/design/history.md#issue-10-case-6 (docs/design/requirements.md R003.16): a failover-hold
// granted between the poll's read of the leases and the Fence. The poll is driven by hand:
// gather's read of the stored leases, core's decide, the grant through the real router, then
// act (the gate step and the executor, fencing through a fake sidecar).

mod hold_race {
    use crate::events::Recorder;
    use axum::extract::State;
    use bloodraven_api::sidecar::{
        Authority, LeaseState, MysqlObservation, MysqldRun, ReplicationState, SidecarStatus,
    };
    use bloodraven_api::{names, DeferReason, MysqlFailoverGroup, PlannedFailoverPhase};
    use bloodraven_core::engine::{
        Action, DnsReading, GroupAnnotations, Observation, SidecarReading, SiteObservation,
        SiteState,
    };
    use bloodraven_core::{decide, Decision};
    use kube::runtime::events::Reporter;

    use super::*;
    use crate::act::Executor;
    use crate::deploy_api::store::LeaseStore;
    use crate::gather::hold_after_fence;
    use crate::hold_gate::{confirm_no_hold, reopen, reopen_when_settled, GroupKey};
    use crate::sidecar::SidecarClient;

    const GENERATION: u64 = 17;
    const GTID: &str = "0-1-40";
    const KEY: GroupKey<'static> = GroupKey {
        namespace: "bloodraven-playground",
        name: "playground",
    };

    /// What the sidecars of a settled playground say: iad writable with its lease, pdx and
    /// reader replicating from iad with no lag, every sidecar caching authority iad@17.
    fn observation(now: Timestamp, planned_failover: Option<&str>) -> Observation {
        let authority = Authority {
            group: KEY.name.into(),
            active_site: Some("iad".into()),
            topology_generation: GENERATION,
            issued_at: now.saturating_sub(Duration::from_secs(60)),
            moving_from: None,
        };
        let site = |name: &str| {
            let active = name == "iad";
            let status = SidecarStatus {
                group: KEY.name.into(),
                site: name.into(),
                observed_at: now,
                mysql: MysqlObservation {
                    reachable: true,
                    error: None,
                    down: false,
                    read_only: Some(!active),
                    gtid_executed: Some(GTID.into()),
                    replication: (!active).then(|| ReplicationState {
                        running: true,
                        source_host: Some(names::source_host(KEY.name, "iad", KEY.namespace)),
                        source_port: Some(names::PORT_MYSQL),
                        seconds_behind_source: Some(0),
                        last_error: None,
                    }),
                    mysqld: Some(MysqldRun {
                        server_id: "1".into(),
                        uptime_seconds: 600,
                        started_at: now.saturating_sub(Duration::from_secs(600)),
                    }),
                },
                fenced: !active,
                fence: None,
                lease: LeaseState {
                    held: active,
                    remaining_ms: if active { 5_000 } else { 0 },
                },
                authority: Some(authority.clone()),
                known_generation: None,
                latest_authority: None,
                last_granted_ago_ms: [("iad".to_string(), 500)].into_iter().collect(),
                backups: Vec::new(),
                job: None,
                runtime: None,
            };
            SiteObservation {
                site: name.into(),
                sidecar: SidecarReading::Reachable(Box::new(status)),
                node_name: Some(format!("node-{name}")),
                service_cluster_ip: Some("10.96.0.10".into()),
                sidecar_uptime: Some(Duration::from_secs(600)),
                pod_lease_terms: None,
                pod: bloodraven_core::engine::PodReading::Unknown,
            }
        };
        Observation {
            group: KEY.name.into(),
            namespace: KEY.namespace.into(),
            sites: ["pdx", "reader", "iad"].into_iter().map(site).collect(),
            annotations: GroupAnnotations {
                planned_failover: planned_failover.map(str::to_string),
                ..GroupAnnotations::default()
            },
            deploy_hold: None,
            dns: DnsReading::Absent,
            polled_at: Some(now),
        }
    }

    /// The leader's memory of the settled playground at generation 17 (as the API's board
    /// has it), after a few quiet polls.
    fn settled(group: &MysqlFailoverGroup, now: Timestamp) -> GroupMemory {
        let mut memory =
            GroupMemory::from_status(&group.spec, Some(&healthy_status(GENERATION)), now);
        for _ in 0..3 {
            memory = decide(&group.spec, &memory, &observation(now, None), now).memory;
        }
        assert!(memory.authority.is_valid(), "{:?}", memory.authority);
        assert_eq!(memory.topology_generation, GENERATION);
        assert_eq!(
            memory.site("pdx").map(|site| site.state),
            Some(SiteState::Replica)
        );
        memory
    }

    fn fences(decision: &Decision) -> bool {
        decision
            .actions
            .iter()
            .any(|action| matches!(action, Action::Fence { .. }))
    }

    /// Sidecars that record every request (`METHOD /site/path`) and answer none usefully.
    struct FakeSidecars {
        requests: Arc<StdMutex<Vec<String>>>,
        client: SidecarClient,
        server: tokio::task::JoinHandle<()>,
    }

    impl FakeSidecars {
        async fn start() -> Self {
            let requests = Arc::new(StdMutex::new(Vec::new()));
            let router =
                Router::new()
                    .fallback(
                        |State(requests): State<Arc<StdMutex<Vec<String>>>>,
                         request: Request<Body>| async move {
                            if let Ok(mut seen) = requests.lock() {
                                seen.push(format!("{} {}", request.method(), request.uri().path()));
                            }
                            StatusCode::SERVICE_UNAVAILABLE
                        },
                    )
                    .with_state(requests.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let address = listener.local_addr().expect("address");
            let server = tokio::spawn(async move {
                let _ = axum::serve(listener, router).await;
            });
            let client =
                crate::test_support::playground_sidecars(format!("http://{address}/{{site}}"));
            Self {
                requests,
                client,
                server,
            }
        }

        fn fences(&self) -> Vec<String> {
            self.requests
                .lock()
                .map(|seen| seen.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|request| request.ends_with("/v1/fence"))
                .collect()
        }
    }

    impl Drop for FakeSidecars {
        fn drop(&mut self) {
            self.server.abort();
        }
    }

    /// Act as the poll runs it: the gate step, then the executor (Fence to the sidecars; the
    /// Kubernetes writes go nowhere and fail as unknowns).
    #[allow(clippy::too_many_arguments)]
    async fn act(
        harness: &Harness,
        sidecars: &FakeSidecars,
        group: &MysqlFailoverGroup,
        memory: &GroupMemory,
        observation: &Observation,
        decision: Decision,
        now: Timestamp,
    ) -> Decision {
        let stored = harness.stored();
        let decision = confirm_no_hold(
            &harness.lock,
            KEY,
            &group.spec,
            memory,
            observation,
            decision,
            now,
            async move { Ok(stored) },
            || now,
        )
        .await;
        let client = crate::test_support::unreachable_api_client();
        let store = LeaseStore::with_lock(client.clone(), harness.lock.clone());
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "bloodraven".into(),
                instance: None,
            },
        );
        let metrics = Metrics::new();
        let executor = Executor {
            client: &client,
            sidecars: &sidecars.client,
            store: &store,
            recorder: &recorder,
            metrics: &metrics,
            group,
            leader: &crate::leader::LeaderFlag::new(true),
        };
        executor.execute(&decision, now).await;
        decision
    }

    impl Harness {
        fn now(&self) -> Timestamp {
            Timestamp::from_unix_millis(self.clock_millis.load(Ordering::SeqCst))
        }

        fn stored(&self) -> DeployLeases {
            self.backend
                .stored
                .lock()
                .map(|stored| stored.clone())
                .unwrap_or_default()
        }
    }

    /// The poll up to decide: gather reads the stored leases (no hold yet) and core admits
    /// the planned failover iad -> pdx, fencing iad.
    fn read_and_decide(
        harness: &Harness,
        group: &MysqlFailoverGroup,
    ) -> (GroupMemory, Observation, Decision) {
        let now = harness.now();
        let memory = settled(group, now);
        let mut read = observation(now, Some("pdx"));
        read.deploy_hold = hold_after_fence(&harness.stored(), memory.topology_generation, now);
        assert_eq!(read.deploy_hold, None, "no hold when the poll reads");
        let decision = decide(&group.spec, &memory, &read, now);
        assert_eq!(
            decision
                .memory
                .planned_failover
                .as_ref()
                .map(|planned| planned.phase),
            Some(PlannedFailoverPhase::Draining)
        );
        assert!(fences(&decision), "decided from the read: fence iad");
        (memory, read, decision)
    }

    /// docs/design/history.md#issue-10-case-6 (docs/design/requirements.md R003.16: a live
    /// failover-hold defers a planned failover): the API grants the hold after the poll read
    /// the leases and before act; act must not fence, and the planned failover is Deferred with
    /// DeploymentHold naming the holder. Without the gate step the decision made from the read
    /// fences iad under the hold just promised.
    #[tokio::test]
    async fn issue_10_case_6_a_hold_granted_after_the_polls_read_is_never_fenced_through() {
        let harness = harness();
        let group = crate::test_support::playground_group("2s");
        let (status, _) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
        assert_eq!(status, StatusCode::CREATED);
        let (memory, read, decision) = read_and_decide(&harness, &group);

        // Between the read and the Fence, the pipeline is promised the hold.
        let (status, granted) = harness.post(DEPLOYER_TOKEN, hold("a1")).await;
        assert_eq!(status, StatusCode::CREATED, "{granted}");

        let sidecars = FakeSidecars::start().await;
        let now = harness.now();
        let executed = act(&harness, &sidecars, &group, &memory, &read, decision, now).await;
        assert_eq!(
            sidecars.fences(),
            Vec::<String>::new(),
            "iad fenced under a live hold"
        );
        let planned = executed.memory.planned_failover.clone().expect("planned");
        assert_eq!(planned.phase, PlannedFailoverPhase::Deferred);
        assert_eq!(
            planned.admission.defer_reason,
            Some(DeferReason::DeploymentHold)
        );
        let message = planned.admission.message.unwrap_or_default();
        assert!(
            message.contains("a1") && message.contains("counter-app"),
            "{message}"
        );
        // The gate stayed open: the hold is renewable while it defers the switchover.
        let hold_token = granted["token"].clone();
        let (status, _) = harness
            .renew(DEPLOYER_TOKEN, "failover-hold", "a1", &hold_token)
            .await;
        assert_eq!(status, StatusCode::OK);
    }

    /// docs/design/history.md#issue-10-case-6: once act closed the gate (no hold at its
    /// re-check) and fenced, a hold asked for before the poll published its Draining memory
    /// gets the refusal between confirmed states of docs/design/requirements.md R003.13,
    /// `423 {"error":"unstable","retryAfterSeconds"}`, not a 201 the drain would break. The
    /// gate stays closed while the failover drains and reopens when it ends (here: aborted,
    /// Rejected), and when leadership is lost.
    #[tokio::test]
    async fn issue_10_case_6_a_hold_asked_after_the_gate_closed_is_refused_423_until_it_reopens() {
        let harness = harness();
        let group = crate::test_support::playground_group("2s");
        let (status, _) = harness.post(DEPLOYER_TOKEN, migration("a1")).await;
        assert_eq!(status, StatusCode::CREATED);
        let (memory, read, decision) = read_and_decide(&harness, &group);

        let sidecars = FakeSidecars::start().await;
        let now = harness.now();
        let executed = act(&harness, &sidecars, &group, &memory, &read, decision, now).await;
        assert_eq!(sidecars.fences(), vec!["POST /iad/v1/fence".to_string()]);

        // The API still judges by the memory published before this poll (no planned
        // failover): only the gate knows the drain started.
        let (status, body) = harness.post(DEPLOYER_TOKEN, hold("a1")).await;
        assert_eq!(status, StatusCode::LOCKED, "{body}");
        assert_eq!(body, json!({"error": "unstable", "retryAfterSeconds": 2}));
        let gates = harness.lock.lock().await;
        assert_eq!(
            gates
                .closed_for(KEY.namespace, KEY.name)
                .map(|start| (start.from.as_str(), start.target.as_str())),
            Some(("iad", "pdx"))
        );
        drop(gates);

        // Still draining on the next poll: still closed.
        reopen_when_settled(&harness.lock, KEY, &executed.memory).await;
        let (status, _) = harness.post(DEPLOYER_TOKEN, hold("a1")).await;
        assert_eq!(status, StatusCode::LOCKED);

        // The drain ends (aborted: Rejected): the gate reopens and the hold is granted.
        let mut ended = executed.memory.clone();
        if let Some(planned) = ended.planned_failover.as_mut() {
            planned.phase = PlannedFailoverPhase::Rejected;
        }
        reopen_when_settled(&harness.lock, KEY, &ended).await;
        let (status, granted) = harness.post(DEPLOYER_TOKEN, hold("a1")).await;
        assert_eq!(status, StatusCode::CREATED);

        // A gate closed by a leader that then loses leadership reopens with the loop's turn.
        let (status, _) = harness
            .release(DEPLOYER_TOKEN, "failover-hold", "a1", &granted["token"])
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        let (memory, read, decision) = read_and_decide(&harness, &group);
        act(&harness, &sidecars, &group, &memory, &read, decision, now).await;
        let closed = |gates: &HoldGates| gates.closed_for(KEY.namespace, KEY.name).is_some();
        assert!(closed(&*harness.lock.lock().await));
        reopen(&harness.lock, KEY, "leadership lost").await;
        assert!(!closed(&*harness.lock.lock().await));
    }
}
