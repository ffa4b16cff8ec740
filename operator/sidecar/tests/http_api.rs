//! The sidecar's HTTP API with mysqld unreachable: the lease rule keeps answering, status
//! reports the unknown, and nothing waits on the dead server longer than its timeouts.

use std::{net::SocketAddr, time::Duration};

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
    discovery::PeerQuery, testing::TestDns, RunningSidecar, Settings, Sidecar,
};

async fn sidecar_without_mysql(dns: &TestDns) -> RunningSidecar {
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
    );
    settings.dns_server = Some(dns.address());
    Sidecar::start(settings).await.expect("sidecar starts")
}

fn authority(active_site: Option<&str>, topology_generation: u64) -> Authority {
    Authority {
        group: "playground".to_owned(),
        active_site: active_site.map(str::to_owned),
        topology_generation,
        issued_at: Timestamp::from_unix_millis(0),
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
    let refused: LeaseResponse = http
        .post(url(PATH_LEASE))
        .json(&request)
        .send()
        .await
        .expect("lease")
        .json()
        .await
        .expect("body");
    assert_eq!(refused.reason, Some(LeaseRefusal::NoAuthority));

    // An authority push never waits for the dead mysqld.
    let started = tokio::time::Instant::now();
    let pushed: AuthorityResponse = http
        .put(url(PATH_AUTHORITY))
        .json(&authority(Some("iad"), 1))
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
    let granted: LeaseResponse = http
        .post(url(PATH_LEASE))
        .json(&request)
        .send()
        .await
        .expect("lease")
        .json()
        .await
        .expect("body");
    assert!(granted.granted);
    assert_eq!(granted.duration_ms, 3000);

    // Monotonic rule on the wire.
    let stale: AuthorityResponse = http
        .put(url(PATH_AUTHORITY))
        .json(&authority(Some("pdx"), 0))
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
    let wrong = http
        .post(url(PATH_FENCE))
        .json(&FenceRequest {
            group: "other".to_owned(),
            topology_generation: 1,
            kill_connections: false,
            reason: "test".to_owned(),
        })
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
        http.post(url(PATH_DATABASES))
            .json(&EnsureDatabaseRequest {
                group: "playground".to_owned(),
                database: database.to_owned(),
            })
            .send()
    };

    // No authority yet (startup safety net).
    let refused = ensure("counter").await.expect("ensure");
    assert_eq!(refused.status(), reqwest::StatusCode::CONFLICT);
    let body: ErrorBody = refused.json().await.expect("error body");
    assert!(body.error.contains("(no_authority)"), "{}", body.error);

    // Authority names iad; this is pdx.
    http.put(url(PATH_AUTHORITY))
        .json(&authority(Some("iad"), 1))
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
