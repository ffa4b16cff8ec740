//! End-to-end tests of the operator shell against localkube's embedded API server
//! (`localkube_apiserver::LocalKube::start`): the real kube TokenReview path, the deploy API
//! over TLS with leases stored as Lease objects and tombstones in a ConfigMap, leader
//! election with resourceVersion conflicts, and polls that bootstrap a group through fake
//! sidecars (Services, status, DNSEndpoint by SSA, pod labels).

use crate::support::{eventually, Cluster};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use bloodraven_api::sidecar::{
    Authority, AuthorityDecision, AuthorityResponse, DatabaseOutcome, EnsureDatabaseRequest,
    EnsureDatabaseResponse, FenceRequest, FenceResponse, FenceState, LeaseState, MutationReport,
    MysqlObservation, MysqldRun, PromoteRequest, PromoteResponse, ReplicationState, RepointRequest,
    RepointResponse, SidecarStatus,
};
use bloodraven_api::{names, DNSEndpoint, MysqlDatabase, MysqlFailoverGroup, Timestamp};
use bloodraven_operator::deploy_api::backend::KubeBackend;
use bloodraven_operator::deploy_api::handlers::{random_token, router as deploy_router, DeployApi};
use bloodraven_operator::deploy_api::review::{KubeTokenReviewer, Rejection, TokenReviewer};
use bloodraven_operator::deploy_api::store::LeaseStore;
use bloodraven_operator::leader::{run_election, ElectionTimings, LeaderFlag};
use bloodraven_operator::memory::MemoryBoard;
use bloodraven_operator::metrics::Metrics;
use bloodraven_operator::poll::{wall_clock, Shell};
use bloodraven_operator::sidecar::{SidecarAddressing, SidecarClient};
use bloodraven_operator::workloads::live_mysql_image;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::runtime::events::Reporter;
use kube::{Client, Config};
use serde_json::{json, Value};
use tokio::sync::watch;

const NAMESPACE: &str = "bloodraven-playground";
const GROUP: &str = "playground";

/// Authority valid on iad and all three sites healthy.
fn bootstrapped_and_healthy(group: &MysqlFailoverGroup) -> bool {
    valid_on(group, "iad")
        && group
            .status
            .as_ref()
            .is_some_and(|status| status.sites.iter().filter(|site| site.healthy).count() == 3)
}

/// The `shipstream.io/role` label of `site`'s pod.
async fn role_of(pods: &Api<Pod>, site: &str) -> Option<String> {
    let pod = pods.get(&names::pod(GROUP, site)).await.expect("site pod");
    pod.metadata.labels?.remove(names::LABEL_ROLE)
}

impl Cluster {
    /// A cluster with the CRDs, the playground namespace and group polled every `interval`.
    async fn with_group(interval: &str) -> Cluster {
        let cluster = Cluster::start().await;
        cluster.crds().await;
        cluster.namespace(NAMESPACE).await;
        cluster.group(None, interval).await;
        cluster
    }

    async fn token(&self, namespace: &str, service_account: &str, audience: &str) -> String {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": service_account}}))
                .expect("service account");
        match api.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => panic!("create service account: {error}"),
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![audience.to_string()],
                expiration_seconds: Some(3600),
                bound_object_ref: None,
            },
            ..TokenRequest::default()
        };
        api.create_token_request(service_account, &PostParams::default(), &request)
            .await
            .expect("token request")
            .status
            .expect("token status")
            .token
    }

    /// The playground group (with a status when `generation` is given).
    async fn group(&self, status_generation: Option<u64>, poll_interval: &str) {
        let api: Api<MysqlFailoverGroup> = Api::namespaced(self.client.clone(), NAMESPACE);
        let group: MysqlFailoverGroup = serde_json::from_value(json!({
            "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
            "metadata": {"name": GROUP, "namespace": NAMESPACE},
            "spec": {
                "image": "mariadb:10.11",
                "sites": [
                    {"name": "iad", "role": "read-write"},
                    {"name": "pdx", "role": "read-write"},
                    {"name": "reader", "role": "read-only"}
                ],
                "initialActiveSite": "iad",
                "pollInterval": poll_interval,
                "maxLagSeconds": 30,
                "failoverCooldown": "30s",
                "dns": {"hostname": "playground-db.example.local", "ttl": 10}
            }
        }))
        .expect("group");
        api.create(&PostParams::default(), &group)
            .await
            .expect("create group");
        if let Some(generation) = status_generation {
            self.set_generation(generation).await;
        }
    }

    async fn set_generation(&self, generation: u64) {
        let api: Api<MysqlFailoverGroup> = Api::namespaced(self.client.clone(), NAMESPACE);
        let site = |name: &str, writable: bool, replicating: bool| json!({"name": name, "reachable": true, "writable": writable, "replicating": replicating});
        let status = json!({"status": {
            "activeSite": "iad", "topologyGeneration": generation,
            "authority": {"state": "Valid"},
            "sites": [site("iad", true, false), site("pdx", false, true), site("reader", false, true)]
        }});
        api.patch_status(GROUP, &PatchParams::default(), &Patch::Merge(status))
            .await
            .expect("patch status");
    }

    async fn group_object(&self) -> MysqlFailoverGroup {
        let api: Api<MysqlFailoverGroup> = Api::namespaced(self.client.clone(), NAMESPACE);
        api.get(GROUP).await.expect("get group")
    }
}

/// docs/design/requirements.md R003.4: the operator checks a projected token with a real
/// TokenReview: audience `bloodraven-deploy` authenticates the ServiceAccount; the API server's
/// default audience (or any other) does not.
#[tokio::test]
async fn seed_003_token_review_against_localkube() {
    let cluster = Cluster::start().await;
    cluster.namespace("ci").await;
    let reviewer = KubeTokenReviewer::new(cluster.client.clone());

    let token = cluster
        .token("ci", "deployer", names::DEPLOY_AUDIENCE)
        .await;
    let caller = reviewer
        .review(&token)
        .await
        .expect("review")
        .expect("accepted");
    assert_eq!(
        (caller.namespace.as_str(), caller.service_account.as_str()),
        ("ci", "deployer")
    );

    let other_audience = cluster.token("ci", "deployer", "vault").await;
    let rejected = reviewer.review(&other_audience).await.expect("review");
    assert!(
        matches!(rejected, Err(Rejection::NotAuthenticated(_))),
        "{rejected:?}"
    );
    let garbage = reviewer.review("not-a-token").await.expect("review");
    assert!(
        matches!(garbage, Err(Rejection::NotAuthenticated(_))),
        "{garbage:?}"
    );
    cluster.stop().await;
}

/// docs/design/requirements.md R003 end to end over TLS: a MysqlDatabase authorizes
/// ci/deployer; POST stores a Lease `bloodraven-deploy-playground-migration` (token hash only);
/// a topologyGeneration bump revokes it (409 revoked, TopologyChanged), deletes the Lease,
/// writes the tombstone ConfigMap and raises DeploymentLeaseRevoked.
#[tokio::test]
async fn seed_003_deploy_api_end_to_end_on_localkube() {
    let cluster = Cluster::start().await;
    cluster.crds().await;
    cluster.namespace(NAMESPACE).await;
    cluster.namespace("ci").await;
    cluster.group(Some(17), "2s").await;
    let databases: Api<MysqlDatabase> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let database: MysqlDatabase = serde_json::from_value(json!({
        "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlDatabase",
        "metadata": {"name": "counter-app", "namespace": NAMESPACE},
        "spec": {"failoverGroupRef": {"name": GROUP}, "database": "counter",
                 "deploymentClients": [{"namespace": "ci", "serviceAccount": "deployer"}]}
    }))
    .expect("database");
    databases
        .create(&PostParams::default(), &database)
        .await
        .expect("create database");
    let token = cluster
        .token("ci", "deployer", names::DEPLOY_AUDIENCE)
        .await;
    let stranger = cluster
        .token("ci", "stranger", names::DEPLOY_AUDIENCE)
        .await;

    let lock = bloodraven_operator::hold_gate::HoldGates::new_lock();
    let store = LeaseStore::with_lock(cluster.client.clone(), lock.clone());
    let reporter = Reporter {
        controller: "bloodraven".into(),
        instance: Some("test".into()),
    };
    let api = DeployApi {
        leader: LeaderFlag::new(true),
        reviewer: Arc::new(KubeTokenReviewer::new(cluster.client.clone())),
        backend: Arc::new(KubeBackend::new(cluster.client.clone(), store, reporter)),
        lock,
        clock: Arc::new(wall_clock),
        tokens: Arc::new(random_token),
        metrics: Metrics::new(),
    };
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let cert_pem = certified.cert.pem();
    let config = bloodraven_operator::tls::server_config(
        cert_pem.as_bytes(),
        certified.key_pair.serialize_pem().as_bytes(),
    )
    .expect("tls config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (stop, stopped) = watch::channel(false);
    let server = tokio::spawn(bloodraven_operator::tls::serve_listener(
        listener,
        config,
        deploy_router(api),
        stopped,
    ));
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).expect("root"))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    let base = format!("https://localhost:{port}/deploy/v1/groups/{GROUP}");

    let view: Value = http
        .get(&base)
        .bearer_auth(&token)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(view["activeSite"], "iad");
    assert_eq!(view["topologyGeneration"], 17);
    assert_eq!(view["stable"], true, "{view}");
    assert_eq!(view["leases"], json!([]));

    let refused = http
        .get(&base)
        .bearer_auth(&stranger)
        .send()
        .await
        .expect("get");
    assert_eq!(refused.status().as_u16(), 403);

    let response = http
        .post(format!("{base}/leases"))
        .bearer_auth(&token)
        .json(&json!({"kind": "migration", "operationId": "a1c3f0e2", "instance": "counter-app", "ttlSeconds": 30}))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status().as_u16(), 201);
    let granted: Value = response.json().await.expect("json");
    let lease_token = granted["token"].as_str().expect("token").to_string();

    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let stored = leases
        .get("bloodraven-deploy-playground-migration")
        .await
        .expect("lease object");
    let annotations = stored.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("bloodraven.shipstream.io/deploy-operation-id")
            .map(String::as_str),
        Some("a1c3f0e2")
    );
    let stored_text = serde_json::to_string(&stored).expect("encode");
    assert!(
        !stored_text.contains(&lease_token),
        "the token itself is never stored"
    );

    cluster.set_generation(18).await;
    let response = http
        .put(format!("{base}/leases"))
        .bearer_auth(&token)
        .json(&json!({"kind": "migration", "operationId": "a1c3f0e2", "token": lease_token}))
        .send()
        .await
        .expect("put");
    assert_eq!(response.status().as_u16(), 409);
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        body,
        json!({"error": "revoked", "operationId": "a1c3f0e2", "reason": "TopologyChanged", "topologyGeneration": 18})
    );
    assert!(leases
        .get_opt("bloodraven-deploy-playground-migration")
        .await
        .expect("get")
        .is_none());
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let tombstones = config_maps
        .get("bloodraven-deploy-playground-tombstones")
        .await
        .expect("tombstones");
    assert!(tombstones
        .data
        .unwrap_or_default()
        .contains_key("migration.a1c3f0e2"));

    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), NAMESPACE);
    let raised = eventually(5, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|event| event.reason.as_deref() == Some("DeploymentLeaseRevoked"))
            .then_some(())
    })
    .await;
    assert!(raised.is_some(), "DeploymentLeaseRevoked event raised");

    let _ = stop.send(true);
    let _ = server.await;
    cluster.stop().await;
}

/// docs/design/requirements.md R001.9: with leader election, exactly one replica leads; when it
/// stops (releasing the Lease) a standby takes over.
#[tokio::test]
async fn seed_001_one_leader_and_a_standby_takes_over() {
    let cluster = Cluster::start().await;
    cluster.namespace(names::OPERATOR_NAMESPACE).await;
    let timings = ElectionTimings {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(100),
    };
    let (first_flag, second_flag) = (LeaderFlag::new(false), LeaderFlag::new(false));
    let (stop_first, first_stopped) = watch::channel(false);
    let (stop_second, second_stopped) = watch::channel(false);
    let first = tokio::spawn(run_election(
        cluster.client.clone(),
        names::OPERATOR_NAMESPACE,
        names::LEADER_LEASE,
        "replica-a",
        timings,
        first_flag.clone(),
        first_stopped,
    ));
    let led = eventually(5, || async { first_flag.is_leader().then_some(()) }).await;
    assert!(led.is_some(), "the first replica leads");
    let second = tokio::spawn(run_election(
        cluster.client.clone(),
        names::OPERATOR_NAMESPACE,
        names::LEADER_LEASE,
        "replica-b",
        timings,
        second_flag.clone(),
        second_stopped,
    ));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        first_flag.is_leader() && !second_flag.is_leader(),
        "the second is a standby"
    );

    let _ = stop_first.send(true);
    let _ = first.await;
    let took_over = eventually(5, || async { second_flag.is_leader().then_some(()) }).await;
    assert!(took_over.is_some(), "the standby takes over");
    assert!(!first_flag.is_leader());
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), names::OPERATOR_NAMESPACE);
    let lease = leases.get(names::LEADER_LEASE).await.expect("leader lease");
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
    assert_eq!(spec.lease_transitions, Some(1));
    let _ = stop_second.send(true);
    let _ = second.await;
    cluster.stop().await;
}

/// What the fake sidecars remember.
#[derive(Default)]
struct FakeState {
    /// Cached authority per site.
    authority: BTreeMap<String, Authority>,
    /// Replication source per site (absent: detached or never repointed).
    source: BTreeMap<String, String>,
    /// Sites whose sidecar answers 503 to everything (the site is down).
    down: BTreeSet<String>,
    /// Explicit fences: site -> generation fenced under.
    fenced: BTreeMap<String, u64>,
    /// Every `POST /v1/databases` received: (site, database), in order.
    database_requests: Vec<(String, String)>,
    /// Schemas created (replicated everywhere at once).
    schemas: BTreeSet<String>,
    /// How many of the next database requests answer 503.
    database_failures: usize,
}

/// Fake sidecars of the three sites: they cache the pushed authority (monotonic rule), are
/// writable and hold the lease while it names them and no fence is in force, replicate from
/// where they were repointed, detach on promote, report an old last grant to every site
/// (so a lease wait ends on the peers' evidence), and create a schema only while writable
/// (409 otherwise), logging every database request.
#[derive(Clone, Default)]
struct FakeSidecars(Arc<Mutex<FakeState>>);

type Answer<T> = Result<Json<T>, axum::http::StatusCode>;

impl FakeSidecars {
    fn set_down(&self, site: &str, down: bool) {
        if let Ok(mut state) = self.0.lock() {
            if down {
                state.down.insert(site.to_string());
            } else {
                state.down.remove(site);
            }
        }
    }

    /// Every database request received so far: (site, database).
    fn database_requests(&self) -> Vec<(String, String)> {
        self.0
            .lock()
            .map(|state| state.database_requests.clone())
            .unwrap_or_default()
    }

    /// Makes the next `count` database requests answer 503.
    fn fail_database_requests(&self, count: usize) {
        if let Ok(mut state) = self.0.lock() {
            state.database_failures = count;
        }
    }

    /// `POST /v1/databases` of `site`.
    fn ensure_database(
        &self,
        site: &str,
        request: EnsureDatabaseRequest,
    ) -> Result<EnsureDatabaseResponse, axum::http::StatusCode> {
        if let Ok(mut state) = self.0.lock() {
            state
                .database_requests
                .push((site.to_string(), request.database.clone()));
        }
        self.up(site)?;
        let writable = !self.status(site).fenced;
        let mut state = self.0.lock().expect("lock");
        if state.database_failures > 0 {
            state.database_failures -= 1;
            return Err(axum::http::StatusCode::SERVICE_UNAVAILABLE);
        }
        if !writable || request.group != GROUP {
            return Err(axum::http::StatusCode::CONFLICT);
        }
        let outcome = if state.schemas.insert(request.database.clone()) {
            DatabaseOutcome::Created
        } else {
            DatabaseOutcome::AlreadyExisted
        };
        Ok(EnsureDatabaseResponse {
            database: request.database,
            outcome,
            read_only: Some(false),
        })
    }

    fn up(&self, site: &str) -> Result<(), axum::http::StatusCode> {
        let down = self
            .0
            .lock()
            .map(|state| state.down.contains(site))
            .unwrap_or(true);
        if down {
            Err(axum::http::StatusCode::SERVICE_UNAVAILABLE)
        } else {
            Ok(())
        }
    }

    /// Applies `change` to the state of an up sidecar and reports what MySQL looks like after.
    fn mutate(
        &self,
        site: &str,
        change: impl FnOnce(&mut FakeState),
    ) -> Result<MutationReport, axum::http::StatusCode> {
        self.up(site)?;
        change(&mut self.0.lock().expect("lock"));
        Ok(MutationReport {
            error: None,
            observed: self.status(site).mysql,
        })
    }

    fn status(&self, site: &str) -> SidecarStatus {
        let state = self.0.lock().expect("lock");
        let authority = state.authority.get(site).cloned();
        let named = authority.as_ref().and_then(|a| a.active_site.as_deref()) == Some(site);
        let fence_lifted = match (state.fenced.get(site), authority.as_ref()) {
            (Some(fenced_under), Some(authority)) => authority.topology_generation > *fenced_under,
            (Some(_), None) => false,
            (None, _) => true,
        };
        let active = named && fence_lifted;
        let source = state.source.get(site).cloned();
        let observation = MysqlObservation {
            reachable: true,
            error: None,
            down: false,
            read_only: Some(!active),
            gtid_executed: Some("0-1-10".into()),
            replication: source.filter(|_| !named).map(|host| ReplicationState {
                running: true,
                source_host: Some(host),
                source_port: Some(3306),
                seconds_behind_source: Some(0),
                last_error: None,
            }),
            mysqld: Some(MysqldRun {
                server_id: site.into(),
                uptime_seconds: 100,
                started_at: Timestamp::from_unix_millis(1_000_000),
            }),
        };
        SidecarStatus {
            group: GROUP.into(),
            site: site.into(),
            observed_at: wall_clock(),
            mysql: observation,
            fenced: !active,
            fence: None,
            lease: LeaseState {
                held: active,
                remaining_ms: if active { 600 } else { 0 },
            },
            authority,
            known_generation: None,
            latest_authority: None,
            last_granted_ago_ms: ["iad", "pdx", "reader"]
                .into_iter()
                .map(|site| (site.to_string(), 60_000))
                .collect(),
            backups: Vec::new(),
            job: None,
            runtime: None,
        }
    }

    fn router(self) -> Router {
        Router::new()
            .route(
                "/{site}/v1/status",
                get(
                    |State(fake): State<FakeSidecars>, Path(site): Path<String>| async move {
                        fake.up(&site)?;
                        Answer::Ok(Json(fake.status(&site)))
                    },
                ),
            )
            .route(
                "/{site}/v1/authority",
                put(
                    |State(fake): State<FakeSidecars>,
                     Path(site): Path<String>,
                     Json(pushed): Json<Authority>| async move {
                        fake.up(&site)?;
                        let mut state = fake.0.lock().expect("lock");
                        let decision = pushed.decide_against(GROUP, state.authority.get(&site));
                        if decision == AuthorityDecision::Accepted {
                            state.authority.insert(site.clone(), pushed);
                        }
                        Answer::Ok(Json(AuthorityResponse {
                            decision,
                            cached: state.authority.get(&site).cloned(),
                            last_granted_ago_ms: BTreeMap::new(),
                        }))
                    },
                ),
            )
            .route(
                "/{site}/v1/repoint",
                post(
                    |State(fake): State<FakeSidecars>,
                     Path(site): Path<String>,
                     Json(request): Json<RepointRequest>| async move {
                        let repoint = fake.mutate(&site, |state| {
                            state.source.insert(site.clone(), request.source_host);
                        })?;
                        Answer::Ok(Json(RepointResponse { repoint }))
                    },
                ),
            )
            .route(
                "/{site}/v1/promote",
                post(
                    |State(fake): State<FakeSidecars>,
                     Path(site): Path<String>,
                     Json(_request): Json<PromoteRequest>| async move {
                        let detach = fake.mutate(&site, |state| {
                            state.source.remove(&site);
                        })?;
                        Answer::Ok(Json(PromoteResponse {
                            drained: true,
                            detach,
                        }))
                    },
                ),
            )
            .route(
                "/{site}/v1/databases",
                post(
                    |State(fake): State<FakeSidecars>,
                     Path(site): Path<String>,
                     Json(request): Json<EnsureDatabaseRequest>| async move {
                        Answer::Ok(Json(fake.ensure_database(&site, request)?))
                    },
                ),
            )
            .route(
                "/{site}/v1/fence",
                post(
                    |State(fake): State<FakeSidecars>,
                     Path(site): Path<String>,
                     Json(request): Json<FenceRequest>| async move {
                        let read_only = fake.mutate(&site, |state| {
                            state
                                .fenced
                                .insert(site.clone(), request.topology_generation);
                        })?;
                        Answer::Ok(Json(FenceResponse {
                            fence: FenceState {
                                topology_generation: request.topology_generation,
                                reason: request.reason,
                            },
                            read_only,
                            killed_connections: Some(0),
                        }))
                    },
                ),
            )
            .with_state(self)
    }
}

/// Starts the fake sidecars on a loopback port; returns them, the URL template and the task.
async fn fake_sidecars() -> (FakeSidecars, String, tokio::task::JoinHandle<()>) {
    let fake = FakeSidecars::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let router = fake.clone().router();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (fake, format!("http://127.0.0.1:{port}/{{site}}"), task)
}

/// The three site pods, on their nodes, tolerating the demotion taint (so localkube's
/// taint-eviction controller keeps them for the label checks).
async fn site_pods(cluster: &Cluster) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    for site in ["iad", "pdx", "reader"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": names::pod(GROUP, site), "labels": {names::LABEL_INSTANCE: GROUP, names::LABEL_SITE: site}},
            "spec": {
                "nodeName": site,
                "tolerations": [{"key": names::TAINT_DEMOTED, "operator": "Exists", "effect": "NoExecute"}],
                "containers": [{"name": "mysql", "image": "mariadb:10.11"}, {"name": "sidecar", "image": "bloodraven:dev"}]
            }
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
    }
    pods
}

fn shell(cluster: &Cluster, template: &str) -> Shell {
    Shell {
        client: cluster.client.clone(),
        sidecars: SidecarClient::new(SidecarAddressing::new(template)).expect("sidecars"),
        store: LeaseStore::new(cluster.client.clone()),
        recorder: Shell::recorder(
            &cluster.client,
            Reporter {
                controller: "bloodraven".into(),
                instance: Some("test".into()),
            },
        ),
        metrics: Metrics::new(),
        leader: LeaderFlag::new(true),
        board: MemoryBoard::new(),
        databases: Default::default(),
        undecodable: Default::default(),
    }
}

/// Polls until `done` holds on the group (at most `polls` polls, `interval` apart).
async fn poll_until(
    cluster: &Cluster,
    shell: &Shell,
    memory: &mut Option<bloodraven_core::GroupMemory>,
    polls: usize,
    interval: Duration,
    done: impl Fn(&MysqlFailoverGroup) -> bool,
) -> MysqlFailoverGroup {
    let mut group = cluster.group_object().await;
    for _ in 0..polls {
        if done(&group) {
            return group;
        }
        *memory = shell.poll(&group, memory.take()).await;
        tokio::time::sleep(interval).await;
        group = cluster.group_object().await;
    }
    group
}

fn valid_on(group: &MysqlFailoverGroup, site: &str) -> bool {
    group.status.as_ref().is_some_and(|status| {
        status.active_site.as_deref() == Some(site)
            && status.authority.as_ref().map(|a| a.state)
                == Some(bloodraven_api::AuthorityState::Valid)
    })
}

fn selector(service: &Service) -> BTreeMap<String, String> {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.selector.clone())
        .unwrap_or_default()
}

/// docs/design/requirements.md R000.2-R000.13 + docs/design/architecture.md#one-poll: polls
/// against localkube and fake sidecars bootstrap the group: 8 Services with exact selectors,
/// authority Valid at generation 1, the active pod labelled primary, the DNSEndpoint applied by
/// SSA (field manager bloodraven) with the active site's ClusterIP; a hand-edited target is
/// corrected by a later poll.
#[tokio::test]
async fn seed_000_polls_bootstrap_the_group_on_localkube() {
    let cluster = Cluster::with_group("2s").await;
    let pods = site_pods(&cluster).await;
    let (_fake, template, sidecar_server) = fake_sidecars().await;
    let shell = shell(&cluster, &template);
    let mut memory = None;
    for _ in 0..4 {
        let group = cluster.group_object().await;
        memory = shell.poll(&group, memory.take()).await;
    }

    let services: Api<Service> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let listed = services.list(&Default::default()).await.expect("services");
    let ours: Vec<&Service> = listed
        .items
        .iter()
        .filter(|service| {
            service
                .metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with("mysql-playground-"))
        })
        .collect();
    assert_eq!(ours.len(), 8, "2 x sites + 2");
    let primary = services
        .get("mysql-playground-primary")
        .await
        .expect("primary");
    assert_eq!(selector(&primary).len(), 2);
    assert_eq!(
        selector(&primary)
            .get(names::LABEL_ROLE)
            .map(String::as_str),
        Some("primary")
    );
    assert_eq!(
        primary
            .spec
            .as_ref()
            .and_then(|s| s.publish_not_ready_addresses),
        Some(false)
    );
    let replicas = services
        .get("mysql-playground-replicas")
        .await
        .expect("replicas");
    assert_eq!(selector(&replicas).len(), 3);
    let iad = services.get("mysql-playground-iad").await.expect("iad");
    assert_eq!(
        iad.spec
            .as_ref()
            .and_then(|s| s.publish_not_ready_addresses),
        Some(true)
    );
    let iad_ip = iad
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .expect("cluster ip");

    // Ensure workloads: per site a StatefulSet governed by its -hl Service, and the
    // credentials Secret (docs/design/architecture.md#names).
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    for site in ["iad", "pdx", "reader"] {
        let set = sets
            .get(&format!("mysql-playground-{site}"))
            .await
            .expect("statefulset");
        let spec = set.spec.as_ref().expect("statefulset spec");
        let governing = format!("mysql-playground-{site}-hl");
        assert_eq!(spec.service_name.as_deref(), Some(governing.as_str()));
        assert_eq!(spec.replicas, Some(1));
        let headless = services.get(&governing).await.expect("-hl service");
        assert_eq!(
            headless.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()),
            Some("None"),
            "{site}: headless"
        );
        assert_eq!(
            live_mysql_image(&set),
            Some("mariadb:10.11"),
            "{site}: spec.image"
        );
    }
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let secret = secrets
        .get("mysql-playground-credentials")
        .await
        .expect("credentials secret");
    let keys: BTreeSet<String> = secret
        .data
        .unwrap_or_default()
        .into_keys()
        .chain(secret.string_data.unwrap_or_default().into_keys())
        .collect();
    assert!(keys.contains("root-password") && keys.contains("replication-password"));
    let version = sets
        .get("mysql-playground-iad")
        .await
        .expect("statefulset")
        .metadata
        .resource_version;

    let group = cluster.group_object().await;
    let status = group.status.clone().expect("status written");
    assert_eq!(status.topology_generation, 1);
    assert_eq!(status.active_site.as_deref(), Some("iad"));
    assert_eq!(
        status.authority.as_ref().map(|a| a.state),
        Some(bloodraven_api::AuthorityState::Valid),
        "{status:?}"
    );
    assert!(status.sites.iter().all(|site| site.last_seen.is_some()));

    let iad_pod = pods.get(&names::pod(GROUP, "iad")).await.expect("iad pod");
    let labels = iad_pod.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get(names::LABEL_ROLE).map(String::as_str),
        Some("primary")
    );
    assert_eq!(
        labels.get(names::LABEL_HEALTHY).map(String::as_str),
        Some("yes")
    );
    assert_eq!(role_of(&pods, "pdx").await.as_deref(), Some("replica"));

    let endpoints: Api<DNSEndpoint> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let record = endpoints
        .get("bloodraven-playground")
        .await
        .expect("dnsendpoint");
    assert_eq!(record.spec.endpoints[0].targets, vec![iad_ip.clone()]);
    assert_eq!(record.spec.endpoints[0].record_ttl, Some(10));
    let managers: Vec<String> = record
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .collect();
    assert!(managers.iter().any(|m| m == "bloodraven"), "{managers:?}");

    // A hand edit of the target is corrected by the next poll (re-derived, read back, applied).
    endpoints
        .patch(
            "bloodraven-playground",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({
                "apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
                "metadata": {"name": "bloodraven-playground"},
                "spec": {"endpoints": [{"dnsName": "playground-db.example.local", "recordType": "A", "recordTTL": 10, "targets": ["10.0.0.99"]}]}
            })),
        )
        .await
        .expect("hand edit");
    let group = cluster.group_object().await;
    let _ = shell.poll(&group, memory.take()).await;
    let record = endpoints
        .get("bloodraven-playground")
        .await
        .expect("dnsendpoint");
    assert_eq!(record.spec.endpoints[0].targets, vec![iad_ip]);

    // Last, as it recreates pdx's pod (which then has no labels until the next poll):
    // a changed spec.image starts the ordered update (core, docs/design/history.md#issue-12),
    // replicas first: the active site's StatefulSet keeps its live image, and a poll re-applies
    // it unchanged, without a new resourceVersion.
    let groups: Api<MysqlFailoverGroup> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    groups
        .patch(
            GROUP,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": "mariadb:11.4"}})),
        )
        .await
        .expect("change spec.image");
    let group = cluster.group_object().await;
    let _polled = shell.poll(&group, memory.take()).await;
    let iad = sets.get("mysql-playground-iad").await.expect("statefulset");
    assert_eq!(
        live_mysql_image(&iad),
        Some("mariadb:10.11"),
        "the active site is not rolled first"
    );
    assert_eq!(iad.metadata.resource_version, version, "SSA is idempotent");
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), NAMESPACE);
    let raised = eventually(5, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|event| event.reason.as_deref() == Some("OrderedUpdateStarted"))
            .then_some(())
    })
    .await;
    assert!(raised.is_some(), "OrderedUpdateStarted event raised");

    sidecar_server.abort();
    cluster.stop().await;
}

/// Reads a node's taints.
async fn taints(cluster: &Cluster, node: &str) -> Vec<k8s_openapi::api::core::v1::Taint> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let node = nodes.get(node).await.expect("node");
    node.spec.and_then(|spec| spec.taints).unwrap_or_default()
}

/// docs/design/requirements.md R001.9, R003.20 + docs/design/architecture.md#one-poll: the
/// active site dies; after the detection floor the poll loop announces the move, waits for the
/// peers' lease evidence, drains and promotes pdx, bumps topologyGeneration (revoking every
/// deploy lease, TopologyChanged, with a DeploymentLeaseRevoked Event), taints iad's node
/// NoExecute (never the reader's), stamps iad's pod fenced, moves the DNS record to pdx's
/// ClusterIP and records lastFailover.
#[tokio::test]
async fn seed_001_emergency_failover_through_the_poll_loop_on_localkube() {
    let cluster = Cluster::with_group("100ms").await;
    let pods = site_pods(&cluster).await;
    let (fake, template, sidecar_server) = fake_sidecars().await;
    let shell = shell(&cluster, &template);
    let mut memory = None;
    let interval = Duration::from_millis(100);
    let group = poll_until(&cluster, &shell, &mut memory, 20, interval, |group| {
        valid_on(group, "iad")
    })
    .await;
    assert!(valid_on(&group, "iad"), "bootstrapped: {:?}", group.status);
    let generation = group
        .status
        .as_ref()
        .map(|s| s.topology_generation)
        .unwrap_or(0);

    // A live deploy lease granted under the current generation.
    let store = LeaseStore::new(cluster.client.clone());
    let record = bloodraven_core::deploy::LeaseRecord {
        kind: bloodraven_core::deploy::LeaseKind::Migration,
        operation_id: "a1".into(),
        instance: "counter-app".into(),
        token_hash: bloodraven_core::deploy::LeaseToken::new("t").hash(),
        granted_at: wall_clock(),
        expires_at: wall_clock() + Duration::from_secs(120),
        ttl: Duration::from_secs(120),
        topology_generation: generation,
    };
    let before = bloodraven_core::deploy::DeployLeases::new();
    let after = bloodraven_core::deploy::DeployLeases::from_parts([record], []).expect("leases");
    store
        .save(NAMESPACE, GROUP, &before, &after, None)
        .await
        .expect("store lease");

    fake.set_down("iad", true);
    let group = poll_until(&cluster, &shell, &mut memory, 100, interval, |group| {
        valid_on(group, "pdx")
    })
    .await;
    let status = group.status.clone().expect("status");
    assert!(valid_on(&group, "pdx"), "{status:?}");
    assert_eq!(status.topology_generation, generation + 1);
    let last = status.last_failover.clone().expect("lastFailover");
    assert_eq!(
        (last.kind, last.from.as_str(), last.to.as_str()),
        (bloodraven_api::FailoverKind::Emergency, "iad", "pdx")
    );
    assert_eq!(last.lost_transactions, 0);
    assert!(
        status.cooldown_until.is_some(),
        "cooldown starts at the promotion"
    );
    let annotations = group.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations.contains_key(names::ANNOTATION_COOLDOWN_UNTIL),
        "both cooldown copies: {annotations:?}"
    );

    let demotion = |taint: &k8s_openapi::api::core::v1::Taint| {
        taint.key == names::TAINT_DEMOTED
            && taint.value.as_deref() == Some(GROUP)
            && taint.effect == "NoExecute"
    };
    assert!(
        taints(&cluster, "iad").await.iter().any(demotion),
        "iad's node tainted"
    );
    assert!(!taints(&cluster, "pdx").await.iter().any(demotion));
    assert!(
        !taints(&cluster, "reader").await.iter().any(demotion),
        "never a read-only site"
    );

    assert_eq!(role_of(&pods, "iad").await.as_deref(), Some("fenced"));
    assert_eq!(role_of(&pods, "pdx").await.as_deref(), Some("primary"));

    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    assert!(leases
        .get_opt("bloodraven-deploy-playground-migration")
        .await
        .expect("get")
        .is_none());
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let tombstones = config_maps
        .get("bloodraven-deploy-playground-tombstones")
        .await
        .expect("tombstones");
    let tombstone = tombstones
        .data
        .unwrap_or_default()
        .get("migration.a1")
        .cloned()
        .unwrap_or_default();
    assert!(tombstone.contains("TopologyChanged"), "{tombstone}");
    // docs/design/requirements.md R003.20: the bump that revoked it raises
    // DeploymentLeaseRevoked on the group, naming the lease.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), NAMESPACE);
    let revoked_event = eventually(5, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|event| {
            event.reason.as_deref() == Some("DeploymentLeaseRevoked")
                && event.regarding.as_ref().and_then(|r| r.kind.as_deref())
                    == Some("MysqlFailoverGroup")
        })
    })
    .await
    .expect("DeploymentLeaseRevoked event raised by the poll that bumped the generation");
    let note = revoked_event.note.unwrap_or_default();
    assert!(
        note.contains("migration a1 of counter-app (TopologyChanged)"),
        "{note}"
    );

    let services: Api<Service> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let pdx_ip = services
        .get("mysql-playground-pdx")
        .await
        .expect("pdx service")
        .spec
        .and_then(|spec| spec.cluster_ip)
        .expect("cluster ip");
    let group = poll_until(&cluster, &shell, &mut memory, 5, interval, |_| false).await;
    let endpoints: Api<DNSEndpoint> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let record = endpoints
        .get("bloodraven-playground")
        .await
        .expect("dnsendpoint");
    assert_eq!(record.spec.endpoints[0].targets, vec![pdx_ip]);
    assert!(shell
        .metrics
        .encode()
        .contains("bloodraven_failovers_total{kind=\"emergency\"} 1"));
    assert!(valid_on(&group, "pdx"));

    // The `last-failover` note the promotion wrote is signed with the group's operator key
    // (the verifying half the sidecars mount verifies it) ...
    let generation_after = generation + 1;
    let value = group
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .get(names::ANNOTATION_LAST_FAILOVER)
        .cloned()
        .expect("last-failover annotation written with the promotion");
    let verifying = published(&cluster).await.expect("published verifying key");
    let reading =
        bloodraven_operator::memory::read_last_failover(&value, NAMESPACE, GROUP, Some(&verifying))
            .expect("a note")
            .expect("well formed");
    assert_eq!(
        reading.signature,
        bloodraven_core::engine::NoteSignature::Verified,
        "{value}"
    );
    assert_eq!(
        (reading.note.to.as_str(), reading.note.topology_generation),
        ("pdx", generation_after)
    );
    // ... and a hand-written note naming a newer failover back to iad (what anyone allowed
    // to annotate the group could write) is reported and not adopted: pdx stays active at
    // the same generation.
    let forged = format!("emergency pdx->iad {} generation 99", wall_clock());
    let groups: Api<MysqlFailoverGroup> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    groups
        .patch(
            GROUP,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {names::ANNOTATION_LAST_FAILOVER: forged}}
            })),
        )
        .await
        .expect("annotate");
    let group = poll_until(&cluster, &shell, &mut memory, 4, interval, |_| false).await;
    assert!(valid_on(&group, "pdx"), "{:?}", group.status);
    assert_eq!(
        group.status.as_ref().map(|s| s.topology_generation),
        Some(generation_after)
    );
    let unverified = eventually(5, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|event| event.reason.as_deref() == Some("AnnotationUnverified"))
    })
    .await
    .expect("AnnotationUnverified event for the forged note");
    let note = unverified.note.unwrap_or_default();
    assert!(
        note.contains("generation 99") && note.contains("carries no signature"),
        "{note}"
    );

    sidecar_server.abort();
    cluster.stop().await;
}

/// docs/design/requirements.md R001.12: `kubectl bloodraven promote playground pdx` only writes
/// the planned-failover annotation; the operator's poll loop then runs the planned failover
/// (Draining fences iad, Promoting, Completed) with zero lost transactions and removes the
/// annotation. `revoke-leases` writes the revoke annotation, which the next poll consumes.
#[tokio::test]
async fn seed_001_plugin_promote_is_a_request_the_poll_loop_executes() {
    let cluster = Cluster::with_group("100ms").await;
    let pods = site_pods(&cluster).await;
    let (_fake, template, sidecar_server) = fake_sidecars().await;
    let shell = shell(&cluster, &template);
    let mut memory = None;
    let interval = Duration::from_millis(100);
    let group = poll_until(
        &cluster,
        &shell,
        &mut memory,
        20,
        interval,
        bootstrapped_and_healthy,
    )
    .await;
    assert!(valid_on(&group, "iad"), "bootstrapped: {:?}", group.status);
    let generation = group
        .status
        .as_ref()
        .map(|s| s.topology_generation)
        .unwrap_or(0);

    let cli = |args: &[&str]| {
        <kubectl_bloodraven::Cli as clap::Parser>::try_parse_from(
            std::iter::once("kubectl-bloodraven").chain(args.iter().copied()),
        )
        .expect("flags")
    };
    let refused = kubectl_bloodraven::run(
        &cli(&["-n", NAMESPACE, "promote", GROUP, "reader"]),
        cluster.client.clone(),
    )
    .await;
    assert!(refused.is_err(), "a read-only site is never promoted");
    let said = kubectl_bloodraven::run(
        &cli(&["-n", NAMESPACE, "promote", GROUP, "pdx"]),
        cluster.client.clone(),
    )
    .await
    .expect("promote");
    assert!(said.contains("requested"), "{said}");
    let group = cluster.group_object().await;
    assert_eq!(
        group
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get(names::ANNOTATION_PLANNED_FAILOVER)
            .map(String::as_str),
        Some("pdx")
    );
    assert!(valid_on(&group, "iad"), "the plugin itself moved nothing");

    let group = poll_until(&cluster, &shell, &mut memory, 100, interval, |group| {
        group
            .status
            .as_ref()
            .and_then(|s| s.planned_failover.as_ref())
            .map(|p| p.phase)
            == Some(bloodraven_api::PlannedFailoverPhase::Completed)
            && valid_on(group, "pdx")
    })
    .await;
    let status = group.status.clone().expect("status");
    assert!(valid_on(&group, "pdx"), "{status:?}");
    assert_eq!(status.topology_generation, generation + 1);
    let last = status.last_failover.clone().expect("lastFailover");
    assert_eq!(
        (last.kind, last.lost_transactions),
        (bloodraven_api::FailoverKind::Planned, 0)
    );
    let group = poll_until(&cluster, &shell, &mut memory, 10, interval, |group| {
        !group
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .contains_key(names::ANNOTATION_PLANNED_FAILOVER)
    })
    .await;
    assert!(!group
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .contains_key(names::ANNOTATION_PLANNED_FAILOVER));
    assert_ne!(role_of(&pods, "iad").await.as_deref(), Some("primary"));

    let text = kubectl_bloodraven::run(
        &cli(&["-n", NAMESPACE, "status", GROUP]),
        cluster.client.clone(),
    )
    .await
    .expect("status");
    assert!(text.contains("Active site:         pdx"), "{text}");

    kubectl_bloodraven::run(
        &cli(&["-n", NAMESPACE, "revoke-leases", GROUP]),
        cluster.client.clone(),
    )
    .await
    .expect("revoke-leases");
    let group = poll_until(&cluster, &shell, &mut memory, 10, interval, |group| {
        !group
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .contains_key(names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES)
    })
    .await;
    assert!(
        !group
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES),
        "the operator consumed the revoke annotation"
    );

    sidecar_server.abort();
    cluster.stop().await;
}

/// The operator's own client: the ServiceAccount of the rendered install, bound to the
/// rendered ClusterRole (so the poll runs with exactly the documented RBAC verbs).
/// Creates one rendered install object through `api`.
async fn create_rendered<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let kind = object["kind"].clone();
    let typed: K = serde_json::from_value(object).expect("rendered object");
    api.create(&PostParams::default(), &typed)
        .await
        .unwrap_or_else(|error| panic!("create {kind}: {error}"));
}

async fn operator_client(cluster: &Cluster) -> Client {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let objects =
        bloodraven_operator::install::render(&Default::default()).expect("render install");
    let by_kind = |kind: &str| {
        objects
            .iter()
            .find(|object| object["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    cluster.namespace(names::OPERATOR_NAMESPACE).await;
    let accounts: Api<ServiceAccount> =
        Api::namespaced(cluster.client.clone(), names::OPERATOR_NAMESPACE);
    create_rendered(&accounts, by_kind("ServiceAccount")).await;
    create_rendered(
        &Api::<ClusterRole>::all(cluster.client.clone()),
        by_kind("ClusterRole"),
    )
    .await;
    create_rendered(
        &Api::<ClusterRoleBinding>::all(cluster.client.clone()),
        by_kind("ClusterRoleBinding"),
    )
    .await;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        },
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(names::OPERATOR_DEPLOYMENT, &PostParams::default(), &request)
        .await
        .expect("token")
        .status
        .expect("token status")
        .token;
    let kubeconfig = Kubeconfig::read_from(cluster.kubeconfig_path()).expect("kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    // The token alone: the admin kubeconfig's client certificate would authenticate first.
    config.auth_info = AuthInfo {
        token: Some(token.into()),
        ..AuthInfo::default()
    };
    Client::try_from(config).expect("operator client")
}

/// Sets the verbs of the rendered ClusterRole's dnsendpoints rule.
async fn dns_verbs(cluster: &Cluster, verbs: &[&str]) {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let roles: Api<ClusterRole> = Api::all(cluster.client.clone());
    let mut role = roles.get(names::OPERATOR_DEPLOYMENT).await.expect("role");
    for rule in role.rules.iter_mut().flatten() {
        if rule
            .resources
            .as_ref()
            .is_some_and(|r| r.iter().any(|x| x == "dnsendpoints"))
        {
            rule.verbs = verbs.iter().map(|verb| verb.to_string()).collect();
        }
    }
    roles
        .replace(names::OPERATOR_DEPLOYMENT, &PostParams::default(), &role)
        .await
        .expect("replace role");
}

/// Chaos scenario 38 (docs/design/requirements.md R000.16), through the poll loop running with
/// the rendered RBAC: deny the operator create/update/patch on dnsendpoints and kill the
/// primary: the group promotes correctly while the DNS target stays stale; give the verbs back
/// and a later poll heals the record (nothing replayed from memory, never a superseded target).
#[tokio::test]
async fn seed_000_scenario_38_denied_dns_write_heals_on_a_later_poll() {
    let cluster = Cluster::with_group("100ms").await;
    site_pods(&cluster).await;
    let (fake, template, sidecar_server) = fake_sidecars().await;
    let mut shell = shell(&cluster, &template);
    shell.client = operator_client(&cluster).await;
    shell.store = LeaseStore::new(shell.client.clone());
    shell.recorder = Shell::recorder(
        &shell.client,
        Reporter {
            controller: "bloodraven".into(),
            instance: Some("test".into()),
        },
    );
    let mut memory = None;
    let interval = Duration::from_millis(100);
    let endpoints: Api<DNSEndpoint> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let cluster_ip = |site: &'static str| {
        let services = services.clone();
        async move {
            services
                .get(&names::site_service(GROUP, site))
                .await
                .ok()
                .and_then(|service| service.spec)
                .and_then(|spec| spec.cluster_ip)
        }
    };
    let target = || async {
        endpoints
            .get_opt("bloodraven-playground")
            .await
            .ok()
            .flatten()
            .and_then(|record| {
                record
                    .spec
                    .endpoints
                    .first()
                    .and_then(|e| e.targets.first().cloned())
            })
    };

    let group = poll_until(&cluster, &shell, &mut memory, 30, interval, |group| {
        valid_on(group, "iad")
    })
    .await;
    assert!(
        valid_on(&group, "iad"),
        "bootstrapped with the rendered RBAC: {:?}",
        group.status
    );
    let _ = poll_until(&cluster, &shell, &mut memory, 2, interval, |_| false).await;
    let iad_ip = cluster_ip("iad").await.expect("iad ip");
    assert_eq!(target().await, Some(iad_ip.clone()));

    dns_verbs(&cluster, &["get", "list", "watch"]).await;
    fake.set_down("iad", true);
    let group = poll_until(&cluster, &shell, &mut memory, 100, interval, |group| {
        valid_on(group, "pdx")
    })
    .await;
    assert!(
        valid_on(&group, "pdx"),
        "the CR promotes correctly: {:?}",
        group.status
    );
    let _ = poll_until(&cluster, &shell, &mut memory, 5, interval, |_| false).await;
    assert_eq!(
        target().await,
        Some(iad_ip),
        "the DNS target stays stale while writes are denied"
    );

    dns_verbs(
        &cluster,
        &["get", "list", "watch", "create", "update", "patch"],
    )
    .await;
    let pdx_ip = cluster_ip("pdx").await.expect("pdx ip");
    let _ = poll_until(&cluster, &shell, &mut memory, 3, interval, |_| false).await;
    assert_eq!(
        target().await,
        Some(pdx_ip),
        "a later poll heals the record"
    );

    sidecar_server.abort();
    cluster.stop().await;
}

/// docs/design/requirements.md R001.9: a standby keeps no memory and writes nothing: its group
/// loop idles until it leads, then the first poll writes status.
#[tokio::test]
async fn seed_001_a_standby_writes_nothing_until_it_leads() {
    let cluster = Cluster::with_group("100ms").await;
    let (_fake, template, sidecar_server) = fake_sidecars().await;
    let mut shell = shell(&cluster, &template);
    shell.leader = LeaderFlag::new(false);
    let (stop, stopped) = watch::channel(false);
    let runner = shell.clone();
    let task = tokio::spawn(async move {
        runner
            .run_group(NAMESPACE.to_string(), GROUP.to_string(), stopped)
            .await
    });
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        cluster.group_object().await.status.is_none(),
        "a standby wrote status"
    );
    shell.leader.set(true);
    let written = eventually(10, || async { cluster.group_object().await.status }).await;
    assert!(written.is_some(), "the new leader polls");
    let _ = stop.send(true);
    let _ = task.await;
    sidecar_server.abort();
    cluster.stop().await;
}

/// docs/design/requirements.md R003.16: a planned failover requested while a failover-hold is
/// live lands in Deferred with deferReason DeploymentHold, retryTime = the hold's expiry and a
/// message naming the operation and instance; once the hold is released it proceeds on its own.
#[tokio::test]
async fn seed_003_a_live_hold_defers_the_planned_failover_until_released() {
    use bloodraven_core::deploy::{DeployLeases, LeaseKind, LeaseRecord, LeaseToken};
    let cluster = Cluster::with_group("100ms").await;
    site_pods(&cluster).await;
    let (_fake, template, sidecar_server) = fake_sidecars().await;
    let shell = shell(&cluster, &template);
    let mut memory = None;
    let interval = Duration::from_millis(100);
    let group = poll_until(
        &cluster,
        &shell,
        &mut memory,
        20,
        interval,
        bootstrapped_and_healthy,
    )
    .await;
    let generation = group
        .status
        .as_ref()
        .map(|s| s.topology_generation)
        .unwrap_or(0);

    let now = wall_clock();
    let ttl = Duration::from_secs(60);
    let lease = |kind| LeaseRecord {
        kind,
        operation_id: "a1c3f0e2".into(),
        instance: "counter-app".into(),
        token_hash: LeaseToken::new("t").hash(),
        granted_at: now,
        expires_at: now + ttl,
        ttl,
        topology_generation: generation,
    };
    let held = DeployLeases::from_parts(
        [lease(LeaseKind::Migration), lease(LeaseKind::FailoverHold)],
        [],
    )
    .expect("leases");
    shell
        .store
        .save(NAMESPACE, GROUP, &DeployLeases::new(), &held, None)
        .await
        .expect("store hold");

    let groups: Api<MysqlFailoverGroup> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    groups
        .patch(
            GROUP,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {names::ANNOTATION_PLANNED_FAILOVER: "pdx"}}}),
            ),
        )
        .await
        .expect("request planned failover");
    let phase = |group: &MysqlFailoverGroup| {
        group
            .status
            .as_ref()
            .and_then(|s| s.planned_failover.clone())
    };
    let group = poll_until(&cluster, &shell, &mut memory, 20, interval, |group| {
        phase(group).is_some_and(|p| p.phase == bloodraven_api::PlannedFailoverPhase::Deferred)
    })
    .await;
    let planned = phase(&group).expect("planned failover status");
    assert_eq!(
        planned.phase,
        bloodraven_api::PlannedFailoverPhase::Deferred,
        "{planned:?}"
    );
    assert_eq!(
        planned.admission.defer_reason,
        Some(bloodraven_api::DeferReason::DeploymentHold)
    );
    assert_eq!(planned.admission.retry_time, Some(now + ttl));
    let message = planned.admission.message.clone().unwrap_or_default();
    assert!(
        message.contains("a1c3f0e2") && message.contains("counter-app"),
        "{message}"
    );
    assert!(valid_on(&group, "iad"), "nothing moved while held");
    assert!(shell
        .metrics
        .encode()
        .contains("bloodraven_planned_failovers_deferred_total 1"));

    let released = DeployLeases::from_parts([lease(LeaseKind::Migration)], []).expect("leases");
    shell
        .store
        .save(NAMESPACE, GROUP, &held, &released, None)
        .await
        .expect("release hold");
    let group = poll_until(&cluster, &shell, &mut memory, 100, interval, |group| {
        phase(group).is_some_and(|p| p.phase == bloodraven_api::PlannedFailoverPhase::Completed)
            && valid_on(group, "pdx")
    })
    .await;
    assert!(valid_on(&group, "pdx"), "{:?}", group.status);
    sidecar_server.abort();
    cluster.stop().await;
}

/// A `MysqlDatabase` of `group` for schema `database`.
async fn mysql_database(cluster: &Cluster, name: &str, group: &str, database: &str) {
    let api: Api<MysqlDatabase> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let object: MysqlDatabase = serde_json::from_value(json!({
        "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlDatabase",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"failoverGroupRef": {"name": group}, "database": database}
    }))
    .expect("mysqldatabase");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create mysqldatabase");
}

/// The Event with `reason` regarding the MysqlDatabase `name`, once raised.
async fn database_event(
    cluster: &Cluster,
    name: &str,
    reason: &str,
) -> Option<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), NAMESPACE);
    eventually(5, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|event| {
            event.reason.as_deref() == Some(reason)
                && event.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("MysqlDatabase")
                && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
    })
    .await
}

/// docs/design/operator.md#mysqldatabase ("`spec.database` is an SQL schema, which the operator
/// creates on the primary") / docs/design/history.md#issue-8 (the playground's counter needs
/// database `counter`), through the poll loop with the rendered RBAC: once authority is Valid,
/// the active site's sidecar is asked for the group's schemas (not another group's); a failure
/// is retried by the next poll with a Warning Event on the MysqlDatabase; a steady state asks
/// nothing more; after a failover the new active site is asked once.
#[tokio::test]
async fn mysql_database_schema_is_ensured_on_the_active_site_once_per_authority() {
    let cluster = Cluster::with_group("100ms").await;
    site_pods(&cluster).await;
    mysql_database(&cluster, "counter-app", GROUP, "counter").await;
    mysql_database(&cluster, "elsewhere", "another-group", "not_ours").await;
    let (fake, template, sidecar_server) = fake_sidecars().await;
    let mut shell = shell(&cluster, &template);
    shell.client = operator_client(&cluster).await;
    shell.store = LeaseStore::new(shell.client.clone());
    shell.recorder = Shell::recorder(
        &shell.client,
        Reporter {
            controller: "bloodraven".into(),
            instance: Some("test".into()),
        },
    );
    let mut memory = None;
    let interval = Duration::from_millis(100);
    fake.fail_database_requests(1);
    let group = poll_until(&cluster, &shell, &mut memory, 30, interval, |group| {
        valid_on(group, "iad")
    })
    .await;
    assert!(valid_on(&group, "iad"), "bootstrapped: {:?}", group.status);
    let _ = poll_until(&cluster, &shell, &mut memory, 8, interval, |_| false).await;
    let iad_twice = vec![
        ("iad".to_string(), "counter".to_string()),
        ("iad".to_string(), "counter".to_string()),
    ];
    assert_eq!(
        fake.database_requests(),
        iad_twice,
        "the failed request is retried by the next poll, then nothing more"
    );
    let warning = database_event(&cluster, "counter-app", "DatabaseEnsureFailed")
        .await
        .expect("a Warning Event on the MysqlDatabase");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains("\"counter\"") && note.contains("503"),
        "{note}"
    );
    let created = database_event(&cluster, "counter-app", "DatabaseCreated")
        .await
        .expect("a Normal Event once created");
    assert!(
        created.note.unwrap_or_default().contains("iad"),
        "names the site"
    );

    fake.set_down("iad", true);
    let group = poll_until(&cluster, &shell, &mut memory, 100, interval, |group| {
        valid_on(group, "pdx")
    })
    .await;
    assert!(valid_on(&group, "pdx"), "failed over: {:?}", group.status);
    let _ = poll_until(&cluster, &shell, &mut memory, 8, interval, |_| false).await;
    let mut expected = iad_twice;
    expected.push(("pdx".to_string(), "counter".to_string()));
    assert_eq!(
        fake.database_requests(),
        expected,
        "the new active site is asked once; a fenced or down site never"
    );

    sidecar_server.abort();
    cluster.stop().await;
}

/// The text under `key` of the Secret `name` of the playground namespace.
async fn secret_value(cluster: &Cluster, name: &str, key: &str) -> Option<String> {
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    let secret = secrets.get_opt(name).await.expect("read secret")?;
    secret
        .data?
        .get(key)
        .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
}

/// The operator verifying key the sidecars of the playground mount.
async fn published(cluster: &Cluster) -> Option<bloodraven_api::auth::OperatorVerifyingKey> {
    secret_value(
        cluster,
        &bloodraven_operator::workloads::sidecar_keys_secret(GROUP),
        bloodraven_operator::workloads::SECRET_KEY_OPERATOR_VERIFYING_KEY,
    )
    .await
    .and_then(|text| bloodraven_api::auth::OperatorVerifyingKey::from_hex(&text).ok())
}

/// docs/design/history.md#issue-10-case-8: the workloads step creates the group's key Secrets
/// (the signing seed, and the verifying half with a peer key for the sidecars) and loads the
/// key the sidecar client signs with; a lost seed is replaced and the sidecars' verifying key
/// realigned (peer key kept), so restarted sidecars trust the operator again.
#[tokio::test]
async fn case_8_workloads_create_and_realign_the_signature_keys() {
    use bloodraven_operator::workloads::{
        ensure, operator_key_secret, sidecar_keys_secret, SECRET_KEY_PEER_KEY,
    };
    let cluster = Cluster::with_group("2s").await;
    let shell = shell(&cluster, "http://127.0.0.1:9/{site}");
    let group = cluster.group_object().await;
    let keys = shell.sidecars.signing_keys();
    assert!(keys.get(NAMESPACE, GROUP).is_none());
    assert_eq!(ensure(&cluster.client, &group, keys).await, 0);
    let loaded = keys
        .get(NAMESPACE, GROUP)
        .expect("key loaded")
        .verifying_key();
    assert_eq!(published(&cluster).await, Some(loaded));
    let peer = secret_value(&cluster, &sidecar_keys_secret(GROUP), SECRET_KEY_PEER_KEY)
        .await
        .expect("peer key");
    // Idempotent: the same keys on the next poll.
    assert_eq!(ensure(&cluster.client, &group, keys).await, 0);
    assert_eq!(
        keys.get(NAMESPACE, GROUP).map(|k| k.verifying_key()),
        Some(loaded)
    );

    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    secrets
        .delete(&operator_key_secret(GROUP), &Default::default())
        .await
        .expect("delete the seed");
    assert_eq!(ensure(&cluster.client, &group, keys).await, 0);
    let replaced = keys.get(NAMESPACE, GROUP).expect("key").verifying_key();
    assert_ne!(replaced, loaded, "a new seed");
    assert_eq!(published(&cluster).await, Some(replaced), "realigned");
    assert_eq!(
        secret_value(&cluster, &sidecar_keys_secret(GROUP), SECRET_KEY_PEER_KEY).await,
        Some(peer),
        "the peer key is kept"
    );
    cluster.stop().await;
}

/// The recorder keys a series on the note as well (`bloodraven_operator::events`): two
/// failures of different sites within six minutes are two Events, each with its own message,
/// and only a repeat of the same message counts on its Event. kube-runtime's recorder made
/// the second a series of the first, showing iad's message at pdx's time.
#[tokio::test]
async fn events_with_another_message_are_new_events_and_repeats_a_series() {
    use bloodraven_operator::events::Recorder;
    use kube::runtime::events::{Event, EventType};

    let cluster = Cluster::start().await;
    cluster.namespace(NAMESPACE).await;
    let recorder = Recorder::new(
        cluster.client.clone(),
        Reporter {
            controller: "bloodraven".into(),
            instance: Some("test".into()),
        },
    );
    let regarding = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("bloodraven.shipstream.io/v1alpha1".into()),
        kind: Some("MysqlFailoverGroup".into()),
        namespace: Some(NAMESPACE.into()),
        name: Some(GROUP.into()),
        ..Default::default()
    };
    let failed = |site: &str| Event {
        type_: EventType::Warning,
        reason: "SiteFailed".into(),
        note: Some(format!("{site} failed 3 consecutive polls")),
        action: "Observe".into(),
        secondary: None,
    };
    for site in ["iad", "pdx", "iad"] {
        recorder
            .publish(&failed(site), &regarding)
            .await
            .expect("publish");
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), NAMESPACE);
    let mut seen: Vec<(String, i32)> = events
        .list(&Default::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|event| event.reason.as_deref() == Some("SiteFailed"))
        .map(|event| {
            (
                event.note.unwrap_or_default(),
                event.series.map_or(1, |series| series.count),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("iad failed 3 consecutive polls".to_string(), 2),
            ("pdx failed 3 consecutive polls".to_string(), 1),
        ]
    );
    cluster.stop().await;
}

/// The Event with `reason` regarding the `kind` `namespace/name`, once raised.
async fn event_on(
    cluster: &Cluster,
    namespace: &str,
    kind: &str,
    name: &str,
    reason: &str,
) -> Option<k8s_openapi::api::events::v1::Event> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), namespace);
    eventually(10, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find(|event| {
            let regarding = event.regarding.as_ref();
            event.reason.as_deref() == Some(reason)
                && regarding.and_then(|r| r.kind.as_deref()) == Some(kind)
                && regarding.and_then(|r| r.name.as_deref()) == Some(name)
        })
    })
    .await
}

/// docs/design/operator.md#mysqlfailovergroup (an object that does not decode is skipped and
/// reported; an invalid spec builds nothing and says so) on localkube, through the operator's
/// own group loop (`run_groups`, started as after a restart, with the rendered RBAC): stored
/// next to the playground, bypassing validation, a group with `spec.pollInterval: fast` and a
/// `MysqlDatabase` with no `spec.database`; created normally, a group whose spec `validate()`
/// refuses. The playground is still managed: bootstrapped, its schema ensured, failed over when
/// iad dies. The undecodable objects get a `SpecUndecodable` Warning naming the field and the
/// gauge, until fixed; the invalid group gets `SpecValid=False` naming its fields and no
/// StatefulSet, Secret or Service.
#[tokio::test]
async fn issue_32_malformed_objects_do_not_stop_the_operator_managing_the_playground() {
    let cluster = Cluster::with_group("100ms").await;
    site_pods(&cluster).await;
    mysql_database(&cluster, "counter-app", GROUP, "counter").await;
    let team = "team-b";
    cluster.namespace(team).await;
    let stored = |kind: &str, namespace: &str, name: &str, spec: Value| {
        json!({
            "apiVersion": "bloodraven.shipstream.io/v1", "kind": kind,
            "metadata": {
                "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"
            },
            "spec": spec
        })
    };
    cluster.store_unvalidated(
        "bloodraven.shipstream.io",
        "mysqlfailovergroups",
        stored(
            "MysqlFailoverGroup",
            team,
            "fast",
            json!({
                "image": "mariadb:10.11", "sites": [], "initialActiveSite": "iad",
                "pollInterval": "fast"
            }),
        ),
    );
    cluster.store_unvalidated(
        "bloodraven.shipstream.io",
        "mysqldatabases",
        stored(
            "MysqlDatabase",
            NAMESPACE,
            "broken",
            json!({"failoverGroupRef": {"name": GROUP}}),
        ),
    );
    // Refused by the CRD's schema at the door (docs/design/operator.md, what the API server
    // refuses), so stored past it: a group stored before the schema tightened.
    cluster.store_unvalidated(
        "bloodraven.shipstream.io",
        "mysqlfailovergroups",
        stored(
            "MysqlFailoverGroup",
            team,
            "invalid",
            json!({
                "image": "mariadb:10.11",
                "sites": [
                    {"name": "iad", "role": "read-write"},
                    {"name": "iad", "role": "read-write"},
                    {"name": "reader", "role": "read-only"}
                ],
                "initialActiveSite": "reader",
                "failureThreshold": 0,
                // What the API server's defaults would have filled in.
                "pollInterval": "100ms", "failoverCooldown": "5m", "flavor": "mariadb",
                "maxLagSeconds": 300, "writeLease": {}, "plannedFailover": {"onCooldown": "reject"}
            }),
        ),
    );
    let team_groups: Api<MysqlFailoverGroup> = Api::namespaced(cluster.client.clone(), team);
    // A typed list fails as a whole: what the operator did before it skipped undecodable
    // objects (docs/design/operator.md#mysqlfailovergroup).
    let all: Api<MysqlFailoverGroup> = Api::all(cluster.client.clone());
    assert!(all.list(&Default::default()).await.is_err());

    let (fake, template, sidecar_server) = fake_sidecars().await;
    let mut shell = shell(&cluster, &template);
    shell.client = operator_client(&cluster).await;
    shell.store = LeaseStore::new(shell.client.clone());
    shell.recorder = Shell::recorder(
        &shell.client,
        Reporter {
            controller: "bloodraven".into(),
            instance: Some("test".into()),
        },
    );
    let (stop, shutdown) = watch::channel(false);
    let running = shell.clone();
    let operator = tokio::spawn(async move { running.run_groups(shutdown).await });

    let bootstrapped = eventually(30, || async {
        let group = cluster.group_object().await;
        valid_on(&group, "iad").then_some(group)
    })
    .await;
    assert!(
        bootstrapped.is_some(),
        "the playground bootstraps: {:?}",
        cluster.group_object().await.status
    );
    let ensured = eventually(10, || async {
        fake.database_requests()
            .contains(&("iad".to_string(), "counter".to_string()))
            .then_some(())
    })
    .await;
    assert!(ensured.is_some(), "{:?}", fake.database_requests());

    // The undecodable ones are reported on themselves, by field, and in the gauge.
    let warning = event_on(
        &cluster,
        team,
        "MysqlFailoverGroup",
        "fast",
        "SpecUndecodable",
    )
    .await
    .expect("a SpecUndecodable Warning on team-b/fast");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.unwrap_or_default();
    assert!(
        note.contains("team-b/fast") && note.contains("spec.pollInterval: parse duration \"fast\""),
        "{note}"
    );
    assert_eq!(
        warning.regarding.and_then(|r| r.uid).as_deref(),
        Some("uid-fast")
    );
    let warning = event_on(
        &cluster,
        NAMESPACE,
        "MysqlDatabase",
        "broken",
        "SpecUndecodable",
    )
    .await
    .expect("a SpecUndecodable Warning on the MysqlDatabase");
    assert!(
        warning
            .note
            .unwrap_or_default()
            .contains("spec: missing field `database`"),
        "names the field"
    );
    let metrics = shell.metrics.encode();
    for series in [
        "bloodraven_undecodable_objects{kind=\"MysqlFailoverGroup\",namespace=\"team-b\",name=\"fast\"} 1",
        "bloodraven_undecodable_objects{kind=\"MysqlDatabase\",namespace=\"bloodraven-playground\",name=\"broken\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }

    // The invalid group says so in its status and has nothing built.
    let said = eventually(10, || async {
        let group = team_groups.get("invalid").await.ok()?;
        let condition = group
            .status?
            .conditions
            .into_iter()
            .find(|condition| condition.type_ == "SpecValid")?;
        Some(condition)
    })
    .await
    .expect("SpecValid on team-b/invalid");
    assert_eq!(
        (said.status.as_str(), said.reason.as_str()),
        ("False", "SpecInvalid")
    );
    assert!(
        said.message
            .contains("spec.sites[1].name: duplicate site \"iad\"")
            && said
                .message
                .contains("spec.initialActiveSite: \"reader\" is a read-only site")
            && said
                .message
                .contains("spec.failureThreshold: must be at least 1"),
        "{}",
        said.message
    );
    assert!(
        event_on(
            &cluster,
            team,
            "MysqlFailoverGroup",
            "invalid",
            "SpecInvalid"
        )
        .await
        .is_some(),
        "and a SpecInvalid Event"
    );

    // The playground still fails over.
    fake.set_down("iad", true);
    let failed_over = eventually(30, || async {
        let group = cluster.group_object().await;
        valid_on(&group, "pdx").then_some(group)
    })
    .await;
    assert!(
        failed_over.is_some(),
        "the playground fails over to pdx: {:?}",
        cluster.group_object().await.status
    );

    // Nothing was ever built for the invalid group (nor for the undecodable one).
    let statefulsets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), team);
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), team);
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), team);
    assert!(statefulsets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .is_empty());
    assert!(services
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .is_empty());
    assert!(
        secrets
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .iter()
            .all(|secret| !secret
                .metadata
                .name
                .as_deref()
                .unwrap_or_default()
                .contains("invalid")),
        "no credentials or keys for the invalid group"
    );

    // Fixed so that it decodes (its spec still invalid: no sites): reported no more.
    // (Stored past the schema again: with no sites the API server refuses any edit of it.)
    cluster.replace_unvalidated(
        "bloodraven.shipstream.io",
        "mysqlfailovergroups",
        stored(
            "MysqlFailoverGroup",
            team,
            "fast",
            json!({
                "image": "mariadb:10.11", "sites": [], "initialActiveSite": "iad",
                "pollInterval": "1s", "failureThreshold": 3, "failoverCooldown": "5m",
                "flavor": "mariadb", "maxLagSeconds": 300, "writeLease": {},
                "plannedFailover": {"onCooldown": "reject"}
            }),
        ),
    );
    let resolved = eventually(10, || async {
        (!shell.metrics.encode().contains("name=\"fast\"")).then_some(())
    })
    .await;
    assert!(resolved.is_some(), "{}", shell.metrics.encode());
    let spec_valid = eventually(10, || async {
        let group = team_groups.get("fast").await.ok()?;
        group
            .status?
            .conditions
            .into_iter()
            .find(|condition| condition.type_ == "SpecValid")
    })
    .await
    .expect("SpecValid on team-b/fast once it decodes");
    assert!(
        spec_valid
            .message
            .contains("spec.sites: at least one site is required"),
        "{}",
        spec_valid.message
    );

    let _ = stop.send(true);
    operator
        .await
        .expect("operator task")
        .expect("run_groups ends cleanly");
    sidecar_server.abort();
    cluster.stop().await;
}
