//! The counter app against real MariaDB, in both connection policies
//! (docs/design/requirements.md R000.20: the `hold` app keeps talking to the demoted site and
//! gets ERROR 1290; `reconnect` follows the primary). Three `mariadbd` with GTID replication
//! and an in-process DNS zone for the primary host. A missing `mariadbd` fails these tests;
//! nothing is skipped.

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use bloodraven_counter::{
    app::{Policy, Settings},
    schema::bootstrap_statements,
    CounterServer, CounterView, RunningCounter, HEADER_CONNECTION_ID,
};
use bloodraven_mysql::{
    live::sandbox::{MariaDbServer, Topology},
    Flavor, GtidSet, WaitOutcome,
};
use bloodraven_sidecar::testing::TestDns;

const PRIMARY: &str = "mysql-playground-primary.test.";
const DATABASE: &str = "counter";
const USER: &str = "counter";
const PASSWORD: &str = "counter-secret";

struct Fixture {
    topology: Topology,
    dns: TestDns,
    http: reqwest::Client,
}

fn ipv4(server: &MariaDbServer) -> std::net::Ipv4Addr {
    match server.address().ip() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => panic!("sandbox servers are on IPv4 loopback"),
    }
}

impl Fixture {
    async fn start() -> Fixture {
        let topology = match Topology::start(&["iad", "pdx", "reader"]).await {
            Ok(topology) => topology,
            Err(error) => {
                panic!("failed to start three mariadbd (CI installs mariadb-server): {error}")
            }
        };
        let iad = &topology.servers[0];
        let admin = iad.admin_client();
        assert!(
            admin.unfence().await.is_applied(),
            "iad is the writable primary"
        );
        let mut conn = admin.connect().await.expect("admin connects");
        for statement in bootstrap_statements(DATABASE, USER, "%", PASSWORD).expect("statements") {
            admin
                .execute(&mut conn, &statement)
                .await
                .expect("bootstrap");
        }
        let dns = TestDns::start("test.").await.expect("dns");
        dns.set_a(PRIMARY, &[ipv4(iad)])
            .await
            .expect("primary record");
        Fixture {
            topology,
            dns,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(20))
                .no_proxy()
                .build()
                .expect("http"),
        }
    }

    async fn counter(&self, policy: Policy, poll_interval: Duration) -> RunningCounter {
        CounterServer::start(Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            host: PRIMARY.to_owned(),
            port: self.topology.servers[0].address().port(),
            database: DATABASE.to_owned(),
            user: USER.to_owned(),
            password: PASSWORD.to_owned(),
            policy,
            poll_interval,
            write_interval: None,
            dns_server: Some(self.dns.address()),
            timeout: Duration::from_secs(5),
            flavor: Flavor::MariaDb,
        })
        .await
        .expect("counter starts")
    }

    /// Fails over from iad to pdx by hand: fence iad, drain pdx, detach it, unfence it,
    /// repoint the reader, move the primary's DNS record.
    async fn fail_over_to_pdx(&self) {
        let [iad, pdx, reader] = self.topology.servers.as_slice() else {
            panic!("three servers");
        };
        assert!(iad.admin_client().fence().await.is_applied());
        let gtids = iad
            .admin_client()
            .observe()
            .await
            .expect("observe")
            .gtid_executed;
        let wanted = GtidSet::parse(Flavor::MariaDb, &gtids).expect("gtids");
        let drained = pdx
            .admin_client()
            .wait_for_gtid_set(&wanted, Duration::from_secs(20))
            .await
            .expect("wait");
        assert_eq!(drained, WaitOutcome::Reached);
        assert!(pdx.admin_client().detach().await.is_applied());
        assert!(pdx.admin_client().unfence().await.is_applied());
        assert!(reader
            .admin_client()
            .repoint(&pdx.as_source())
            .await
            .is_applied());
        self.dns
            .set_a(PRIMARY, &[ipv4(pdx)])
            .await
            .expect("move record");
    }

    async fn get(&self, counter: &RunningCounter) -> reqwest::Response {
        self.http
            .get(format!("http://{}/api/counter", counter.address()))
            .send()
            .await
            .expect("get")
    }

    async fn post(&self, counter: &RunningCounter) -> reqwest::Response {
        self.http
            .post(format!("http://{}/api/counter", counter.address()))
            .send()
            .await
            .expect("post")
    }
}

/// The answering connection's id ([`HEADER_CONNECTION_ID`]).
fn connection_id(response: &reqwest::Response) -> u32 {
    response
        .headers()
        .get(HEADER_CONNECTION_ID)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("no {HEADER_CONNECTION_ID} header: {:?}", response.headers()))
}

async fn view(response: reqwest::Response) -> CounterView {
    assert!(
        response.status().is_success(),
        "status {}",
        response.status()
    );
    response.json().await.expect("counter body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_000_hold_policy_keeps_talking_to_the_demoted_site_and_gets_error_1290() {
    let fixture = Fixture::start().await;
    let counter = fixture
        .counter(Policy::Hold, Duration::from_millis(200))
        .await;
    let first = fixture.post(&counter).await;
    let held = connection_id(&first);
    let first = view(first).await;
    assert_eq!(first.value, 1);
    // dbHost is @@hostname: the sandbox servers share this machine's, so the server is told
    // apart by read_only (only the active one is writable) and the value.
    assert!(!first.db_host.is_empty());
    assert!(!first.read_only);
    let body = serde_json::to_value(&first).expect("json");
    assert!(
        body.get("dbHost").is_some() && body.get("readOnly").is_some(),
        "{body}"
    );

    fixture.fail_over_to_pdx().await;
    // Polls pass and the DNS record has moved, but the held connection never re-resolves.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let refused = fixture.post(&counter).await;
    assert_eq!(refused.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    // Refused over the very socket it opened before the failover.
    assert_eq!(connection_id(&refused), held);
    let error: serde_json::Value = refused.json().await.expect("error body");
    assert_eq!(error["code"], 1290, "{error}");
    let stale = fixture.get(&counter).await;
    assert_eq!(connection_id(&stale), held);
    let stale = view(stale).await;
    assert!(stale.read_only, "still reading from the demoted site");
    assert_eq!(stale.value, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_policy_follows_the_primary_on_a_dns_change() {
    let fixture = Fixture::start().await;
    let counter = fixture
        .counter(Policy::Reconnect, Duration::from_millis(200))
        .await;
    assert!(!view(fixture.post(&counter).await).await.read_only);
    fixture.fail_over_to_pdx().await;
    // The poller sees the record move and reconnects; reads now come from pdx (the only
    // writable server: the demoted iad is read-only).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let current = view(fixture.get(&counter).await).await;
        if !current.read_only {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still on the read-only demoted site"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = view(fixture.post(&counter).await).await;
    assert!(!after.read_only);
    assert_eq!(
        after.value, 2,
        "the increment replicated before the failover survives"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_policy_reconnects_on_error_1290() {
    let fixture = Fixture::start().await;
    // A poller too slow to notice the DNS change: only ERROR 1290 can trigger the reconnect.
    let counter = fixture
        .counter(Policy::Reconnect, Duration::from_secs(3600))
        .await;
    assert!(!view(fixture.post(&counter).await).await.read_only);
    fixture.fail_over_to_pdx().await;
    let after = fixture.post(&counter).await;
    // The new connection (to pdx) is named too.
    connection_id(&after);
    let after = view(after).await;
    assert!(!after.read_only);
    assert_eq!(after.value, 2);
}
