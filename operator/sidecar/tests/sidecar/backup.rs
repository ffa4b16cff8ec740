//! Backup, restore in place and re-seed against real MariaDB
//! (docs/design/history.md#issue-12-part-2): three `mariadbd` with GTID replication and three
//! in-process sidecars, as in `live_sidecar`.

use std::time::Duration;

use crate::support::{Playground, GROUP, LEASE};
use bloodraven_api::sidecar::{
    BackupInfo, BackupRequest, FenceRequest, JobKind, JobState, JobStatus, ReseedRequest,
    RestoreRequest, PATH_BACKUP, PATH_FENCE, PATH_RESEED, PATH_RESTORE,
};
use bloodraven_api::RestoreMethod;
use bloodraven_mysql::live::LiveMysql;

pub(crate) const SLACK: Duration = Duration::from_millis(1500);
pub(crate) const JOB_WITHIN: Duration = Duration::from_secs(120);

pub(crate) struct Dir(pub(crate) std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn backup_root(test: &str) -> Dir {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Dir(std::env::temp_dir().join(format!(
        "bloodraven-backups-{test}-{}-{stamp}",
        std::process::id()
    )))
}

pub(crate) async fn writable(root: &Dir) -> Playground {
    let playground = Playground::start_with_backups(root.0.clone()).await;
    for index in 0..3 {
        playground.wait_read_only(index, true, SLACK).await;
    }
    playground.push_authority_to_all(Some("iad"), 1).await;
    playground.wait_read_only(0, false, LEASE).await;
    playground
}

pub(crate) async fn sql(playground: &Playground, index: usize, statement: &str) {
    let admin = playground.server(index).admin_client();
    let mut conn = admin.connect().await.expect("admin connects");
    admin.execute(&mut conn, statement).await.expect(statement);
}

pub(crate) async fn ids(playground: &Playground, index: usize) -> Vec<String> {
    let admin = playground.server(index).admin_client();
    let mut conn = admin.connect().await.expect("admin connects");
    admin
        .rows(&mut conn, "SELECT id AS id FROM app.items ORDER BY id")
        .await
        .expect("read items")
        .into_iter()
        .filter_map(|mut row| row.remove("id").flatten())
        .collect()
}

pub(crate) async fn binlog_state(mysql: &LiveMysql) -> String {
    let mut conn = mysql.connect().await.expect("connects");
    mysql
        .rows(&mut conn, "SELECT @@GLOBAL.gtid_binlog_state AS s")
        .await
        .expect("state")
        .remove(0)
        .remove("s")
        .flatten()
        .unwrap_or_default()
}

pub(crate) async fn post(
    playground: &Playground,
    index: usize,
    path: &str,
    body: &impl serde::Serialize,
) -> (reqwest::StatusCode, serde_json::Value) {
    let response = playground
        .operator_post(index, path, body)
        .send()
        .await
        .expect("post");
    let status = response.status();
    (status, response.json().await.expect("json"))
}

/// Polls the status until the job `(kind, name, id)` is no longer running.
pub(crate) async fn finished(
    playground: &Playground,
    index: usize,
    kind: JobKind,
    name: &str,
    id: u64,
) -> JobStatus {
    let started = tokio::time::Instant::now();
    loop {
        if let Some(job) = playground.status(index).await.job {
            if job.is(kind, name, id) && job.state != JobState::Running {
                return job;
            }
        }
        assert!(
            started.elapsed() < JOB_WITHIN,
            "{kind:?} {name} did not finish within {JOB_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_restore_in_place_and_reseed_keep_exactly_the_backups_transactions() {
    let root = backup_root("restore");
    let playground = writable(&root).await;
    sql(&playground, 0, "CREATE DATABASE app").await;
    sql(
        &playground,
        0,
        "CREATE TABLE app.items (id INT PRIMARY KEY) ENGINE=InnoDB",
    )
    .await;
    sql(&playground, 0, "INSERT INTO app.items VALUES (1), (2), (3)").await;
    let iad = playground.server(0).admin_client();
    let at_backup = binlog_state(&iad).await;

    // The backup: a logical dump at the snapshot's GTID set, and a prepared physical copy.
    let request = BackupRequest {
        group: GROUP.to_owned(),
        name: "b1".to_owned(),
    };
    let (status, body) = post(&playground, 0, PATH_BACKUP, &request).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Backup, "b1", 0).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let backups: Vec<BackupInfo> = playground.status(0).await.backups;
    assert_eq!(backups.len(), 1, "{backups:?}");
    let backup = &backups[0];
    assert_eq!(backup.gtid_set, at_backup);
    assert_eq!(backup.databases, vec!["app".to_owned()]);
    assert_eq!(backup.site, "iad");
    assert!(backup.logical_bytes > 0);
    assert!(backup.physical, "mariadb-backup is installed by ./setup");
    let physical = root.0.join("iad").join("b1").join("physical");
    let binlog_info = std::fs::read_to_string(physical.join("mariadb_backup_binlog_info"))
        .or_else(|_| std::fs::read_to_string(physical.join("xtrabackup_binlog_info")))
        .expect("the physical copy records its binlog position");
    assert!(binlog_info.contains(&at_backup), "{binlog_info}");
    // Asking again answers the same job: idempotent.
    let (status, body) = post(&playground, 0, PATH_BACKUP, &request).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    assert_eq!(body["state"], "Succeeded", "{body}");

    // Written after the backup: what the restore loses.
    sql(&playground, 0, "INSERT INTO app.items VALUES (4), (5)").await;
    sql(&playground, 0, "CREATE DATABASE later").await;
    let before_restore = binlog_state(&iad).await;
    assert_ne!(before_restore, at_backup);

    // Refused while not fenced, and for a backup that does not exist.
    let restore = RestoreRequest {
        group: GROUP.to_owned(),
        name: "b1".to_owned(),
        restore_id: 2,
        method: RestoreMethod::Logical,
    };
    let (status, body) = post(&playground, 0, PATH_RESTORE, &restore).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or("")
            .contains("no explicit fence"),
        "{body}"
    );
    let fence = FenceRequest {
        group: GROUP.to_owned(),
        topology_generation: 1,
        kill_connections: true,
        reason: "restore in place".to_owned(),
    };
    let (status, body) = post(&playground, 0, PATH_FENCE, &fence).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    playground.wait_read_only(0, true, SLACK).await;
    let missing = RestoreRequest {
        name: "nope".to_owned(),
        ..restore.clone()
    };
    let (status, body) = post(&playground, 0, PATH_RESTORE, &missing).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or("")
            .contains("no such backup"),
        "{body}"
    );

    // The restore: exactly the backup's rows and GTID set; the later schema is gone.
    let (status, body) = post(&playground, 0, PATH_RESTORE, &restore).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Restore, "b1", 2).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(job.gtid_set.as_deref(), Some(at_backup.as_str()));
    assert_eq!(ids(&playground, 0).await, ["1", "2", "3"]);
    assert_eq!(binlog_state(&iad).await, at_backup);
    assert!(!playground.schemas(0).await.contains(&"later".to_owned()));
    assert!(playground.read_only(0).await, "still fenced after the load");
    // The outcome survives a sidecar restart (it is on the volume).
    let mut playground = playground;
    playground.restart_sidecar(0).await;
    let job = playground.status(0).await.job.expect("recorded job");
    assert!(job.is(JobKind::Restore, "b1", 2) && job.state == JobState::Succeeded);

    // Re-promoted at a new generation: writable again, new writes on top of the backup.
    playground.push_authority_to_all(Some("iad"), 2).await;
    playground.wait_read_only(0, false, LEASE + SLACK).await;
    sql(&playground, 0, "INSERT INTO app.items VALUES (6)").await;

    // pdx holds the lost rows 4 and 5: re-seeded from iad, it holds iad's rows and follows.
    assert_eq!(ids(&playground, 1).await, ["1", "2", "3", "4", "5"]);
    let source = playground.server(0).address();
    let reseed = ReseedRequest {
        group: GROUP.to_owned(),
        restore_id: 2,
        source_host: source.ip().to_string(),
        source_port: source.port(),
    };
    let (status, body) = post(&playground, 0, PATH_RESEED, &reseed).await;
    assert_eq!(
        status,
        reqwest::StatusCode::CONFLICT,
        "the active site: {body}"
    );
    let (status, body) = post(&playground, 1, PATH_RESEED, &reseed).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let name = format!("{}:{}", reseed.source_host, reseed.source_port);
    let job = finished(&playground, 1, JobKind::Reseed, &name, 2).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(ids(&playground, 1).await, ["1", "2", "3", "6"]);
    sql(&playground, 0, "INSERT INTO app.items VALUES (7)").await;
    let pdx = playground.server(1).admin_client();
    let started = tokio::time::Instant::now();
    while binlog_state(&pdx).await != binlog_state(&iad).await {
        assert!(started.elapsed() < SLACK * 4, "pdx does not follow iad");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ids(&playground, 1).await, ["1", "2", "3", "6", "7"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_jobs_refuse_bad_names_and_a_sidecar_without_a_backup_directory() {
    let root = backup_root("refuse");
    let playground = Playground::start_with_backups(root.0.clone()).await;
    let (status, body) = post(
        &playground,
        0,
        PATH_BACKUP,
        &BackupRequest {
            group: GROUP.to_owned(),
            name: "../etc".to_owned(),
        },
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = post(
        &playground,
        0,
        PATH_BACKUP,
        &BackupRequest {
            group: "other".to_owned(),
            name: "b1".to_owned(),
        },
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{body}");
    drop(playground);
    let plain = Playground::start().await;
    let (status, body) = post(
        &plain,
        0,
        PATH_BACKUP,
        &BackupRequest {
            group: GROUP.to_owned(),
            name: "b1".to_owned(),
        },
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or("")
            .contains("--backup-dir"),
        "{body}"
    );
}

/// iad with `app.items` 1..3, a backup `b1` of it (dump and copy at the same GTID set: no
/// writes in between), then rows 4 and 5 and a schema `later` after it. Returns the backup's
/// set and the set iad then holds.
async fn backed_up_then_written(playground: &Playground) -> (String, String) {
    sql(playground, 0, "CREATE DATABASE app").await;
    sql(
        playground,
        0,
        "CREATE TABLE app.items (id INT PRIMARY KEY) ENGINE=InnoDB",
    )
    .await;
    sql(playground, 0, "INSERT INTO app.items VALUES (1), (2), (3)").await;
    let iad = playground.server(0).admin_client();
    let at_backup = binlog_state(&iad).await;
    let request = BackupRequest {
        group: GROUP.to_owned(),
        name: "b1".to_owned(),
    };
    let (status, body) = post(playground, 0, PATH_BACKUP, &request).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(playground, 0, JobKind::Backup, "b1", 0).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    let backup = playground.status(0).await.backups.remove(0);
    assert!(backup.physical, "mariadb-backup is installed by ./setup");
    assert_eq!(backup.gtid_set, at_backup);
    assert_eq!(
        backup.physical_gtid_set.as_deref(),
        Some(at_backup.as_str()),
        "the copy's own GTID set is recorded"
    );
    sql(playground, 0, "INSERT INTO app.items VALUES (4), (5)").await;
    sql(playground, 0, "CREATE DATABASE later").await;
    let before = binlog_state(&iad).await;
    assert_ne!(before, at_backup);
    (at_backup, before)
}

pub(crate) async fn fence_iad(playground: &Playground) {
    let fence = FenceRequest {
        group: GROUP.to_owned(),
        topology_generation: 1,
        kill_connections: true,
        reason: "restore in place".to_owned(),
    };
    let (status, body) = post(playground, 0, PATH_FENCE, &fence).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    playground.wait_read_only(0, true, SLACK).await;
}

fn datadir_leftovers(playground: &Playground) -> Vec<String> {
    std::fs::read_dir(playground.server(0).datadir())
        .expect("datadir")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("bloodraven-restore"))
        .collect()
}

// docs/design/history.md#issue-12: restore in place from the mariadb-backup copy. mysqld is
// stopped (its gate holds it down while the data directory is replaced), comes back read-only
// under the fence, and holds exactly the backup's rows and GTID set; what was written after the
// backup is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physical_restore_replaces_the_data_directory_with_the_copy_and_its_gtid_set() {
    let root = backup_root("physical");
    let playground = writable(&root).await;
    let (at_backup, before_restore) = backed_up_then_written(&playground).await;
    let iad = playground.server(0).admin_client();
    let after_backup = bloodraven_mysql::lost_transactions(
        &bloodraven_mysql::GtidSet::parse(bloodraven_mysql::Flavor::MariaDb, &before_restore)
            .expect("set"),
        &bloodraven_mysql::GtidSet::parse(bloodraven_mysql::Flavor::MariaDb, &at_backup)
            .expect("set"),
    );
    assert_eq!(
        after_backup.count(),
        2,
        "rows 4-5 and the schema: {after_backup}"
    );

    let restore = RestoreRequest {
        group: GROUP.to_owned(),
        name: "b1".to_owned(),
        restore_id: 2,
        method: RestoreMethod::Physical,
    };
    // Refused while not fenced.
    let (status, body) = post(&playground, 0, PATH_RESTORE, &restore).await;
    assert_eq!(status, reqwest::StatusCode::CONFLICT, "{body}");
    fence_iad(&playground).await;
    let restarts_before = playground.server(0).gate_restarts();
    let (status, body) = post(&playground, 0, PATH_RESTORE, &restore).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED, "{body}");
    let job = finished(&playground, 0, JobKind::Restore, "b1", 2).await;
    assert_eq!(job.state, JobState::Succeeded, "{job:?}");
    assert_eq!(job.gtid_set.as_deref(), Some(at_backup.as_str()));
    assert!(
        job.message
            .as_deref()
            .is_some_and(|m| m.contains("mariadb-backup copy")),
        "{job:?}"
    );
    assert!(
        playground.server(0).gate_restarts() > restarts_before,
        "mysqld was stopped and started again through its gate"
    );
    assert_eq!(ids(&playground, 0).await, ["1", "2", "3"]);
    assert_eq!(binlog_state(&iad).await, at_backup);
    assert!(!playground.schemas(0).await.contains(&"later".to_owned()));
    assert!(
        playground.read_only(0).await,
        "still fenced after the restore"
    );
    assert_eq!(datadir_leftovers(&playground), Vec::<String>::new());
    assert!(!playground.server(0).gate_mark().exists());
    // The outcome survives a sidecar restart.
    let mut playground = playground;
    playground.restart_sidecar(0).await;
    let job = playground.status(0).await.job.expect("recorded job");
    assert!(job.is(JobKind::Restore, "b1", 2) && job.state == JobState::Succeeded);
    // Re-promoted at a new generation: writable again on top of the backup.
    playground.push_authority_to_all(Some("iad"), 2).await;
    playground.wait_read_only(0, false, LEASE + SLACK).await;
    sql(&playground, 0, "INSERT INTO app.items VALUES (6)").await;
    assert_eq!(ids(&playground, 0).await, ["1", "2", "3", "6"]);
}

// docs/design/history.md#issue-12: a physical restore cut off half-way (its sidecar died while
// the old directory was being put aside) never lets mysqld start on the half-replaced
// directory: the journal holds it down until the restarted sidecar has rolled the directory
// back, and the job is recorded as failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_physical_restore_cut_off_half_way_rolls_back_before_mysqld_starts() {
    let root = backup_root("cut-off");
    let mut playground = writable(&root).await;
    let (_, before_restore) = backed_up_then_written(&playground).await;
    fence_iad(&playground).await;
    playground.stop_sidecar(0).await;
    // What the sidecar had done when it died: the journal at step Emptying, mysqld shut
    // down and held by its gate, part of the old directory put aside.
    let datadir = playground.server(0).datadir();
    let journal = serde_json::json!({
        "backup": "b1",
        "restoreId": 2,
        "step": "Emptying",
        "startedAt": "2026-12-02T00:00:00Z"
    });
    std::fs::write(
        datadir.join(bloodraven_api::sidecar::RESTORE_JOURNAL),
        journal.to_string(),
    )
    .expect("journal");
    let admin = playground.server(0).admin_client();
    let mut conn = admin.connect().await.expect("connects");
    let _ = admin.execute(&mut conn, "SHUTDOWN").await;
    drop(conn);
    let mark = playground.server(0).gate_mark();
    let started = tokio::time::Instant::now();
    while !mark.exists() {
        assert!(started.elapsed() < JOB_WITHIN, "the gate holds mysqld down");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let aside = datadir.join(".bloodraven-restore-old");
    std::fs::create_dir_all(&aside).expect("aside");
    for name in ["app", "ibdata1"] {
        std::fs::rename(datadir.join(name), aside.join(name)).expect("put aside");
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        admin.connect().await.is_err(),
        "no mysqld starts while the journal is there"
    );
    // The sidecar comes back: rolled back, mysqld starts on the old data, the job failed.
    let running = playground.start_sidecar(0).await;
    playground.sidecars[0] = Some(running);
    let started = tokio::time::Instant::now();
    while admin.connect().await.is_err() {
        assert!(started.elapsed() < JOB_WITHIN, "mysqld starts again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ids(&playground, 0).await, ["1", "2", "3", "4", "5"]);
    assert!(playground.schemas(0).await.contains(&"later".to_owned()));
    assert_eq!(datadir_leftovers(&playground), Vec::<String>::new());
    let iad = playground.server(0).admin_client();
    assert_eq!(binlog_state(&iad).await, before_restore);
    let job = playground.status(0).await.job.expect("recorded job");
    assert!(job.is(JobKind::Restore, "b1", 2), "{job:?}");
    assert_eq!(job.state, JobState::Failed);
    assert!(
        job.message
            .as_deref()
            .is_some_and(|m| m.contains("rolled back")),
        "{job:?}"
    );
    assert!(playground.read_only(0).await);
}
