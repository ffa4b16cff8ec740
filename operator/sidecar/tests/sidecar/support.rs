//! A three-site playground for sidecar tests: three real `mariadbd` with GTID replication
//! (iad the source), an in-process DNS zone, and one in-process sidecar per site on its own
//! loopback address, discovered through A records plus a shared port.

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use std::sync::atomic::{AtomicU64, Ordering};

use bloodraven_api::{
    auth::{OperatorKey, PeerKey, SignedRequest, Stamp, NONCE_BYTES},
    sidecar::{Authority, AuthorityResponse, SidecarStatus, PATH_AUTHORITY, PATH_STATUS},
    Timestamp,
};
use bloodraven_core::lease::LeaseConfig;
use bloodraven_mysql::{
    grants::{app_user_grant, create_app_user},
    live::{
        sandbox::{
            loopback_addresses, MariaDbServer, Topology, ADMIN_PASSWORD, ADMIN_USER,
            REPLICATION_PASSWORD, REPLICATION_USER, SIDECAR_PASSWORD, SIDECAR_USER,
        },
        LiveError, LiveMysql,
    },
    Flavor,
};
use bloodraven_sidecar::{
    discovery::PeerQuery, testing::TestDns, RequestAuth, RunningSidecar, Settings, Sidecar,
};

pub const GROUP: &str = "playground";
pub const SITES: [&str; 3] = ["iad", "pdx", "reader"];
pub const LEASE: Duration = Duration::from_millis(3000);
pub const APP_USER: &str = "counter";
pub const APP_PASSWORD: &str = "counter-secret";

/// The seed of the operator key the test sidecars trust.
pub const OPERATOR_SEED: [u8; 32] = [0x0b; 32];
/// The peer key of the test group.
pub const PEER_SECRET: [u8; 32] = [0x5e; 32];

/// The operator's signing key of the tests.
pub fn operator_key() -> OperatorKey {
    OperatorKey::from_seed(&OPERATOR_SEED).expect("operator key")
}

/// The group's peer key of the tests.
pub fn peer_key() -> PeerKey {
    PeerKey::from_bytes(&PEER_SECRET).expect("peer key")
}

/// What the test sidecars run with: the keys above, as the operator renders them.
pub fn signed_auth() -> RequestAuth {
    RequestAuth::Signed {
        operator: operator_key().verifying_key(),
        peer: peer_key(),
    }
}

/// A fresh stamp: the wall clock and a nonce unique in this process.
pub fn stamp() -> Stamp {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[..8].copy_from_slice(&NEXT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    Stamp {
        timestamp: Timestamp::from_unix_millis(millis),
        nonce,
    }
}

/// Who signs a test request.
pub enum Signer {
    /// The operator's key.
    Operator,
    /// The group's peer key.
    Peer,
}

/// `method url` with a JSON `body` signed by `signer` for `group`'s `site` (the path is the
/// URL's).
#[allow(clippy::too_many_arguments)]
pub fn signed_request(
    http: &reqwest::Client,
    signer: Signer,
    group: &str,
    site: &str,
    method: reqwest::Method,
    url: &str,
    body: &impl serde::Serialize,
) -> reqwest::RequestBuilder {
    let body = serde_json::to_vec(body).expect("encode body");
    let path = reqwest::Url::parse(url).expect("url").path().to_owned();
    let request = SignedRequest {
        group,
        site,
        method: method.as_str(),
        path: &path,
        body: &body,
    };
    let headers = match signer {
        Signer::Operator => operator_key().sign(&request, &stamp()),
        Signer::Peer => peer_key().sign(&request, &stamp()),
    };
    let mut builder = http
        .request(method, url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    for (name, value) in headers.pairs() {
        builder = builder.header(name, value);
    }
    builder
}

/// The pods' restore gate in front of the sandbox's `mariadbd` (the journal in its data
/// directory, as the operator renders it with `/var/lib/mysql`).
pub fn gate_command(datadir: &std::path::Path, mark: &std::path::Path) -> Vec<String> {
    bloodraven_api::sidecar::mysqld_gate_command(
        &datadir
            .join(bloodraven_api::sidecar::RESTORE_JOURNAL)
            .display()
            .to_string(),
        &mark.display().to_string(),
        &[],
    )
}

pub struct Playground {
    pub topology: Topology,
    pub dns: TestDns,
    pub sidecar_addresses: Vec<SocketAddr>,
    pub sidecars: Vec<Option<RunningSidecar>>,
    pub http: reqwest::Client,
    /// The lease every sidecar runs with ([`LEASE`] unless started otherwise).
    pub lease: Duration,
    /// With backups: each site's backup directory is `<this>/<site>`, and the backup jobs
    /// run as the sandbox's admin user (the pods run them as `root`).
    pub backups: Option<std::path::PathBuf>,
}

impl Playground {
    pub async fn start() -> Playground {
        Self::start_with_lease(LEASE).await
    }

    /// A playground whose sidecars all run with a `lease` of their own.
    pub async fn start_with_lease(lease: Duration) -> Playground {
        Self::start_with(lease, None).await
    }

    /// A playground whose sidecars run backup jobs, in directories under `backups`.
    pub async fn start_with_backups(backups: std::path::PathBuf) -> Playground {
        Self::start_with(LEASE, Some(backups)).await
    }

    async fn start_with(lease: Duration, backups: Option<std::path::PathBuf>) -> Playground {
        // With backups, mysqld runs behind the pods' restore gate and is restarted when it
        // exits (a physical restore stops it), as the kubelet restarts the mysql container.
        let started = match backups {
            Some(_) => Topology::start_gated(&SITES, gate_command).await,
            None => Topology::start(&SITES).await,
        };
        let topology = match started {
            Ok(topology) => topology,
            Err(error) => {
                panic!("failed to start three mariadbd (CI installs mariadb-server): {error}")
            }
        };
        let dns = TestDns::start("test.").await.expect("dns starts");
        let sidecar_addresses = loopback_addresses(3).expect("sidecar addresses");
        for (site, address) in SITES.iter().zip(&sidecar_addresses) {
            let IpAddr::V4(ip) = address.ip() else {
                panic!("ipv4 loopback");
            };
            dns.set_a(&format!("{site}.{GROUP}.test."), &[ip])
                .await
                .expect("a record");
        }
        let mut playground = Playground {
            topology,
            dns,
            sidecar_addresses,
            sidecars: Vec::new(),
            // No pooled connections: a sidecar restarted on the same address would otherwise
            // be asked over the old one's closed keep-alive connection (IncompleteMessage).
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .pool_max_idle_per_host(0)
                .no_proxy()
                .build()
                .expect("http client"),
            lease,
            backups,
        };
        for index in 0..SITES.len() {
            let running = playground.start_sidecar(index).await;
            playground.sidecars.push(Some(running));
        }
        playground
    }

    pub fn settings(&self, index: usize) -> Settings {
        let lease = LeaseConfig::new(GROUP, SITES[index], SITES, self.lease).expect("lease config");
        let server = &self.topology.servers[index];
        // The sidecar runs with only the privileges it needs, as in production.
        let mut mysql = server.options(SIDECAR_USER, SIDECAR_PASSWORD);
        mysql.statement_timeout = Duration::from_secs(2);
        mysql.connect_timeout = Duration::from_secs(2);
        let mut settings = Settings::new(
            lease,
            self.sidecar_addresses[index],
            PeerQuery::Host {
                name: "{site}.{group}.test.".to_owned(),
                port: self.sidecar_addresses[index].port(),
            },
            Flavor::MariaDb,
            mysql,
            signed_auth(),
        );
        settings.dns_server = Some(self.dns.address());
        settings.replication_user = REPLICATION_USER.to_owned();
        settings.replication_password = REPLICATION_PASSWORD.to_owned();
        settings.mysqld_pid_file = Some(server.pid_file());
        settings.backup = self.backups.as_ref().map(|root| {
            let mut admin = server.options(ADMIN_USER, ADMIN_PASSWORD);
            admin.statement_timeout = Duration::from_secs(30);
            bloodraven_sidecar::BackupSettings {
                dir: root.join(SITES[index]),
                datadir: Some(server.datadir()),
                mysqld_gate_mark: Some(server.gate_mark()),
                mysql: admin,
            }
        });
        settings
    }

    pub async fn start_sidecar(&self, index: usize) -> RunningSidecar {
        Sidecar::start(self.settings(index))
            .await
            .expect("sidecar starts")
    }

    pub async fn stop_sidecar(&mut self, index: usize) {
        if let Some(running) = self.sidecars[index].take() {
            running.stop().await.expect("sidecar stops");
        }
    }

    pub async fn restart_sidecar(&mut self, index: usize) {
        self.stop_sidecar(index).await;
        let running = self.start_sidecar(index).await;
        self.sidecars[index] = Some(running);
    }

    pub fn server(&self, index: usize) -> &MariaDbServer {
        &self.topology.servers[index]
    }

    pub fn url(&self, index: usize, path: &str) -> String {
        format!("http://{}{path}", self.sidecar_addresses[index])
    }

    /// `POST path` on site `index`, signed by the operator's key.
    pub fn operator_post(
        &self,
        index: usize,
        path: &str,
        body: &impl serde::Serialize,
    ) -> reqwest::RequestBuilder {
        signed_request(
            &self.http,
            Signer::Operator,
            GROUP,
            SITES[index],
            reqwest::Method::POST,
            &self.url(index, path),
            body,
        )
    }

    /// `POST path` on site `index`, signed by the group's peer key (a lease request).
    pub fn peer_post(
        &self,
        index: usize,
        path: &str,
        body: &impl serde::Serialize,
    ) -> reqwest::RequestBuilder {
        signed_request(
            &self.http,
            Signer::Peer,
            GROUP,
            SITES[index],
            reqwest::Method::POST,
            &self.url(index, path),
            body,
        )
    }

    pub async fn push_authority(
        &self,
        index: usize,
        active_site: Option<&str>,
        generation: u64,
    ) -> AuthorityResponse {
        let authority = Authority {
            group: GROUP.to_owned(),
            active_site: active_site.map(str::to_owned),
            topology_generation: generation,
            issued_at: Timestamp::from_unix_millis(0),
            moving_from: None,
        };
        signed_request(
            &self.http,
            Signer::Operator,
            GROUP,
            SITES[index],
            reqwest::Method::PUT,
            &self.url(index, PATH_AUTHORITY),
            &authority,
        )
        .send()
        .await
        .expect("authority push")
        .json()
        .await
        .expect("authority response")
    }

    pub async fn push_authority_to_all(&self, active_site: Option<&str>, generation: u64) {
        for index in 0..SITES.len() {
            if self.sidecars[index].is_some() {
                self.push_authority(index, active_site, generation).await;
            }
        }
    }

    /// The sidecar's Prometheus text.
    pub async fn metrics(&self, index: usize) -> String {
        self.http
            .get(self.url(index, bloodraven_api::sidecar::PATH_METRICS))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body")
    }

    pub async fn status(&self, index: usize) -> SidecarStatus {
        self.http
            .get(self.url(index, PATH_STATUS))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("status body")
    }

    /// mysqld's fencing flag as read directly (not through the sidecar).
    ///
    /// Retried: a sidecar fencing past a table lock kills every client connection, this
    /// observer's included.
    pub async fn read_only(&self, index: usize) -> bool {
        const ATTEMPTS_MAX: usize = 5;
        let mut last_error = None;
        for _ in 0..ATTEMPTS_MAX {
            match self.server(index).admin_client().observe().await {
                Ok(snapshot) => return snapshot.read_only.fenced,
                Err(error) => last_error = Some(error),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "observe {} failed {ATTEMPTS_MAX} times: {last_error:?}",
            SITES[index]
        );
    }

    /// Polls until mysqld's read_only equals `wanted`; returns how long it took.
    pub async fn wait_read_only(&self, index: usize, wanted: bool, within: Duration) -> Duration {
        let started = tokio::time::Instant::now();
        loop {
            if self.read_only(index).await == wanted {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "{} read_only did not become {wanted} within {within:?}",
                SITES[index]
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates the app database and user on iad (replicated) through the grant builder.
    pub async fn create_app_user(&self) {
        let admin = self.server(0).admin_client();
        let mut conn = admin.connect().await.expect("admin connects");
        for statement in [
            "CREATE DATABASE IF NOT EXISTS app".to_owned(),
            "CREATE TABLE IF NOT EXISTS app.counter (id INT PRIMARY KEY, value BIGINT NOT NULL)"
                .to_owned(),
            create_app_user(APP_USER, "%", APP_PASSWORD).expect("create user"),
            app_user_grant("app", APP_USER, "%").expect("grant"),
        ] {
            admin.execute(&mut conn, &statement).await.expect("setup");
        }
    }

    /// One increment as the app user on site `index`.
    pub async fn app_write(&self, index: usize) -> Result<(), LiveError> {
        let app = LiveMysql::new(
            Flavor::MariaDb,
            self.server(index).options(APP_USER, APP_PASSWORD),
        );
        let mut conn = app.connect().await?;
        app.execute(
            &mut conn,
            "INSERT INTO app.counter (id, value) VALUES (1, 1) ON DUPLICATE KEY UPDATE value = value + 1",
        )
        .await
    }
}

impl Playground {
    /// Gives the sidecar's user `CREATE` on iad (replicated), which `POST /v1/databases`
    /// needs beyond the sandbox's `SIDECAR_PRIVILEGES_MARIADB`.
    pub async fn grant_sidecar_create(&self) {
        let admin = self.server(0).admin_client();
        let mut conn = admin.connect().await.expect("admin connects");
        admin
            .execute(
                &mut conn,
                &format!("GRANT CREATE ON *.* TO '{SIDECAR_USER}'@'%'"),
            )
            .await
            .expect("grant create");
    }

    /// The schema names on site `index`, read directly (not through the sidecar).
    pub async fn schemas(&self, index: usize) -> Vec<String> {
        let admin = self.server(index).admin_client();
        let mut conn = admin.connect().await.expect("admin connects");
        admin
            .rows(
                &mut conn,
                "SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA",
            )
            .await
            .expect("list schemas")
            .into_iter()
            .filter_map(|mut row| row.remove("name").flatten())
            .collect()
    }

    /// `POST /v1/databases` on site `index`: the status code and the body as JSON.
    pub async fn ensure_database(
        &self,
        index: usize,
        group: &str,
        database: &str,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        let response = self
            .operator_post(
                index,
                bloodraven_api::sidecar::PATH_DATABASES,
                &bloodraven_api::sidecar::EnsureDatabaseRequest {
                    group: group.to_owned(),
                    database: database.to_owned(),
                },
            )
            .send()
            .await
            .expect("ensure database");
        let status = response.status();
        (status, response.json().await.expect("json body"))
    }
}
