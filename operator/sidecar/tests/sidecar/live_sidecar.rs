//! The sidecar against real MariaDB: three `mariadbd` with GTID replication and three
//! in-process sidecars finding each other through an in-process DNS zone. A missing
//! `mariadbd` fails these tests with a message naming the package; nothing is skipped.

use std::time::Duration;

use crate::support::{self, Playground, GROUP, LEASE};
use bloodraven_api::sidecar::{
    AuthorityDecision, FenceRequest, FenceResponse, LeaseRefusal, LeaseRequest, LeaseResponse,
    PromoteDrain, PromoteRequest, PromoteResponse, RepointRequest, RepointResponse, PATH_FENCE,
    PATH_LEASE, PATH_PROMOTE, PATH_REPOINT,
};
use bloodraven_mysql::{Flavor, GtidSet};

/// Slack for statement round trips and scheduling on a loaded CI machine.
const SLACK: Duration = Duration::from_millis(1500);

async fn writable_playground() -> Playground {
    let playground = Playground::start().await;
    // Startup safety net first: no authority, everything read-only.
    for index in 0..3 {
        playground.wait_read_only(index, true, SLACK).await;
    }
    playground.push_authority_to_all(Some("iad"), 1).await;
    playground.wait_read_only(0, false, LEASE).await;
    playground
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_rule_primary_with_authority_and_majority_lease_accepts_writes() {
    let playground = writable_playground().await;
    playground.create_app_user().await;
    playground
        .app_write(0)
        .await
        .expect("the app writes on iad");
    let status = playground.status(0).await;
    assert!(status.lease.held, "{status:?}");
    assert!(!status.fenced);
    assert_eq!(status.mysql.read_only, Some(false));
    assert!(status.mysql.mysqld.is_some());
    // Replicas stay read-only and replicate from iad.
    let mut granters = 0;
    for index in [1, 2] {
        let status = playground.status(index).await;
        assert_eq!(status.mysql.read_only, Some(true));
        assert!(status.fenced);
        let replication = status.mysql.replication.expect("replica");
        assert!(replication.running);
        // Peers granted iad recently, on their own clocks.
        if let Some(ago) = status.last_granted_ago_ms.get("iad").copied() {
            assert!(ago < LEASE.as_millis() as u64, "last grant {ago}ms ago");
            granters += 1;
        }
    }
    assert!(
        granters >= 1,
        "a majority lease needs at least one peer's grant"
    );
    let metrics = playground.metrics(0).await;
    assert!(
        metrics.contains("bloodraven_sidecar_lease_held 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_rule_primary_cut_off_from_both_peers_fences_itself_within_lease_duration() {
    let mut playground = writable_playground().await;
    playground.create_app_user().await;
    playground
        .app_write(0)
        .await
        .expect("writes before the partition");
    let cut_at = tokio::time::Instant::now();
    playground.stop_sidecar(1).await;
    playground.stop_sidecar(2).await;
    playground.wait_read_only(0, true, LEASE + SLACK).await;
    let took = cut_at.elapsed();
    assert!(took <= LEASE + SLACK, "fenced after {took:?}");
    let refused = playground
        .app_write(0)
        .await
        .expect_err("fenced site refuses the app user");
    assert_eq!(refused.server_code(), Some(1290), "{refused}");
    // It stays fenced: no majority, whatever its authority says.
    tokio::time::sleep(LEASE).await;
    assert!(playground.read_only(0).await);
    assert!(!playground.status(0).await.lease.held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_safety_net_restarted_sidecar_without_authority_keeps_mysql_read_only() {
    let mut playground = writable_playground().await;
    playground.restart_sidecar(0).await;
    // The new sidecar has no authority: it sets read_only within a tick and keeps it, even
    // though its peers still hold an authority naming iad.
    playground.wait_read_only(0, true, LEASE / 3 + SLACK).await;
    tokio::time::sleep(LEASE * 2).await;
    assert!(playground.read_only(0).await, "no authority, no writes");
    let status = playground.status(0).await;
    assert!(status.authority.is_none());
    assert!(status.fenced);
    // The safety net itself undid the writable mysqld (scenario 012 asserts this counter).
    let metrics = playground.metrics(0).await;
    assert!(
        metrics.contains("bloodraven_sidecar_writable_fences_total{reason=\"no_authority\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("bloodraven_sidecar_authority_generation -1"),
        "{metrics}"
    );
    // Primary reassertion: the operator re-issues authority, it becomes writable again.
    playground.push_authority(0, Some("iad"), 1).await;
    playground.wait_read_only(0, false, LEASE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_mismatch_rule_read_only_cleared_by_hand_on_replica_is_set_again_within_one_tick()
{
    let playground = writable_playground().await;
    let before = playground.metrics(1).await;
    assert!(
        before.contains("bloodraven_sidecar_topology_mismatches_total 0"),
        "{before}"
    );
    let pdx = playground.server(1).admin_client();
    let mut conn = pdx.connect().await.expect("connect");
    // mysqld's write deadline would fence pdx too, within its switch period (pdx never armed
    // one), and usually first: with its event stopped, only the rule can.
    pdx.execute(&mut conn, "SET GLOBAL event_scheduler = OFF")
        .await
        .expect("stop the write deadline's event");
    pdx.execute(&mut conn, "SET GLOBAL read_only = OFF")
        .await
        .expect("clear read_only by hand");
    let took = playground.wait_read_only(1, true, LEASE / 3 + SLACK).await;
    assert!(took <= LEASE / 3 + SLACK, "re-fenced after {took:?}");
    // The rule fenced it: the sidecar saw it writable under iad's authority.
    let after = playground.metrics(1).await;
    assert!(
        after.contains("bloodraven_sidecar_topology_mismatches_total 1"),
        "{after}"
    );
    assert!(
        after.contains("bloodraven_sidecar_fences_total{reason=\"other_site_active\"} 1"),
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authority_moving_notice_makes_peers_refuse_and_old_primary_fences() {
    let playground = writable_playground().await;
    let moved_at = tokio::time::Instant::now();
    // The moving notice is issued for the next generation; the promotion completes it.
    let mut granted_iad = 0;
    for index in [1, 2] {
        let response = playground.push_authority(index, None, 2).await;
        assert_eq!(response.decision, AuthorityDecision::Accepted);
        granted_iad += usize::from(response.last_granted_ago_ms.contains_key("iad"));
    }
    // iad is writable, so at least one peer (with iad itself, a majority) granted it; the
    // operator reads these ages before promoting.
    assert!(granted_iad >= 1);
    let answer: LeaseResponse = playground
        .peer_post(
            1,
            PATH_LEASE,
            &LeaseRequest {
                group: GROUP.to_owned(),
                site: "iad".to_owned(),
                topology_generation: 1,
            },
        )
        .send()
        .await
        .expect("lease")
        .json()
        .await
        .expect("lease body");
    assert_eq!(answer.reason, Some(LeaseRefusal::AuthorityMoving));
    playground.wait_read_only(0, true, LEASE + SLACK).await;
    assert!(moved_at.elapsed() <= LEASE + SLACK);
    // A stale authority cannot move it back.
    let stale = playground.push_authority(1, Some("iad"), 1).await;
    assert_eq!(stale.decision, AuthorityDecision::RefusedStale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_failover_fence_promote_repoint_through_the_sidecar_api() {
    let playground = writable_playground().await;
    playground.create_app_user().await;
    playground.app_write(0).await.expect("write on iad");
    // Draining: fence iad explicitly, killing client connections.
    let fenced: FenceResponse = playground
        .operator_post(
            0,
            PATH_FENCE,
            &FenceRequest {
                group: GROUP.to_owned(),
                topology_generation: 1,
                kill_connections: true,
                reason: "planned failover to pdx".to_owned(),
            },
        )
        .send()
        .await
        .expect("fence")
        .json()
        .await
        .expect("fence body");
    assert_eq!(fenced.read_only.observed.read_only, Some(true));
    assert!(fenced.killed_connections.is_some());
    // The explicit fence holds although iad still has authority and lease.
    tokio::time::sleep(LEASE / 2).await;
    assert!(playground.read_only(0).await);
    // Promoting: pdx drains up to iad's GTIDs and detaches.
    let gtids = playground
        .status(0)
        .await
        .mysql
        .gtid_executed
        .expect("gtids");
    let promoted: PromoteResponse = playground
        .operator_post(
            1,
            PATH_PROMOTE,
            &PromoteRequest {
                group: GROUP.to_owned(),
                drain: PromoteDrain::UntilGtidSet(gtids),
                timeout_ms: 20_000,
            },
        )
        .send()
        .await
        .expect("promote")
        .json()
        .await
        .expect("promote body");
    assert!(promoted.drained);
    assert!(
        promoted.detach.error.is_none(),
        "{:?}",
        promoted.detach.error
    );
    assert!(promoted.detach.observed.replication.is_none());
    // Generation 2 names pdx: it gets the lease and becomes writable; iad's fence lifts but
    // it is not the active site.
    playground.push_authority_to_all(Some("pdx"), 2).await;
    playground.wait_read_only(1, false, LEASE + SLACK).await;
    assert!(playground.read_only(0).await);
    for index in [0, 2] {
        let source = playground.server(1).address();
        let repointed: RepointResponse = playground
            .operator_post(
                index,
                PATH_REPOINT,
                &RepointRequest {
                    group: GROUP.to_owned(),
                    source_host: source.ip().to_string(),
                    source_port: source.port(),
                    drain_received_ms: None,
                },
            )
            .send()
            .await
            .expect("repoint")
            .json()
            .await
            .expect("repoint body");
        let replication = repointed.repoint.observed.replication.expect("replicating");
        assert_eq!(
            replication.source_host.as_deref(),
            Some(source.ip().to_string().as_str())
        );
    }
    playground
        .app_write(1)
        .await
        .expect("write on the new primary");
    let refused = playground
        .app_write(0)
        .await
        .expect_err("old primary refuses");
    assert_eq!(refused.server_code(), Some(1290));
}

/// The GTID set mysqld `index` has applied, read directly (not through the sidecar).
async fn applied(playground: &Playground, index: usize) -> GtidSet {
    let snapshot = playground
        .server(index)
        .admin_client()
        .observe()
        .await
        .expect("observe");
    GtidSet::parse(Flavor::MariaDb, &snapshot.gtid_executed).expect("gtid set")
}

/// docs/design/history.md#issue-8 / docs/design/requirements.md R001.8 (the RPO is what had
/// replicated): an emergency promotion applies what the candidate received but had not applied
/// yet before it detaches. pdx's applier is stopped while iad commits, so pdx has received
/// iad's last transactions (its relay log) without applying them; iad then dies. `Received`
/// stops receiving, applies the relay log and detaches: nothing pdx had received is lost
/// (detaching at once would discard it).
/// iad commits five writes while pdx's applier is stopped (pdx receives them into its relay
/// log and applies none), then iad's mysqld dies. With `reader_stopped`, the reader stopped
/// replicating before those writes, so pdx's relay log is their only copy. Returns what iad
/// had committed.
async fn pdx_holds_iads_last_writes_in_its_relay_log_only(
    playground: &mut Playground,
    reader_stopped: bool,
) -> GtidSet {
    playground.create_app_user().await;
    playground.app_write(0).await.expect("write on iad");
    let pdx = playground.server(1).admin_client();
    let mut conn = pdx.connect().await.expect("pdx connects");
    pdx.execute(&mut conn, "STOP SLAVE SQL_THREAD")
        .await
        .expect("stop pdx's applier");
    drop(conn);
    if reader_stopped {
        let reader = playground.server(2).admin_client();
        let mut conn = reader.connect().await.expect("reader connects");
        reader
            .execute(&mut conn, "STOP SLAVE")
            .await
            .expect("stop the reader's replication");
    }
    for _ in 0..5 {
        playground.app_write(0).await.expect("write on iad");
    }
    let committed = applied(playground, 0).await;
    let started = tokio::time::Instant::now();
    loop {
        let received = pdx
            .observe()
            .await
            .expect("observe pdx")
            .replication
            .and_then(|replication| replication.retrieved_gtid_set);
        if received.is_some_and(|received| received.contains(&committed)) {
            break;
        }
        assert!(
            started.elapsed() < SLACK * 4,
            "pdx did not receive {committed}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !applied(playground, 1).await.contains(&committed),
        "pdx holds iad's last transactions only in its relay log"
    );
    if reader_stopped {
        assert!(
            !applied(playground, 2).await.contains(&committed),
            "the reader lacks iad's last transactions"
        );
    }
    playground.topology.servers[0].kill();
    committed
}

/// A failover's catch-up (s043 through the fault agent lost 97 acknowledged writes this way):
/// pdx, holding iad's last writes only in its relay log, is repointed to the reader, which
/// lacks them. A repoint's `CHANGE MASTER` deletes the relay log, so the catch-up repoint
/// (`drainReceivedMs`) applies what pdx received first; an ordinary repoint loses it, which
/// is MariaDB's behaviour this request exists for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_repoint_applies_the_received_relay_log_before_changing_the_source() {
    for drain_received_ms in [Some(20_000), None] {
        let mut playground = writable_playground().await;
        let committed =
            pdx_holds_iads_last_writes_in_its_relay_log_only(&mut playground, true).await;
        let reader = playground.server(2).address();
        let repointed: RepointResponse = playground
            .operator_post(
                1,
                PATH_REPOINT,
                &RepointRequest {
                    group: GROUP.to_owned(),
                    source_host: reader.ip().to_string(),
                    source_port: reader.port(),
                    drain_received_ms,
                },
            )
            .send()
            .await
            .expect("repoint")
            .json()
            .await
            .expect("repoint body");
        assert!(repointed.repoint.error.is_none(), "{repointed:?}");
        let replication = repointed.repoint.observed.replication.expect("replicating");
        assert_eq!(
            replication.source_host.as_deref(),
            Some(reader.ip().to_string().as_str())
        );
        let after = applied(&playground, 1).await;
        match drain_received_ms {
            Some(_) => assert!(
                after.contains(&committed),
                "the catch-up lost {}",
                bloodraven_mysql::lost_transactions(&committed, &after)
            ),
            None => assert!(
                !after.contains(&committed),
                "an ordinary repoint kept the relay log ({after}): the catch-up's drain would be needless"
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emergency_promote_applies_the_received_relay_log_before_detaching() {
    let mut playground = writable_playground().await;
    let committed = pdx_holds_iads_last_writes_in_its_relay_log_only(&mut playground, false).await;

    let promoted: PromoteResponse = playground
        .operator_post(
            1,
            PATH_PROMOTE,
            &PromoteRequest {
                group: GROUP.to_owned(),
                drain: PromoteDrain::Received,
                timeout_ms: 20_000,
            },
        )
        .send()
        .await
        .expect("promote")
        .json()
        .await
        .expect("promote body");
    assert!(promoted.drained, "{promoted:?}");
    assert!(
        promoted.detach.error.is_none(),
        "{:?}",
        promoted.detach.error
    );
    assert!(promoted.detach.observed.replication.is_none());
    let after = applied(&playground, 1).await;
    assert!(
        after.contains(&committed),
        "lost {}",
        bloodraven_mysql::lost_transactions(&committed, &after)
    );
    // A repeated promote (the operator asks every poll until it sees the detachment) has
    // nothing left to drain.
    let again: PromoteResponse = playground
        .operator_post(
            1,
            PATH_PROMOTE,
            &PromoteRequest {
                group: GROUP.to_owned(),
                drain: PromoteDrain::Received,
                timeout_ms: 20_000,
            },
        )
        .send()
        .await
        .expect("promote again")
        .json()
        .await
        .expect("promote body");
    assert!(again.drained && again.detach.error.is_none(), "{again:?}");
    // Generation 2 names pdx: writable, with every acknowledged write of iad.
    playground.push_authority(1, Some("pdx"), 2).await;
    playground.push_authority(2, Some("pdx"), 2).await;
    playground.wait_read_only(1, false, LEASE + SLACK).await;
    playground
        .app_write(1)
        .await
        .expect("write on the new primary");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_reassertion_restarted_mysqld_stays_read_only_until_authority_is_pushed_again() {
    let mut playground = writable_playground().await;
    // Let the run age past the restart detector's slack.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let before = playground.status(0).await.mysql.mysqld.expect("mysqld run");
    playground.topology.servers[0]
        .restart()
        .await
        .expect("mysqld restarts");
    // mysqld comes back read-only and the sidecar, seeing a new run, forgets its authority.
    assert!(playground.read_only(0).await);
    tokio::time::sleep(LEASE * 2).await;
    assert!(
        playground.read_only(0).await,
        "no writes without a fresh authority"
    );
    let status = playground.status(0).await;
    assert!(status.authority.is_none(), "{status:?}");
    let after = status.mysql.mysqld.expect("mysqld run");
    assert!(
        after.started_at > before.started_at,
        "the operator sees the restart"
    );
    // The operator re-issues authority: writable again, no failover.
    playground.push_authority(0, Some("iad"), 1).await;
    playground.wait_read_only(0, false, LEASE + SLACK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_rule_a_client_table_lock_does_not_keep_a_partitioned_primary_writable() {
    let mut playground = writable_playground().await;
    playground.create_app_user().await;
    // The app holds a write lock: SET GLOBAL read_only = ON waits behind it.
    let app = bloodraven_mysql::live::LiveMysql::new(
        bloodraven_mysql::Flavor::MariaDb,
        playground
            .server(0)
            .options(support::APP_USER, support::APP_PASSWORD),
    );
    let mut locker = app.connect().await.expect("app connects");
    app.execute(&mut locker, "LOCK TABLES app.counter WRITE")
        .await
        .expect("lock");
    let cut_at = tokio::time::Instant::now();
    playground.stop_sidecar(1).await;
    playground.stop_sidecar(2).await;
    playground.wait_read_only(0, true, LEASE + SLACK).await;
    assert!(
        cut_at.elapsed() <= LEASE + SLACK,
        "fenced after {:?}",
        cut_at.elapsed()
    );
    // The lock holder was killed to fence.
    let after = app.execute(&mut locker, "UNLOCK TABLES").await;
    assert!(after.is_err(), "the locking connection was killed");
    // Fenced inside the fence lead: the watchdog had nothing to kill.
    let metrics = playground.metrics(0).await;
    assert!(
        metrics.contains("bloodraven_sidecar_watchdog_kills_total 0"),
        "{metrics}"
    );
}

/// Polls until site `index` has the schema `database` (replication carries it).
async fn wait_schema(playground: &Playground, index: usize, database: &str) {
    let started = tokio::time::Instant::now();
    while !playground
        .schemas(index)
        .await
        .iter()
        .any(|name| name == database)
    {
        assert!(
            started.elapsed() < SLACK * 4,
            "{database:?} did not replicate to site {index}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// docs/design/operator.md#mysqldatabase (`MysqlDatabase.spec.database`, created on the
/// primary) / docs/design/history.md#issue-8: the sidecar creates a schema only as the writable
/// active site; a replica, a fenced primary and a bad name are refused before any write, a
/// statement error is re-read and reported, and replication carries the schema to the other
/// sites.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_database_creates_the_schema_only_on_the_writable_active_site() {
    use reqwest::StatusCode;
    let playground = writable_playground().await;

    // Without CREATE the statement fails: re-read, not found, answered 503 with the error.
    let (status, body) = playground.ensure_database(0, GROUP, "counter").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("ensure database \"counter\"") && error.contains("1044"),
        "{error}"
    );
    assert!(!playground.schemas(0).await.contains(&"counter".to_owned()));
    playground.grant_sidecar_create().await;

    // A replica never takes the write, whatever its privileges.
    let (status, body) = playground.ensure_database(1, GROUP, "counter").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("site pdx is not the writable active site (other_site_active)")
            && error.contains("a fenced site never takes a write"),
        "{error}"
    );

    // The active site creates it once; replicas get it by replication.
    let (status, body) = playground.ensure_database(0, GROUP, "counter").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "created", "{body}");
    assert_eq!(body["readOnly"], false, "{body}");
    assert!(playground.schemas(0).await.contains(&"counter".to_owned()));
    for index in [1, 2] {
        wait_schema(&playground, index, "counter").await;
    }
    let (status, body) = playground.ensure_database(0, GROUP, "counter").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "alreadyExisted", "{body}");

    // The name is quoted as an identifier, verbatim; case matters.
    let (_, body) = playground.ensure_database(0, GROUP, "we`ird;name").await;
    assert_eq!(body["outcome"], "created", "{body}");
    let (_, body) = playground.ensure_database(0, GROUP, "Counter").await;
    assert_eq!(body["outcome"], "created", "{body}");
    let schemas = playground.schemas(0).await;
    assert!(
        schemas.contains(&"we`ird;name".to_owned()) && schemas.contains(&"Counter".to_owned()),
        "{schemas:?}"
    );

    // Bad names: 400 naming the field, before (or, for the server's own rule, after) the
    // statement; another group: 409.
    for (database, expected) in [
        ("", "field database is empty"),
        ("a\0b", "field database contains NUL"),
        (
            &"a".repeat(65)[..],
            "field database is longer than 64 characters",
        ),
        ("trailing ", "field database refused by the server"),
    ] {
        let (status, body) = playground.ensure_database(0, GROUP, database).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{database:?}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{database:?}: {error}");
    }
    let (status, _) = playground.ensure_database(0, "other", "counter").await;
    assert_eq!(status, StatusCode::CONFLICT);

    // A fenced primary (planned failover's Draining) takes no write either.
    let fenced = playground
        .operator_post(
            0,
            PATH_FENCE,
            &FenceRequest {
                group: GROUP.to_owned(),
                topology_generation: 1,
                kill_connections: false,
                reason: "planned failover to pdx".to_owned(),
            },
        )
        .send()
        .await
        .expect("fence");
    assert!(fenced.status().is_success());
    let (status, body) = playground.ensure_database(0, GROUP, "after_fence").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let error = body["error"].as_str().unwrap_or_default();
    assert!(error.contains("(explicit_fence)"), "{error}");
    assert!(!playground
        .schemas(0)
        .await
        .contains(&"after_fence".to_owned()));
}

/// docs/design/history.md#issue-10-case-3: a frozen mysqld cannot be fenced, and when it thaws
/// it resumes writable and answers the connections it held. The watchdog kills it when the
/// lease runs out (here: cut off from both peers, so no renewal), before any operator could
/// promote elsewhere, so the write a client sent into the freeze is never acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_frozen_primary_is_killed_when_its_lease_runs_out_and_never_acknowledges_a_held_write(
) {
    use nix::{sys::signal::Signal, unistd::Pid};

    let mut playground = writable_playground().await;
    playground.create_app_user().await;
    playground
        .app_write(0)
        .await
        .expect("writes before the freeze");
    // A client connected before the freeze that waits as long as it takes.
    let mut options = playground
        .server(0)
        .options(support::APP_USER, support::APP_PASSWORD);
    options.statement_timeout = Duration::from_secs(60);
    let app = bloodraven_mysql::live::LiveMysql::new(Flavor::MariaDb, options);
    let mut conn = app.connect().await.expect("the app connects");
    let pid = Pid::from_raw(
        i32::try_from(playground.server(0).pid().expect("mariadbd runs")).expect("pid"),
    );
    nix::sys::signal::kill(pid, Signal::SIGSTOP).expect("freeze mariadbd");
    wait_until_stopped(pid.as_raw()).await;
    let frozen_at = tokio::time::Instant::now();
    let held = tokio::spawn(async move {
        app.execute(
            &mut conn,
            "INSERT INTO app.counter (id, value) VALUES (1, 1) ON DUPLICATE KEY UPDATE value = value + 1",
        )
        .await
    });
    playground.stop_sidecar(1).await;
    playground.stop_sidecar(2).await;
    while !playground.topology.servers[0].exited() {
        assert!(
            frozen_at.elapsed() <= LEASE + SLACK,
            "the frozen mysqld still runs {:?} after the freeze",
            frozen_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Thaw, as the fault's end does: a killed process has nothing to resume.
    let _ = nix::sys::signal::kill(pid, Signal::SIGCONT);
    let outcome = tokio::time::timeout(Duration::from_secs(30), held)
        .await
        .expect("the held write ends")
        .expect("join");
    assert!(
        outcome.is_err(),
        "a site whose lease ran out acknowledged a write it held through a freeze"
    );
    let metrics = playground.metrics(0).await;
    assert!(
        metrics.contains("bloodraven_sidecar_watchdog_kills_total 1"),
        "{metrics}"
    );
    // It restarts read-only (startup), with the held write nowhere.
    playground.topology.servers[0]
        .restart()
        .await
        .expect("mariadbd restarts");
    assert!(playground.read_only(0).await);
}

/// docs/design/history.md#issue-10-case-2: the primary's sidecar killed and kept down. Nobody
/// is left to fence mysqld, so mysqld fences itself: its write deadline (a dead man's switch
/// the sidecar kept ahead of the lease) passes before the lease the peers granted could run
/// out, and both a connection held from before and a new one get ERROR 1290. Without the switch
/// mysqld stays writable for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_sidecar_primary_mysqld_fences_itself_at_its_write_deadline_before_the_lease_ends() {
    let mut playground = writable_playground().await;
    playground.create_app_user().await;
    let app = bloodraven_mysql::live::LiveMysql::new(
        Flavor::MariaDb,
        playground
            .server(0)
            .options(support::APP_USER, support::APP_PASSWORD),
    );
    let mut held = app.connect().await.expect("the app connects");
    let increment =
        "INSERT INTO app.counter (id, value) VALUES (1, 1) ON DUPLICATE KEY UPDATE value = value + 1";
    app.execute(&mut held, increment)
        .await
        .expect("writes before the sidecar dies");
    let metrics = playground.metrics(0).await;
    assert!(
        !metrics.contains("bloodraven_sidecar_write_deadline_seconds -1"),
        "the writable primary armed its deadline: {metrics}"
    );
    playground.stop_sidecar(0).await;
    let killed_at = tokio::time::Instant::now();
    // The peers' grants, given at the latest just before the kill, last LEASE.
    let took = playground.wait_read_only(0, true, LEASE + SLACK).await;
    assert!(
        took <= LEASE + SLACK,
        "fenced {took:?} after its sidecar died"
    );
    let refused = app
        .execute(&mut held, increment)
        .await
        .expect_err("a connection held from before is refused");
    assert_eq!(refused.server_code(), Some(1290), "{refused}");
    let refused = playground
        .app_write(0)
        .await
        .expect_err("a new connection is refused");
    assert_eq!(refused.server_code(), Some(1290), "{refused}");
    // It stays so while the sidecar is down, and the peers hold no lease for iad any more.
    tokio::time::sleep(LEASE).await;
    assert!(playground.read_only(0).await);
    assert!(killed_at.elapsed() >= LEASE);
    // A sidecar that comes back has no authority (startup safety net) and keeps it read-only.
    playground.restart_sidecar(0).await;
    tokio::time::sleep(LEASE / 3 + SLACK).await;
    assert!(playground.read_only(0).await);
}

/// The switch is each server's own: arming it on the primary, tick after tick, adds no GTID
/// (a fenced server writing its deadline must not create an errant transaction), and every
/// server has its own table and event, installed with the sidecar's limited privileges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_deadline_is_armed_on_the_primary_only_and_never_reaches_the_binlog() {
    let playground = writable_playground().await;
    let before = applied(&playground, 0).await;
    tokio::time::sleep(LEASE).await;
    assert_eq!(
        applied(&playground, 0).await,
        before,
        "arming wrote to the binlog"
    );
    for index in 0..3 {
        let admin = playground.server(index).admin_client();
        let remaining_ms = admin
            .write_deadline_remaining_ms()
            .await
            .expect("read the deadline")
            .unwrap_or_else(|| panic!("server {index} has no write deadline"));
        let lease_ms = i64::try_from(LEASE.as_millis()).expect("lease");
        if index == 0 {
            assert!(
                remaining_ms > 0 && remaining_ms < lease_ms,
                "the primary's deadline lies within its lease: {remaining_ms}ms"
            );
        } else {
            assert!(
                remaining_ms < 0,
                "a replica's deadline is passed: {remaining_ms}ms"
            );
        }
    }
}

/// docs/design/history.md#issue-10-case-7: the status endpoint never reports a read-only it saw
/// while an unfence was in flight. The operator skips the lease wait when the old primary's
/// sidecar reports read-only under an authority that no longer names it; a status read between
/// the enforcer's decision to unfence (under the old authority) and the `SET` would be exactly
/// that report, just before mysqld turns writable. The unfence is held in flight here by a
/// table lock on the write deadline, which the enforcer arms before it clears read_only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_never_reports_read_only_while_an_unfence_is_in_flight() {
    // A long lease: the deadline arm's bound (the fence bound, at most the 2 s statement
    // timeout) leaves time to push a notice and read the status while it waits.
    let playground = Playground::start_with_lease(Duration::from_secs(30)).await;
    for index in 0..3 {
        playground.wait_read_only(index, true, SLACK).await;
    }
    let admin = playground.server(0).admin_client();
    let mut locker = admin.connect().await.expect("admin connects");
    let started = tokio::time::Instant::now();
    // The sidecar installs the write deadline on its first enforcement.
    loop {
        let events = admin
            .rows(
                &mut locker,
                "SELECT EVENT_NAME FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'bloodraven_sidecar'",
            )
            .await
            .expect("read events");
        if !events.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < SLACK * 4,
            "write deadline not installed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin
        .execute(
            &mut locker,
            "LOCK TABLES bloodraven_sidecar.write_deadline WRITE",
        )
        .await
        .expect("lock the write deadline");
    // iad gains authority and lease (peers first: with a 30 s lease a refused first round is
    // retried only 10 s later): its enforcer decides to unfence and blocks arming.
    for index in [1, 2, 0] {
        playground.push_authority(index, Some("iad"), 1).await;
    }
    let started = tokio::time::Instant::now();
    while !playground.status(0).await.lease.held {
        assert!(started.elapsed() < SLACK, "iad gained no lease");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The operator announces a move; iad's sidecar caches it at once.
    let moved = playground.push_authority(0, None, 2).await;
    assert_eq!(moved.decision, AuthorityDecision::Accepted);
    let status = playground.status(0).await;
    assert_eq!(
        status
            .authority
            .as_ref()
            .map(|a| (a.active_site.clone(), a.topology_generation)),
        Some((None, 2))
    );
    assert!(
        playground.read_only(0).await,
        "the unfence is still in flight"
    );
    assert_ne!(
        status.mysql.read_only,
        Some(true),
        "a read-only seen mid-unfence is no confirmation: {:?}",
        status.mysql
    );
    assert!(
        status
            .mysql
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("unfence"),
        "{:?}",
        status.mysql
    );
    // The arm completes; the unfence decided under generation 1 must not land under the notice.
    admin
        .execute(&mut locker, "UNLOCK TABLES")
        .await
        .expect("unlock");
    let released = tokio::time::Instant::now();
    while released.elapsed() < SLACK {
        assert!(
            playground.read_only(0).await,
            "mysqld became writable after the move notice"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A writable moment may be too short to catch by polling; the sidecar counts unfences.
    let metrics = playground.metrics(0).await;
    assert!(
        metrics.contains("bloodraven_sidecar_unfences_total 0"),
        "an unfence decided under generation 1 landed after the notice: {metrics}"
    );
    let status = playground.status(0).await;
    assert_eq!(status.mysql.read_only, Some(true), "{:?}", status.mysql);
    assert_eq!(
        status.runtime.map(|runtime| runtime.lease.duration_ms),
        Some(30_000),
        "the sidecar reports the lease it runs with"
    );
}

/// Waits until every thread of `pid` is stopped (`T` in `/proc/<pid>/task/*/stat`). kill(2)
/// returns before a multi-threaded process has stopped: a statement sent meanwhile can be
/// executed and acknowledged before the freeze takes effect, under a lease that is still
/// valid, which is no fencing failure (on a loaded CI machine the held write was answered
/// that way). localkube's freeze waits the same way (`wait_group_stopped`).
async fn wait_until_stopped(pid: i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let tasks =
            std::fs::read_dir(format!("/proc/{pid}/task")).expect("read mariadbd's threads");
        let running = tasks.filter_map(Result::ok).any(|task| {
            std::fs::read_to_string(task.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    rest.trim_start().chars().next()
                })
                .is_some_and(|state| !matches!(state, 'T' | 't' | 'Z' | 'X'))
        });
        if !running {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "mariadbd {pid} still has running threads 10 s after SIGSTOP"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
