//! The `bloodraven` binary end to end on localkube: flags, leader election, the :8082
//! listener (metrics, probes, never /deploy/v1), the :8443 TLS deploy API, and the poll loop
//! bootstrapping a group through a fake sidecar.

use crate::support::{eventually, Cluster};
use std::time::Duration;

use axum::routing::{get, put};
use axum::{Json, Router};
use bloodraven_api::sidecar::{
    Authority, AuthorityDecision, AuthorityResponse, LeaseState, MysqlObservation, SidecarStatus,
};
use bloodraven_api::{names, MysqlFailoverGroup, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use serde_json::json;

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("free port")
}

/// A single-site group's sidecar: writable and leased while the cached authority names it.
fn one_site_sidecar() -> Router {
    let cached: std::sync::Arc<std::sync::Mutex<Option<Authority>>> = Default::default();
    let read = cached.clone();
    Router::new()
        .route(
            "/v1/status",
            get(move || {
                let authority = read.lock().ok().and_then(|cached| cached.clone());
                async move {
                    let active =
                        authority.as_ref().and_then(|a| a.active_site.as_deref()) == Some("solo");
                    Json(SidecarStatus {
                        group: "single".into(),
                        site: "solo".into(),
                        observed_at: Timestamp::from_unix_millis(
                            jiff::Timestamp::now().as_millisecond(),
                        ),
                        mysql: MysqlObservation {
                            reachable: true,
                            error: None,
                            down: false,
                            read_only: Some(!active),
                            gtid_executed: Some("0-1-5".into()),
                            replication: None,
                            mysqld: None,
                        },
                        fenced: !active,
                        fence: None,
                        lease: LeaseState {
                            held: active,
                            remaining_ms: 6_000,
                        },
                        authority,
                        known_generation: None,
                        latest_authority: None,
                        last_granted_ago_ms: Default::default(),
                        backups: Vec::new(),
                        job: None,
                        runtime: None,
                    })
                }
            }),
        )
        .route(
            "/v1/authority",
            put(move |Json(pushed): Json<Authority>| {
                let cached = cached.clone();
                async move {
                    let mut cached = cached.lock().expect("lock");
                    let decision = pushed.decide_against("single", cached.as_ref());
                    if decision == AuthorityDecision::Accepted {
                        *cached = Some(pushed);
                    }
                    Json(AuthorityResponse {
                        decision,
                        cached: cached.clone(),
                        last_granted_ago_ms: Default::default(),
                    })
                }
            }),
        )
}

/// docs/design/architecture.md#names: the operator Deployment `bloodraven` serves 8082 (HTTP:
/// /metrics, /healthz, /readyz) and 8443 (TLS: /deploy/v1); docs/design/requirements.md R001.9:
/// the leader holds `bloodraven-leader` and polls; docs/design/requirements.md R003.2: 8082
/// never serves /deploy/v1.
#[tokio::test]
async fn the_binary_elects_itself_polls_and_serves_both_listeners() {
    let cluster = Cluster::start().await;
    for name in [names::OPERATOR_NAMESPACE, "apps"] {
        cluster.namespace(name).await;
    }
    cluster.crds().await;
    let client = cluster.client.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let groups: Api<MysqlFailoverGroup> = Api::namespaced(client.clone(), "apps");
    let group: MysqlFailoverGroup = serde_json::from_value(json!({
        "apiVersion": "bloodraven.shipstream.io/v1", "kind": "MysqlFailoverGroup",
        "metadata": {"name": "single", "namespace": "apps"},
        "spec": {"image": "mariadb:10.11", "sites": [{"name": "solo", "role": "read-write"}],
                 "initialActiveSite": "solo", "pollInterval": "200ms"}
    }))
    .expect("group");
    groups
        .create(&PostParams::default(), &group)
        .await
        .expect("create group");

    let sidecar_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let sidecar_address = sidecar_listener.local_addr().expect("address");
    let sidecar = tokio::spawn(async move {
        let _ = axum::serve(sidecar_listener, one_site_sidecar()).await;
    });

    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let cert_path = dir.path().join("tls.crt");
    let key_path = dir.path().join("tls.key");
    std::fs::write(&cert_path, certified.cert.pem()).expect("write cert");
    std::fs::write(&key_path, certified.key_pair.serialize_pem()).expect("write key");
    let (http_port, tls_port) = (free_port(), free_port());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_bloodraven"))
        .env("KUBECONFIG", cluster.kubeconfig_path())
        .env("RUST_LOG", "info")
        .args([
            format!("--http-address=127.0.0.1:{http_port}"),
            format!("--tls-address=127.0.0.1:{tls_port}"),
            format!("--tls-cert={}", cert_path.display()),
            format!("--tls-key={}", key_path.display()),
            "--deploy-api".to_string(),
            "--identity=operator-0".to_string(),
            "--namespace=bloodraven".to_string(),
            "--retry-period-seconds=1".to_string(),
            format!("--sidecar-url-template=http://{sidecar_address}"),
        ])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start bloodraven");

    let http = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).expect("root"),
        )
        .timeout(Duration::from_secs(5))
        .build()
        .expect("http client");
    let metrics = eventually(20, || async {
        let text = http
            .get(format!("http://127.0.0.1:{http_port}/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains("bloodraven_is_leader 1").then_some(text)
    })
    .await;
    assert!(metrics.is_some(), "the single replica becomes leader");
    let leases: Api<Lease> = Api::namespaced(client.clone(), names::OPERATOR_NAMESPACE);
    let leader = leases.get(names::LEADER_LEASE).await.expect("leader lease");
    // The identity is the pod name and a per-process nonce (a restarted container is a new
    // candidate).
    let holder = leader
        .spec
        .and_then(|spec| spec.holder_identity)
        .expect("a holder");
    assert_eq!(names::leader_pod(&holder), "operator-0", "{holder}");
    assert_ne!(holder, "operator-0", "no per-process nonce: {holder}");

    let valid = eventually(20, || async {
        let group = groups.get("single").await.ok()?;
        let status = group.status?;
        (status.authority?.state == bloodraven_api::AuthorityState::Valid)
            .then_some(status.topology_generation)
    })
    .await;
    assert_eq!(valid, Some(1), "the poll loop bootstrapped the group");

    let plain = http
        .get(format!(
            "http://127.0.0.1:{http_port}/deploy/v1/groups/single"
        ))
        .send()
        .await
        .expect("get");
    assert_eq!(plain.status().as_u16(), 404, "8082 never serves /deploy/v1");
    let ready = http
        .get(format!("http://127.0.0.1:{http_port}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status().as_u16(), 200);
    let unauthenticated = http
        .get(format!(
            "https://localhost:{tls_port}/deploy/v1/groups/single"
        ))
        .send()
        .await
        .expect("tls get");
    assert_eq!(
        unauthenticated.status().as_u16(),
        401,
        "the TLS listener serves /deploy/v1"
    );

    let pid = child.id().expect("pid");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let exit = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait");
    assert!(exit.success(), "exit code 0 after SIGTERM: {exit:?}");
    let released = leases.get(names::LEADER_LEASE).await.expect("leader lease");
    assert_eq!(
        released.spec.and_then(|spec| spec.holder_identity),
        None,
        "the lease is released on shutdown"
    );

    sidecar.abort();
    cluster.stop().await;
}
