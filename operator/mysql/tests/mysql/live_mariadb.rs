//! The live client against real MariaDB (Debian's mariadb-server): three `mariadbd` on
//! loopback addresses with GTID replication. A missing `mariadbd` fails these tests with a
//! message naming the package; nothing is skipped.

use std::time::Duration;

use bloodraven_mysql::{
    grants::{app_user_grant, create_app_user},
    live::{
        sandbox::{MariaDbServer, Topology, ADMIN_PASSWORD, ADMIN_USER},
        LiveError, LiveMysql, Observed,
    },
    Flavor, GtidSet, WaitOutcome,
};
use mysql_async::prelude::Queryable;

const APP_USER: &str = "counter";
const APP_PASSWORD: &str = "counter-secret";

async fn topology() -> Topology {
    match Topology::start(&["iad", "pdx", "reader"]).await {
        Ok(topology) => topology,
        Err(error) => {
            panic!("failed to start three mariadbd (CI installs mariadb-server): {error}")
        }
    }
}

/// Creates the `app` database and the app user through the grant builder on `source`.
async fn create_app_user_on(source: &MariaDbServer) {
    let admin = source.admin_client();
    let mut conn = admin.connect().await.expect("admin connects");
    for statement in [
        "CREATE DATABASE IF NOT EXISTS app".to_owned(),
        "CREATE TABLE IF NOT EXISTS app.counter (id INT PRIMARY KEY, value BIGINT NOT NULL)"
            .to_owned(),
        create_app_user(APP_USER, "%", APP_PASSWORD).expect("create user statement"),
        app_user_grant("app", APP_USER, "%").expect("grant statement"),
    ] {
        admin
            .execute(&mut conn, &statement)
            .await
            .expect("setup statement runs");
    }
}

async fn app_write(server: &MariaDbServer) -> Result<(), LiveError> {
    let app = LiveMysql::new(Flavor::MariaDb, server.options(APP_USER, APP_PASSWORD));
    let mut conn = app.connect().await?;
    app.execute(
        &mut conn,
        "INSERT INTO app.counter (id, value) VALUES (1, 1) \
         ON DUPLICATE KEY UPDATE value = value + 1",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_observe_fence_unfence_and_app_user_gets_1290_when_fenced() {
    let topology = topology().await;
    let [iad, pdx, reader] = topology.servers.as_slice() else {
        panic!("three servers");
    };
    // mysqld always starts read-only.
    let observed = iad.admin_client().observe().await.expect("observe iad");
    assert!(observed.read_only.fenced);
    assert!(observed.replication.is_none());
    assert!(!observed.server.server_id.is_empty());

    let unfence = iad.admin_client().unfence().await;
    assert!(unfence.error.is_none(), "{:?}", unfence.error);
    assert_eq!(unfence.applied, Observed::Known(true));
    create_app_user_on(iad).await;
    app_write(iad)
        .await
        .expect("app user writes on the unfenced primary");

    // Replicas replicate from iad with GTIDs, read-only.
    let source_gtids = iad
        .admin_client()
        .observe()
        .await
        .expect("observe")
        .gtid_executed;
    let wanted = GtidSet::parse(Flavor::MariaDb, &source_gtids).expect("parse gtid set");
    for replica in [pdx, reader] {
        let client = replica.admin_client();
        let outcome = client
            .wait_for_gtid_set(&wanted, Duration::from_secs(20))
            .await
            .expect("wait runs");
        assert_eq!(outcome, WaitOutcome::Reached);
        let observed = client.observe().await.expect("observe replica");
        assert!(observed.read_only.fenced);
        let replication = observed.replication.expect("replica has replication");
        assert!(replication.io_running && replication.sql_running);
        assert_eq!(replication.source_host, iad.address().ip().to_string());
        assert_eq!(replication.seconds_behind_source, Some(0));
    }

    // Fencing: the app user (no privilege bypassing read_only) gets ERROR 1290.
    let fence = iad.admin_client().fence().await;
    assert!(fence.is_applied());
    let refused = app_write(iad)
        .await
        .expect_err("write refused on a fenced site");
    assert_eq!(refused.server_code(), Some(1290), "{refused}");
    // And on a replica, which is read-only from the start.
    let refused = app_write(pdx)
        .await
        .expect_err("write refused on a replica");
    assert_eq!(refused.server_code(), Some(1290), "{refused}");
}

/// A TCP proxy to `upstream` that forwards requests at once and delays every response chunk
/// by `delay`: the server applies a statement long before the client hears back.
async fn slow_response_proxy(
    upstream: std::net::SocketAddr,
    delay: Duration,
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind proxy");
    let address = listener.local_addr().expect("proxy address");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                let mut buffer = vec![0u8; 64 * 1024];
                loop {
                    let read = match server_read.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(read) => read,
                    };
                    tokio::time::sleep(delay).await;
                    if client_write.write_all(&buffer[..read]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_001_timed_out_set_global_is_reread_not_assumed_failed() {
    let topology = topology().await;
    let iad = &topology.servers[0];
    let admin = iad.admin_client();
    assert!(admin.unfence().await.is_applied());
    // Through a link whose answers take 400 ms, a 100 ms client timeout gives up on
    // SET GLOBAL read_only = ON after the server has applied it.
    let proxy = slow_response_proxy(iad.address(), Duration::from_millis(400)).await;
    let mut options = iad.options(ADMIN_USER, ADMIN_PASSWORD);
    options.host = proxy.ip().to_string();
    options.port = proxy.port();
    options.connect_timeout = Duration::from_secs(20);
    options.statement_timeout = Duration::from_secs(20);
    let impatient =
        LiveMysql::new(Flavor::MariaDb, options).with_mutation_timeout(Duration::from_millis(100));
    let outcome = impatient.fence().await;
    assert!(
        outcome.error.as_ref().is_some_and(LiveError::is_timeout),
        "{:?}",
        outcome.error
    );
    // The client timed out, the server applied it, and the outcome reports what the re-read
    // found: applied. Treating the error as "did not happen" is the bug
    // docs/design/requirements.md R001.15 describes.
    assert_eq!(outcome.applied, Observed::Known(true));
    assert!(admin.observe().await.expect("observe").read_only.fenced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_001_blocked_set_global_times_out_and_reports_the_reread_state() {
    let topology = topology().await;
    let iad = &topology.servers[0];
    let admin = iad.admin_client();
    assert!(admin.unfence().await.is_applied());
    create_app_user_on(iad).await;
    // LOCK TABLES ... WRITE makes SET GLOBAL read_only = ON wait for the lock.
    let mut holder = admin.connect().await.expect("connect");
    admin
        .execute(&mut holder, "LOCK TABLES app.counter WRITE")
        .await
        .expect("lock");
    let impatient = iad
        .admin_client()
        .with_mutation_timeout(Duration::from_millis(300));
    let outcome = impatient.fence().await;
    assert!(
        outcome.error.as_ref().is_some_and(LiveError::is_timeout),
        "{:?}",
        outcome.error
    );
    // Re-read, not assumed: the server is still writable and the outcome says so.
    assert_eq!(outcome.applied, Observed::Known(false));
    assert!(outcome.snapshot.is_some_and(|s| !s.read_only.fenced));
    admin
        .execute(&mut holder, "UNLOCK TABLES")
        .await
        .expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_kill_client_connections_spares_replication_and_itself() {
    let topology = topology().await;
    let [iad, pdx, _reader] = topology.servers.as_slice() else {
        panic!("three servers");
    };
    assert!(iad.admin_client().unfence().await.is_applied());
    create_app_user_on(iad).await;
    let app = LiveMysql::new(Flavor::MariaDb, iad.options(APP_USER, APP_PASSWORD));
    let mut held = app.connect().await.expect("app connects");
    let killed = iad
        .admin_client()
        .kill_client_connections(&[bloodraven_mysql::live::sandbox::REPLICATION_USER])
        .await
        .expect("kill runs");
    assert!(killed >= 1, "the app connection is killed");
    let after: Result<Vec<mysql_async::Row>, _> = held.query("SELECT 1").await;
    assert!(after.is_err(), "killed connection is closed");
    // Replication threads survive: pdx still replicates.
    app_write(iad).await.expect("write after kill");
    let gtids = iad
        .admin_client()
        .observe()
        .await
        .expect("observe")
        .gtid_executed;
    let wanted = GtidSet::parse(Flavor::MariaDb, &gtids).expect("parse");
    let reached = pdx
        .admin_client()
        .wait_for_gtid_set(&wanted, Duration::from_secs(20))
        .await
        .expect("wait");
    assert_eq!(reached, WaitOutcome::Reached);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_detach_then_repoint_to_another_source() {
    let topology = topology().await;
    let [iad, pdx, reader] = topology.servers.as_slice() else {
        panic!("three servers");
    };
    // Promote pdx: detach it, then repoint the reader and iad to it.
    let detach = pdx.admin_client().detach().await;
    assert!(detach.is_applied(), "{:?}", detach.error);
    assert!(detach.snapshot.is_some_and(|s| s.replication.is_none()));
    for server in [reader, iad] {
        let repoint = server.admin_client().repoint(&pdx.as_source()).await;
        assert!(
            repoint.is_applied(),
            "{:?} {:?}",
            repoint.applied,
            repoint.error
        );
    }
    let stop = reader.admin_client().stop_replication().await;
    assert!(stop.is_applied());
    let start = reader.admin_client().start_replication().await;
    assert!(start.is_applied());
}
