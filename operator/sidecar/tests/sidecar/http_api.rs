//! The sidecar's HTTP API with mysqld unreachable: the lease rule keeps answering, status
//! reports the unknown, and nothing waits on the dead server longer than its timeouts; only
//! signed requests change anything (docs/design/history.md#issue-10-case-8).

use std::{net::SocketAddr, time::Duration};

use crate::support::{self, signed_auth, signed_request, Signer};
use bloodraven_api::{
    sidecar::{
        Authority, AuthorityDecision, AuthorityResponse, ErrorBody, FenceRequest, LeaseRefusal,
        LeaseRequest, LeaseResponse, SidecarStatus, PATH_AUTHORITY, PATH_FENCE, PATH_HEALTHZ,
        PATH_LEASE, PATH_STATUS,
    },
    Timestamp,
};
use bloodraven_core::lease::LeaseConfig;
use bloodraven_mysql::{live::ConnectOptions, Flavor};
use bloodraven_sidecar::{
    discovery::PeerQuery, testing::TestDns, RequestAuth, RunningSidecar, Settings, Sidecar,
};

const GROUP: &str = "playground";
/// The site of [`sidecar_without_mysql`].
const SITE: &str = "pdx";

async fn sidecar_without_mysql(dns: &TestDns) -> RunningSidecar {
    sidecar_without_mysql_with(dns, signed_auth()).await
}

async fn sidecar_without_mysql_with(dns: &TestDns, auth: RequestAuth) -> RunningSidecar {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let lease = LeaseConfig::new(
        "playground",
        "pdx",
        ["iad", "pdx", "reader"],
        Duration::from_secs(3),
    )
    .expect("lease config");
    let mut settings = Settings::new(
        lease,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        PeerQuery::Host {
            name: "{site}.{group}.test.".to_owned(),
            port: 1,
        },
        Flavor::MariaDb,
        ConnectOptions {
            host: "127.0.0.1".to_owned(),
            port: closed.port(),
            user: "nobody".to_owned(),
            password: String::new(),
            connect_timeout: Duration::from_millis(500),
            statement_timeout: Duration::from_millis(500),
        },
        auth,
    );
    settings.dns_server = Some(dns.address());
    Sidecar::start(settings).await.expect("sidecar starts")
}

fn operator_put(
    http: &reqwest::Client,
    url: &str,
    body: &impl serde::Serialize,
) -> reqwest::RequestBuilder {
    signed_request(
        http,
        Signer::Operator,
        GROUP,
        SITE,
        reqwest::Method::PUT,
        url,
        body,
    )
}

fn authority(active_site: Option<&str>, topology_generation: u64) -> Authority {
    Authority {
        group: "playground".to_owned(),
        active_site: active_site.map(str::to_owned),
        topology_generation,
        issued_at: Timestamp::from_unix_millis(0),
        moving_from: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_api_answers_with_mysqld_down() {
    let dns = TestDns::start("test.").await.expect("dns");
    let sidecar = sidecar_without_mysql(&dns).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let url = |path: &str| format!("http://{}{path}", sidecar.address());

    let health = http.get(url(PATH_HEALTHZ)).send().await.expect("healthz");
    assert!(health.status().is_success());

    // Startup safety net: no authority, fenced, mysqld unknown.
    let status: SidecarStatus = http
        .get(url(PATH_STATUS))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("body");
    assert!(status.authority.is_none());
    assert!(status.fenced);
    assert!(!status.mysql.reachable);
    assert!(status.mysql.error.is_some());
    assert_eq!(status.mysql.read_only, None);

    // Peers without authority grant nothing.
    let request = LeaseRequest {
        group: "playground".to_owned(),
        site: "iad".to_owned(),
        topology_generation: 1,
    };
    let refused: LeaseResponse = signed_request(
        &http,
        Signer::Peer,
        GROUP,
        SITE,
        reqwest::Method::POST,
        &url(PATH_LEASE),
        &request,
    )
    .send()
    .await
    .expect("lease")
    .json()
    .await
    .expect("body");
    assert_eq!(refused.reason, Some(LeaseRefusal::NoAuthority));

    // An authority push never waits for the dead mysqld.
    let started = tokio::time::Instant::now();
    let pushed: AuthorityResponse =
        operator_put(&http, &url(PATH_AUTHORITY), &authority(Some("iad"), 1))
            .send()
            .await
            .expect("push")
            .json()
            .await
            .expect("body");
    assert_eq!(pushed.decision, AuthorityDecision::Accepted);
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "push took {:?}",
        started.elapsed()
    );
    let granted: LeaseResponse = signed_request(
        &http,
        Signer::Peer,
        GROUP,
        SITE,
        reqwest::Method::POST,
        &url(PATH_LEASE),
        &request,
    )
    .send()
    .await
    .expect("lease")
    .json()
    .await
    .expect("body");
    assert!(granted.granted);
    assert_eq!(granted.duration_ms, 3000);

    // Monotonic rule on the wire.
    let stale: AuthorityResponse =
        operator_put(&http, &url(PATH_AUTHORITY), &authority(Some("pdx"), 0))
            .send()
            .await
            .expect("push")
            .json()
            .await
            .expect("body");
    assert_eq!(stale.decision, AuthorityDecision::RefusedStale);
    assert_eq!(stale.cached, Some(authority(Some("iad"), 1)));
    assert!(stale.last_granted_ago_ms.contains_key("iad"));

    // A fence for another group is refused with an error body.
    let wrong = signed_request(
        &http,
        Signer::Operator,
        GROUP,
        SITE,
        reqwest::Method::POST,
        &url(PATH_FENCE),
        &FenceRequest {
            group: "other".to_owned(),
            topology_generation: 1,
            kill_connections: false,
            reason: "test".to_owned(),
        },
    )
    .send()
    .await
    .expect("fence");
    assert_eq!(wrong.status(), reqwest::StatusCode::CONFLICT);
    let body: ErrorBody = wrong.json().await.expect("error body");
    assert!(body.error.contains("group"), "{}", body.error);
    sidecar.stop().await.expect("stops");
}

/// A sidecar whose authority names another site refuses a database before touching mysqld
/// (409, even with mysqld down), and a bad name is a 400 naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_database_is_refused_off_the_active_site_without_touching_mysqld() {
    use bloodraven_api::sidecar::{EnsureDatabaseRequest, PATH_DATABASES};
    let dns = TestDns::start("test.").await.expect("dns");
    let sidecar = sidecar_without_mysql(&dns).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let url = |path: &str| format!("http://{}{path}", sidecar.address());
    let ensure = |database: &str| {
        signed_request(
            &http,
            Signer::Operator,
            GROUP,
            SITE,
            reqwest::Method::POST,
            &url(PATH_DATABASES),
            &EnsureDatabaseRequest {
                group: "playground".to_owned(),
                database: database.to_owned(),
            },
        )
        .send()
    };

    // No authority yet (startup safety net).
    let refused = ensure("counter").await.expect("ensure");
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
    let body: ErrorBody = refused.json().await.expect("error body");
    assert!(body.error.contains("(no_authority)"), "{}", body.error);

    // Authority names iad; this is pdx.
    operator_put(&http, &url(PATH_AUTHORITY), &authority(Some("iad"), 1))
        .send()
        .await
        .expect("push");
    let started = tokio::time::Instant::now();
    let refused = ensure("counter").await.expect("ensure");
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "refused without waiting on mysqld: {:?}",
        started.elapsed()
    );
    let body: ErrorBody = refused.json().await.expect("error body");
    assert!(
        body.error
            .contains("site pdx is not the writable active site (other_site_active)"),
        "{}",
        body.error
    );

    let invalid = ensure("").await.expect("ensure");
    assert_eq!(invalid.status(), reqwest::StatusCode::BAD_REQUEST);
    let body: ErrorBody = invalid.json().await.expect("error body");
    assert!(
        body.error.contains("field database is empty"),
        "{}",
        body.error
    );
    sidecar.stop().await.expect("stops");
}

/// The active site never replicates: a repoint that reaches the site its cached authority
/// names (one delayed past the promotion, sim seed 7963) is refused with 409, before mysqld.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repoint_of_the_active_site_is_refused() {
    use bloodraven_api::sidecar::{RepointRequest, PATH_REPOINT};
    let dns = TestDns::start("test.").await.expect("dns");
    let sidecar = sidecar_without_mysql(&dns).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let url = |path: &str| format!("http://{}{path}", sidecar.address());
    let repoint = || {
        signed_request(
            &http,
            Signer::Operator,
            GROUP,
            SITE,
            reqwest::Method::POST,
            &url(PATH_REPOINT),
            &RepointRequest {
                group: GROUP.to_owned(),
                source_host: "mysql-playground-iad.bloodraven-playground.svc.cluster.local"
                    .to_owned(),
                source_port: 3306,
                drain_received_ms: None,
            },
        )
        .send()
    };
    // Authority names iad: pdx is a replica, and the repoint reaches mysqld (down here).
    operator_put(&http, &url(PATH_AUTHORITY), &authority(Some("iad"), 1))
        .send()
        .await
        .expect("push");
    let replica = repoint().await.expect("repoint");
    assert_ne!(replica.status(), reqwest::StatusCode::CONFLICT);
    // Authority names pdx: refused.
    operator_put(&http, &url(PATH_AUTHORITY), &authority(Some(SITE), 2))
        .send()
        .await
        .expect("push");
    let refused = repoint().await.expect("repoint");
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
    let body: ErrorBody = refused.json().await.expect("error body");
    assert!(
        body.error.contains("the active site never replicates"),
        "{}",
        body.error
    );
    sidecar.stop().await.expect("stops");
}

/// docs/design/history.md#issue-10-case-8: an unsigned authority push at a higher generation is
/// answered 401 with a body naming what is missing and changes nothing; neither does one signed
/// by the peer key, by another operator key, with a tampered body, a stale timestamp, or
/// replayed. A signed one is accepted. Reads stay open; an unsigned lease request is refused
/// too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_8_only_the_operator_may_push_authority() {
    use bloodraven_api::auth::{OperatorKey, SignedRequest, HEADER_SIGNATURE};
    use bloodraven_api::sidecar::PATH_METRICS;

    let dns = TestDns::start("test.").await.expect("dns");
    let sidecar = sidecar_without_mysql(&dns).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let url = |path: &str| format!("http://{}{path}", sidecar.address());
    let cached = || async {
        let status: SidecarStatus = http
            .get(url(PATH_STATUS))
            .send()
            .await
            .expect("status is open")
            .json()
            .await
            .expect("status body");
        status.authority
    };
    let pushed: AuthorityResponse =
        operator_put(&http, &url(PATH_AUTHORITY), &authority(Some("iad"), 3))
            .send()
            .await
            .expect("push")
            .json()
            .await
            .expect("body");
    assert_eq!(pushed.decision, AuthorityDecision::Accepted);

    let refused = |response: reqwest::Response| async move {
        assert_eq!(response.status(), reqwest::StatusCode::UNAUTHORIZED);
        let body: ErrorBody = response.json().await.expect("error body");
        body.error
    };
    // Unsigned, at a higher generation naming another site.
    let unsigned = http
        .put(url(PATH_AUTHORITY))
        .json(&authority(Some("pdx"), 9))
        .send()
        .await
        .expect("push");
    let error = refused(unsigned).await;
    assert!(
        error.starts_with("authenticate PUT /v1/authority: missing header x-bloodraven-"),
        "{error}"
    );
    assert_eq!(
        cached().await,
        Some(authority(Some("iad"), 3)),
        "nothing changed"
    );

    // Signed by the peer key: peers may not push authority.
    let peer_signed = signed_request(
        &http,
        Signer::Peer,
        GROUP,
        SITE,
        reqwest::Method::PUT,
        &url(PATH_AUTHORITY),
        &authority(Some("pdx"), 9),
    )
    .send()
    .await
    .expect("push");
    let error = refused(peer_signed).await;
    assert!(error.contains("uses scheme \"hmac-sha256\""), "{error}");

    // Signed by an operator key the sidecar does not trust.
    let body = serde_json::to_vec(&authority(Some("pdx"), 9)).expect("encode");
    let request = SignedRequest {
        group: GROUP,
        site: SITE,
        method: "PUT",
        path: PATH_AUTHORITY,
        body: &body,
    };
    let send = |headers: bloodraven_api::auth::AuthHeaders, body: Vec<u8>| {
        let mut builder = http
            .put(url(PATH_AUTHORITY))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers.pairs() {
            builder = builder.header(name, value);
        }
        builder.send()
    };
    let impostor = OperatorKey::from_seed(&[0x66; 32]).expect("key");
    let error = refused(
        send(impostor.sign(&request, &support::stamp()), body.clone())
            .await
            .expect("push"),
    )
    .await;
    assert!(error.contains("bad signature"), "{error}");

    // Signed by the operator, then the body changed on the way.
    let headers = support::operator_key().sign(&request, &support::stamp());
    let tampered = serde_json::to_vec(&authority(Some("reader"), 9)).expect("encode");
    let error = refused(send(headers, tampered).await.expect("push")).await;
    assert!(error.contains("bad signature"), "{error}");

    // Signed by the operator long ago.
    let mut old = support::stamp();
    old.timestamp = old.timestamp.saturating_sub(Duration::from_secs(120));
    let error = refused(
        send(support::operator_key().sign(&request, &old), body.clone())
            .await
            .expect("push"),
    )
    .await;
    assert!(error.contains("stale timestamp"), "{error}");
    assert_eq!(
        cached().await,
        Some(authority(Some("iad"), 3)),
        "nothing changed"
    );

    // Signed by the operator: accepted once; the same request again is a replay.
    let headers = support::operator_key().sign(&request, &support::stamp());
    let accepted: AuthorityResponse = send(headers.clone(), body.clone())
        .await
        .expect("push")
        .json()
        .await
        .expect("body");
    assert_eq!(accepted.decision, AuthorityDecision::Accepted);
    assert_eq!(cached().await, Some(authority(Some("pdx"), 9)));
    let error = refused(send(headers, body).await.expect("push")).await;
    assert!(error.contains("replayed request"), "{error}");

    // Every mutation and the lease are closed to unsigned requests; reads are open.
    for (method, path) in [
        (reqwest::Method::POST, PATH_FENCE),
        (reqwest::Method::POST, bloodraven_api::sidecar::PATH_PROMOTE),
        (reqwest::Method::POST, bloodraven_api::sidecar::PATH_REPOINT),
        (
            reqwest::Method::POST,
            bloodraven_api::sidecar::PATH_DATABASES,
        ),
        (reqwest::Method::POST, PATH_LEASE),
    ] {
        let response = http
            .request(method.clone(), url(path))
            .header(HEADER_SIGNATURE, "ed25519 00")
            .json(&serde_json::json!({"group": GROUP}))
            .send()
            .await
            .expect("request");
        let error = refused(response).await;
        assert!(error.contains(path), "{error}");
    }
    for path in [PATH_HEALTHZ, PATH_METRICS] {
        let response = http.get(url(path)).send().await.expect("read");
        assert!(response.status().is_success(), "{path} is open");
    }
    let metrics = http
        .get(url(PATH_METRICS))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains(
            "bloodraven_sidecar_requests_unauthenticated_total{reason=\"missing_header\"}"
        ),
        "{metrics}"
    );
    sidecar.stop().await.expect("stops");
}

/// `--insecure-allow-unauthenticated` (tests only) serves unsigned requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_sidecar_takes_unsigned_requests() {
    let dns = TestDns::start("test.").await.expect("dns");
    let sidecar = sidecar_without_mysql_with(&dns, RequestAuth::InsecureUnauthenticated).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let pushed: AuthorityResponse = http
        .put(format!("http://{}{PATH_AUTHORITY}", sidecar.address()))
        .json(&authority(Some("iad"), 1))
        .send()
        .await
        .expect("push")
        .json()
        .await
        .expect("body");
    assert_eq!(pushed.decision, AuthorityDecision::Accepted);
    sidecar.stop().await.expect("stops");
}
