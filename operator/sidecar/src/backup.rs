//! Backup jobs ([`bloodraven_api::sidecar::backup`]): a named backup of this site, its
//! restore in place, and the re-seed of a replica from the active site.
//!
//! # A backup
//!
//! `<backup dir>/<name>/` holds `dump.sql` (a logical dump: `mariadb-dump --single-transaction
//! --master-data=2 --gtid` of every schema but the system ones and the sidecar's own),
//! `manifest.json` ([`BackupInfo`]: the GTID set of the dump's snapshot, its schemas) and,
//! where `mariadb-backup` is installed and the data directory is mounted, `physical/`: a
//! prepared `mariadb-backup` copy, taken right after the dump, with its own GTID set
//! (`BackupInfo::physical_gtid_set`, found the same way from the position the copy recorded).
//! A backup is written under `.<name>.partial` and renamed when complete, so a crash mid-way
//! never leaves a backup that looks whole.
//!
//! The GTID set of the snapshot is MariaDB's `gtid_binlog_state` (what the operator compares,
//! `bloodraven_mysql::Dialect::gtid_executed_query`): the state read just before the dump,
//! advanced by the position the dump reports for its snapshot (`gtid_slave_pos` in its
//! trailer). That is exact on a site whose binlog holds only its own writes after the state
//! was read (the active site: it does not replicate), which is where backups are taken.
//!
//! # A restore
//!
//! Only while an explicit operator fence is in force and mysqld reads read-only, by the
//! request's method ([`RestoreMethod`]):
//!
//! - **logical** (the default): schemas the backup does not hold are dropped, the dump is
//!   loaded with `sql_log_bin = 0` into the running mysqld, and the binlog is reset to the
//!   backup's GTID set (`RESET MASTER`, `gtid_binlog_state`, `gtid_slave_pos`);
//! - **physical**: mysqld is stopped and held down by the restore gate of its container, the
//!   data directory is replaced by the `mariadb-backup` copy under a journal that makes a
//!   cut-off restore roll back, mysqld starts again (read-only, still under the fence), and
//!   the binlog is reset to the copy's GTID set the same way (`crate::physical` has the
//!   mechanism and why). Refused, saying why, for a backup without a copy or a pod without
//!   the gate.
//!
//! Either way the site then holds exactly the backup's transactions. Transactions after it
//! are gone from this site; replicas that hold any of them are re-seeded (the operator
//! decides which).
//!
//! # A re-seed
//!
//! On a replica only: replication stopped, a fresh dump of the source taken with the same
//! account, loaded as a restore is, then replication pointed at the source from the dump's
//! GTID set.
//!
//! # An archive
//!
//! On a returning primary, before a rejoin re-seeds it: its errant transactions selected from
//! its binlog and a full dump, under `<backup dir>/archives/<name>/` (`crate::archive` has
//! the job and why).
//!
//! A job's outcome (restore, re-seed and archive) is written to `<backup dir>/last-job.json`,
//! so a restarted sidecar still reports it. The enforcer keeps running meanwhile (a job never holds
//! the mutation lock across the load): an explicit fence keeps mysqld read-only throughout.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
};

use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Response},
    Json,
};
use bloodraven_api::{
    sidecar::{
        backup_name_problem, ArchiveRequest, BackupInfo, BackupRequest, ErrorBody, JobKind,
        JobState, JobStatus, ReseedRequest, RestoreRequest, ARCHIVES_DIR,
    },
    RestoreMethod,
};
use bloodraven_mysql::{
    deadline::DEADLINE_SCHEMA,
    live::{ConnectOptions, LiveMysql},
    quote_identifier, quote_string, Flavor, GtidSet, ReplicationSource,
};

use crate::{clock::wall_now, config::BackupSettings, state::Shared};

/// The schemas a dump never holds and a restore never drops.
const SYSTEM_SCHEMAS: [&str; 4] = ["mysql", "information_schema", "performance_schema", "sys"];
/// The file naming a backup's contents.
const MANIFEST: &str = "manifest.json";
/// The logical dump's file.
const DUMP: &str = "dump.sql";
/// The last restore or re-seed outcome.
pub(crate) const LAST_JOB: &str = "last-job.json";
/// The dump trailer line carrying the snapshot's GTID position.
const GTID_TRAILER: &str = "-- SET GLOBAL gtid_slave_pos='";

/// Why a job cannot start or failed: the message reads after "failed to".
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct JobError(String);

pub(crate) fn fail(message: impl Into<String>) -> JobError {
    JobError(message.into())
}

/// `POST /v1/backup`.
pub(crate) async fn backup(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<BackupRequest>,
) -> Response {
    if let Some(problem) = backup_name_problem(&request.name) {
        return refusal(StatusCode::BAD_REQUEST, problem);
    }
    if request.name == ARCHIVES_DIR {
        // The directory of the archives (`crate::archive`) on the same volume.
        return refusal(
            StatusCode::BAD_REQUEST,
            format!("backup name {ARCHIVES_DIR:?} is reserved for the archives' directory"),
        );
    }
    start(
        shared,
        request.group,
        JobKind::Backup,
        request.name,
        0,
        Extra::None,
    )
    .await
}

/// `POST /v1/restore`.
pub(crate) async fn restore(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<RestoreRequest>,
) -> Response {
    if let Some(problem) = backup_name_problem(&request.name) {
        return refusal(StatusCode::BAD_REQUEST, problem);
    }
    start(
        shared,
        request.group,
        JobKind::Restore,
        request.name,
        request.restore_id,
        Extra::Method(request.method),
    )
    .await
}

/// `POST /v1/reseed`.
pub(crate) async fn reseed(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<ReseedRequest>,
) -> Response {
    if request.source_host.trim().is_empty() {
        return refusal(
            StatusCode::BAD_REQUEST,
            "reseed: empty source host".to_owned(),
        );
    }
    let name = format!("{}:{}", request.source_host, request.source_port);
    let source = (request.source_host, request.source_port);
    start(
        shared,
        request.group,
        JobKind::Reseed,
        name,
        request.restore_id,
        Extra::Source(source),
    )
    .await
}

/// `POST /v1/archive`: the errant set is read here (400 when it is unusable); the site's
/// state is checked by [`crate::archive::admit`].
pub(crate) async fn archive(
    State(shared): State<Arc<Shared>>,
    Json(request): Json<ArchiveRequest>,
) -> Response {
    if let Some(problem) = backup_name_problem(&request.name) {
        return refusal(StatusCode::BAD_REQUEST, problem);
    }
    let errant = match crate::archive::errant_set(&request.errant_gtid_set) {
        Ok(errant) => errant,
        Err(error) => {
            tracing::warn!(
                site = shared.site(),
                archive = request.name,
                rejoin_id = request.rejoin_id,
                errant_gtid_set = request.errant_gtid_set,
                %error,
                "archive refused"
            );
            return refusal(
                StatusCode::BAD_REQUEST,
                format!("archive {}: {error}", request.name),
            );
        }
    };
    start(
        shared,
        request.group,
        JobKind::Archive,
        request.name,
        request.rejoin_id,
        Extra::Errant(errant),
    )
    .await
}

/// What a job needs beyond its kind and name.
#[derive(Debug, Clone)]
enum Extra {
    /// Nothing (a backup).
    None,
    /// A restore's method.
    Method(RestoreMethod),
    /// A re-seed's source host and port.
    Source((String, u16)),
    /// An archive's errant set.
    Errant(GtidSet),
}

fn refusal(status: StatusCode, error: String) -> Response {
    (status, Json(ErrorBody { error })).into_response()
}

/// Answers the job that runs or last finished when it is this one; starts it when no job runs;
/// 409 when another one runs or the preconditions do not hold.
async fn start(
    shared: Arc<Shared>,
    group: String,
    kind: JobKind,
    name: String,
    restore_id: u64,
    extra: Extra,
) -> Response {
    if group != shared.group() {
        return refusal(
            StatusCode::CONFLICT,
            format!(
                "accept request for group {group:?}: this sidecar serves group {:?}",
                shared.group()
            ),
        );
    }
    let Some(settings) = shared.settings.backup.clone() else {
        return refusal(
            StatusCode::CONFLICT,
            format!(
                "run a {kind:?} job on {}: this sidecar runs without --backup-dir",
                shared.site()
            ),
        );
    };
    let method = match &extra {
        Extra::Method(method) => *method,
        Extra::None | Extra::Source(_) | Extra::Errant(_) => RestoreMethod::Logical,
    };
    if let Err(error) = preconditions(&shared, &settings, kind, &name, method) {
        tracing::warn!(site = shared.site(), ?kind, name, %error, "backup job refused");
        return refusal(StatusCode::CONFLICT, error.to_string());
    }
    // An archive's own checks read mysqld and the volume. Asking again for the archive that
    // runs or last finished skips them: it is answered from the slot below, as every job is.
    let errant = match &extra {
        Extra::Errant(errant) => Some(errant.to_string()),
        Extra::None | Extra::Method(_) | Extra::Source(_) => None,
    };
    if let Extra::Errant(set) = &extra {
        let asked_again = shared
            .job_slot()
            .as_ref()
            .is_some_and(|current| current.is(kind, &name, restore_id));
        if !asked_again {
            match crate::archive::admit(&shared, &settings, &name, restore_id, set).await {
                Ok(crate::archive::Admission::Start) => {}
                Ok(crate::archive::Admission::Archived(job)) => {
                    return (StatusCode::ACCEPTED, Json(*job)).into_response();
                }
                Err((status, error)) => {
                    tracing::warn!(site = shared.site(), ?kind, name, restore_id, %error, "backup job refused");
                    return refusal(status, error);
                }
            }
        }
    }
    let job = {
        let mut slot = shared.job_slot();
        if let Some(current) = slot.as_ref() {
            if current.is(kind, &name, restore_id) {
                if let (Some(asked), Some(running)) = (&errant, &current.gtid_set) {
                    if asked != running {
                        return refusal(
                            StatusCode::CONFLICT,
                            format!(
                                "archive {name} for rejoin {restore_id}: it was asked for errant set {running}, this request names {asked}"
                            ),
                        );
                    }
                }
                return (StatusCode::ACCEPTED, Json(current.clone())).into_response();
            }
            if current.state == JobState::Running {
                return refusal(
                    StatusCode::CONFLICT,
                    format!(
                        "start {kind:?} {name}: {:?} {} is still running",
                        current.kind, current.name
                    ),
                );
            }
        }
        let job = JobStatus {
            kind,
            name: name.clone(),
            restore_id,
            state: JobState::Running,
            started_at: wall_now(),
            finished_at: None,
            // An archive's errant set from the start (what it is for).
            gtid_set: errant,
            message: None,
        };
        *slot = Some(job.clone());
        job
    };
    tracing::info!(
        site = shared.site(),
        ?kind,
        name,
        restore_id,
        "backup job started"
    );
    let task_shared = Arc::clone(&shared);
    tokio::spawn(async move {
        let outcome = match kind {
            JobKind::Backup => run_backup(&task_shared, &settings, &name)
                .await
                .map(|info| (info.gtid_set.clone(), format!("backup {name} taken"))),
            JobKind::Restore => {
                run_restore(&task_shared, &settings, &name, restore_id, method).await
            }
            JobKind::Reseed => match extra {
                Extra::Source((host, port)) => {
                    run_reseed(&task_shared, &settings, &host, port).await
                }
                Extra::None | Extra::Method(_) | Extra::Errant(_) => {
                    Err(fail("reseed without a source"))
                }
            },
            JobKind::Archive => match extra {
                Extra::Errant(errant) => {
                    crate::archive::run(&task_shared, &settings, &name, restore_id, &errant).await
                }
                Extra::None | Extra::Method(_) | Extra::Source(_) => {
                    Err(fail("archive without an errant set"))
                }
            },
        };
        finish(&task_shared, &settings, kind, &name, restore_id, outcome);
    });
    (StatusCode::ACCEPTED, Json(job)).into_response()
}

/// What must hold before a job starts (and is checked again where it matters).
fn preconditions(
    shared: &Shared,
    settings: &BackupSettings,
    kind: JobKind,
    name: &str,
    method: RestoreMethod,
) -> Result<(), JobError> {
    if shared.settings.flavor != Flavor::MariaDb {
        return Err(fail(format!(
            "run a {kind:?} job: backups are implemented for the MariaDB flavor only, this site runs {:?}",
            shared.settings.flavor
        )));
    }
    match kind {
        JobKind::Backup => Ok(()),
        JobKind::Restore => {
            fenced_for_restore(shared)?;
            if !settings.dir.join(name).join(MANIFEST).is_file() {
                return Err(fail(format!(
                    "restore {name} on {}: no such backup in {}",
                    shared.site(),
                    settings.dir.display()
                )));
            }
            match method {
                RestoreMethod::Logical => Ok(()),
                RestoreMethod::Physical => {
                    let info = manifest(settings, name)?;
                    match crate::physical::unavailable(settings, &info) {
                        Some(why) => Err(fail(format!(
                            "restore {name} on {} from its mariadb-backup copy: {why}",
                            shared.site()
                        ))),
                        None => Ok(()),
                    }
                }
            }
        }
        // Its checks read mysqld: `crate::archive::admit`.
        JobKind::Archive => Ok(()),
        JobKind::Reseed => {
            let named_active = shared
                .lease()
                .authority()
                .is_some_and(|authority| authority.active_site.as_deref() == Some(shared.site()));
            if named_active {
                return Err(fail(format!(
                    "reseed {}: the cached authority names this site active; the active site is never re-seeded",
                    shared.site()
                )));
            }
            Ok(())
        }
    }
}

/// A restore needs an explicit operator fence in force (the enforcer keeps mysqld read-only
/// until an authority of a greater generation lifts it).
pub(crate) fn fenced_for_restore(shared: &Shared) -> Result<(), JobError> {
    if shared.lease().fence_state().is_none() {
        return Err(fail(format!(
            "restore on {}: no explicit fence is in force (POST /v1/fence first)",
            shared.site()
        )));
    }
    Ok(())
}

fn finish(
    shared: &Shared,
    settings: &BackupSettings,
    kind: JobKind,
    name: &str,
    restore_id: u64,
    outcome: Result<(String, String), JobError>,
) {
    let (state, gtid_set, message) = match outcome {
        Ok((gtid_set, message)) => {
            tracing::info!(
                site = shared.site(),
                ?kind,
                name,
                gtid_set,
                "backup job succeeded"
            );
            (JobState::Succeeded, Some(gtid_set), message)
        }
        Err(error) => {
            tracing::warn!(site = shared.site(), ?kind, name, %error, "backup job failed");
            (JobState::Failed, None, error.to_string())
        }
    };
    let mut slot = shared.job_slot();
    let Some(job) = slot.as_mut().filter(|job| job.is(kind, name, restore_id)) else {
        return;
    };
    job.state = state;
    job.finished_at = Some(wall_now());
    job.gtid_set = gtid_set;
    job.message = Some(message);
    if kind != JobKind::Backup {
        if let Err(error) = write_json(&settings.dir.join(LAST_JOB), job) {
            tracing::warn!(site = shared.site(), %error, "record the job's outcome on the volume");
        }
    }
}

/// The last restore, re-seed or archive recorded on the volume (a restarted sidecar reports it).
pub(crate) fn recorded_job(settings: &BackupSettings) -> Option<JobStatus> {
    let text = std::fs::read_to_string(settings.dir.join(LAST_JOB)).ok()?;
    match serde_json::from_str::<JobStatus>(&text) {
        // A job recorded as running was cut off by the restart.
        Ok(mut job) if job.state == JobState::Running => {
            job.state = JobState::Failed;
            job.message = Some("the sidecar restarted while the job ran".to_owned());
            Some(job)
        }
        Ok(job) => Some(job),
        Err(error) => {
            tracing::warn!(%error, "unreadable {LAST_JOB}; ignored");
            None
        }
    }
}

/// The complete backups in the directory, oldest first.
pub(crate) fn list(settings: &BackupSettings) -> Vec<BackupInfo> {
    let Ok(entries) = std::fs::read_dir(&settings.dir) else {
        return Vec::new();
    };
    let mut backups: Vec<BackupInfo> = entries
        .filter_map(Result::ok)
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .filter_map(|entry| std::fs::read_to_string(entry.path().join(MANIFEST)).ok())
        .filter_map(|text| serde_json::from_str(&text).ok())
        .collect();
    backups.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
    backups
}

pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), JobError> {
    let text = serde_json::to_vec_pretty(value).map_err(|error| fail(error.to_string()))?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|error| fail(format!("write {}: {error}", path.display())))
}

async fn run_backup(
    shared: &Shared,
    settings: &BackupSettings,
    name: &str,
) -> Result<BackupInfo, JobError> {
    let target = settings.dir.join(name);
    if let Ok(text) = std::fs::read_to_string(target.join(MANIFEST)) {
        return serde_json::from_str(&text)
            .map_err(|error| fail(format!("read the manifest of backup {name}: {error}")));
    }
    let partial = settings.dir.join(format!(".{name}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)
        .map_err(|error| fail(format!("create {}: {error}", partial.display())))?;
    let created_at = wall_now();
    let dump = dump(&settings.mysql, &partial.join(DUMP)).await?;
    let physical_gtid_set = physical_copy(settings, &partial).await?;
    let info = BackupInfo {
        name: name.to_owned(),
        site: shared.site().to_owned(),
        created_at,
        gtid_set: dump.gtid_set,
        databases: dump.databases,
        logical_bytes: dump.bytes,
        physical: physical_gtid_set.is_some(),
        physical_gtid_set,
    };
    write_json(&partial.join(MANIFEST), &info)?;
    std::fs::rename(&partial, &target)
        .map_err(|error| fail(format!("rename {} into place: {error}", partial.display())))?;
    Ok(info)
}

fn manifest(settings: &BackupSettings, name: &str) -> Result<BackupInfo, JobError> {
    let text = std::fs::read_to_string(settings.dir.join(name).join(MANIFEST))
        .map_err(|error| fail(format!("read the manifest of backup {name}: {error}")))?;
    serde_json::from_str(&text)
        .map_err(|error| fail(format!("read the manifest of backup {name}: {error}")))
}

async fn run_restore(
    shared: &Shared,
    settings: &BackupSettings,
    name: &str,
    restore_id: u64,
    method: RestoreMethod,
) -> Result<(String, String), JobError> {
    let directory = settings.dir.join(name);
    let info = manifest(settings, name)?;
    fenced_for_restore(shared)?;
    if method == RestoreMethod::Physical {
        let gtid_set = crate::physical::restore(shared, settings, &info, restore_id).await?;
        return Ok((
            gtid_set,
            format!(
                "restored backup {name} from its mariadb-backup copy (taken on {} at {}); mysqld was stopped and its data directory replaced",
                info.site, info.created_at
            ),
        ));
    }
    load(
        &settings.mysql,
        &directory.join(DUMP),
        &info.databases,
        &info.gtid_set,
    )
    .await?;
    // The fence must still be in force: a fence lifted mid-way means the operator moved on.
    fenced_for_restore(shared)?;
    Ok((
        info.gtid_set.clone(),
        format!(
            "restored backup {name} (taken on {} at {})",
            info.site, info.created_at
        ),
    ))
}

async fn run_reseed(
    shared: &Shared,
    settings: &BackupSettings,
    host: &str,
    port: u16,
) -> Result<(String, String), JobError> {
    let stopped = shared.mysql.stop_replication().await;
    if !stopped.is_applied() {
        let why = stopped
            .error
            .map_or_else(|| "not seen stopped".to_owned(), |e| e.to_string());
        return Err(fail(format!("stop replication before the re-seed: {why}")));
    }
    let scratch = settings.dir.join(".reseed");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)
        .map_err(|error| fail(format!("create {}: {error}", scratch.display())))?;
    let mut source = settings.mysql.clone();
    source.host = host.to_owned();
    source.port = port;
    let dumped = dump(&source, &scratch.join(DUMP)).await?;
    load(
        &settings.mysql,
        &scratch.join(DUMP),
        &dumped.databases,
        &dumped.gtid_set,
    )
    .await?;
    let _ = std::fs::remove_dir_all(&scratch);
    let outcome = shared
        .mysql
        .repoint(&ReplicationSource {
            host: host.to_owned(),
            port,
            user: shared.settings.replication_user.clone(),
            password: shared.settings.replication_password.clone(),
            connect_retry_seconds: 1,
        })
        .await;
    if !outcome.is_applied() {
        let why = outcome
            .error
            .map_or_else(|| "not seen replicating".to_owned(), |e| e.to_string());
        return Err(fail(format!(
            "replicate from {host}:{port} after the re-seed: {why}"
        )));
    }
    Ok((
        dumped.gtid_set,
        format!("re-seeded from {host}:{port} and replicating from it"),
    ))
}

/// What a dump holds.
pub(crate) struct Dumped {
    pub(crate) gtid_set: String,
    pub(crate) databases: Vec<String>,
    pub(crate) bytes: u64,
}

pub(crate) fn client(options: &ConnectOptions) -> LiveMysql {
    LiveMysql::new(Flavor::MariaDb, options.clone())
}

/// The schemas a dump holds: all but the system ones and the sidecar's.
async fn user_databases(mysql: &LiveMysql) -> Result<Vec<String>, JobError> {
    let mut conn = mysql.connect().await.map_err(|e| fail(e.to_string()))?;
    let rows = mysql
        .rows(
            &mut conn,
            "SELECT schema_name AS schema_name FROM information_schema.schemata ORDER BY schema_name",
        )
        .await
        .map_err(|e| fail(format!("list schemas: {e}")))?;
    Ok(rows
        .iter()
        .filter_map(|row| row.get("schema_name").cloned().flatten())
        .filter(|name| !SYSTEM_SCHEMAS.contains(&name.as_str()) && name != DEADLINE_SCHEMA)
        .collect())
}

pub(crate) async fn binlog_state(mysql: &LiveMysql) -> Result<String, JobError> {
    let mut conn = mysql.connect().await.map_err(|e| fail(e.to_string()))?;
    let rows = mysql
        .rows(&mut conn, "SELECT @@GLOBAL.gtid_binlog_state AS state")
        .await
        .map_err(|e| fail(format!("read gtid_binlog_state: {e}")))?;
    Ok(rows
        .first()
        .and_then(|row| row.get("state").cloned().flatten())
        .unwrap_or_default())
}

/// `mariadb-dump` of the user schemas at `options` into `out`.
pub(crate) async fn dump(options: &ConnectOptions, out: &Path) -> Result<Dumped, JobError> {
    let mysql = client(options);
    let databases = user_databases(&mysql).await?;
    let before = binlog_state(&mysql).await?;
    let gtid_set = if databases.is_empty() {
        // Nothing to dump; the state read is the backup's (no table can differ from it).
        std::fs::write(
            out,
            b"-- bloodraven: no user schema at the time of the backup\n",
        )
        .map_err(|error| fail(format!("write {}: {error}", out.display())))?;
        before
    } else {
        let file = std::fs::File::create(out)
            .map_err(|error| fail(format!("create {}: {error}", out.display())))?;
        let output = run(
            tool("mariadb-dump", options)?
                .args([
                    "--single-transaction",
                    "--master-data=2",
                    "--gtid",
                    "--routines",
                    "--events",
                    "--triggers",
                    "--add-drop-database",
                    "--databases",
                ])
                .args(&databases)
                .stdout(Stdio::from(file))
                .stderr(Stdio::piped()),
            "mariadb-dump",
        )
        .await?;
        if !output.status.success() {
            return Err(fail(format!(
                "mariadb-dump of {} exited with {}: {}",
                options.address(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let text = tokio::fs::read_to_string(out)
            .await
            .map_err(|error| fail(format!("read {}: {error}", out.display())))?;
        let position = snapshot_position(&text).ok_or_else(|| {
            let hints: Vec<&str> = text
                .lines()
                .filter(|line| line.starts_with("--") && !line.trim_start_matches("- ").is_empty())
                .take(12)
                .collect();
            fail(format!(
                "find the snapshot's GTID position in the dump of {} (its first comment lines: {hints:?})",
                options.address()
            ))
        })?;
        advance_state(&before, &position)?
    };
    let bytes = tokio::fs::metadata(out)
        .await
        .map(|meta| meta.len())
        .unwrap_or(0);
    Ok(Dumped {
        gtid_set,
        databases,
        bytes,
    })
}

/// The snapshot's GTID position in a `--master-data=2 --gtid` dump.
fn snapshot_position(dump: &str) -> Option<String> {
    dump.lines().rev().find_map(|line| {
        line.strip_prefix(GTID_TRAILER)
            .and_then(|rest| rest.strip_suffix("';"))
            .map(str::to_owned)
    })
}

/// One MariaDB GTID `domain-server-seq`.
fn parse_gtid(text: &str) -> Result<(u32, u32, u64), JobError> {
    let mut parts = text.trim().splitn(3, '-');
    let bad = || fail(format!("read GTID {text:?}"));
    let domain = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let server = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    let seq = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
    Ok((domain, server, seq))
}

pub(crate) fn parse_list(text: &str) -> Result<Vec<(u32, u32, u64)>, JobError> {
    text.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(parse_gtid)
        .collect()
}

fn format_list(gtids: &[(u32, u32, u64)]) -> String {
    gtids
        .iter()
        .map(|(d, s, q)| format!("{d}-{s}-{q}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `state` (a `gtid_binlog_state`) advanced by `position` (a `gtid_binlog_pos`): each
/// position entry raises its (domain, server) pair.
fn advance_state(state: &str, position: &str) -> Result<String, JobError> {
    let mut entries = parse_list(state)?;
    for (domain, server, seq) in parse_list(position)? {
        match entries
            .iter_mut()
            .find(|(d, s, _)| *d == domain && *s == server)
        {
            Some(entry) => entry.2 = entry.2.max(seq),
            None => entries.push((domain, server, seq)),
        }
    }
    entries.sort_unstable();
    Ok(format_list(&entries))
}

/// The `gtid_slave_pos` of a binlog state: per domain, its highest GTID.
fn position_of(state: &str) -> Result<String, JobError> {
    let mut best: Vec<(u32, u32, u64)> = Vec::new();
    for (domain, server, seq) in parse_list(state)? {
        match best.iter_mut().find(|(d, _, _)| *d == domain) {
            Some(entry) if entry.2 < seq => *entry = (domain, server, seq),
            Some(_) => {}
            None => best.push((domain, server, seq)),
        }
    }
    best.sort_unstable();
    Ok(format_list(&best))
}

/// Replaces the user schemas at `options` with `dump` and sets the binlog to `gtid_set`.
async fn load(
    options: &ConnectOptions,
    dump: &Path,
    databases: &[String],
    gtid_set: &str,
) -> Result<(), JobError> {
    let mysql = client(options);
    // Checked before anything is dropped.
    position_of(gtid_set)?;
    let stale: Vec<String> = user_databases(&mysql)
        .await?
        .into_iter()
        .filter(|name| !databases.contains(name))
        .collect();
    let mut conn = mysql.connect().await.map_err(|e| fail(e.to_string()))?;
    let read_only = mysql
        .read_only_on(&mut conn)
        .await
        .map_err(|e| fail(format!("read read_only: {e}")))?;
    if !read_only.read_only {
        return Err(fail(format!(
            "load a dump into {}: mysqld is writable; it must be fenced first",
            options.address()
        )));
    }
    mysql
        .execute(&mut conn, "SET SESSION sql_log_bin = 0")
        .await
        .map_err(|e| fail(format!("switch the binlog off for the load: {e}")))?;
    for name in &stale {
        let quoted = quote_identifier(name).map_err(|e| fail(e.to_string()))?;
        mysql
            .execute(&mut conn, &format!("DROP DATABASE {quoted}"))
            .await
            .map_err(|e| fail(format!("drop schema {name}, absent from the backup: {e}")))?;
    }
    let input = std::fs::File::open(dump)
        .map_err(|error| fail(format!("open {}: {error}", dump.display())))?;
    let output = run(
        tool("mariadb", options)?
            .arg("--init-command=SET SESSION sql_log_bin = 0")
            .stdin(Stdio::from(input))
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        "mariadb",
    )
    .await?;
    if !output.status.success() {
        return Err(fail(format!(
            "load {} into {} (exit {}): {}",
            dump.display(),
            options.address(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    drop(conn);
    reset_gtid_state(options, gtid_set).await
}

/// Resets mysqld at `options` (read-only, not replicating) to hold exactly `gtid_set`: no
/// replication, the binlog emptied and its state set, `gtid_slave_pos` to match.
pub(crate) async fn reset_gtid_state(
    options: &ConnectOptions,
    gtid_set: &str,
) -> Result<(), JobError> {
    let mysql = client(options);
    let position = position_of(gtid_set)?;
    let mut conn = mysql.connect().await.map_err(|e| fail(e.to_string()))?;
    let read_only = mysql
        .read_only_on(&mut conn)
        .await
        .map_err(|e| fail(format!("read read_only: {e}")))?;
    if !read_only.read_only {
        return Err(fail(format!(
            "reset the binlog of {}: mysqld is writable; it must be fenced first",
            options.address()
        )));
    }
    for statement in [
        "STOP ALL SLAVES".to_owned(),
        "RESET SLAVE ALL".to_owned(),
        "RESET MASTER".to_owned(),
        format!("SET GLOBAL gtid_binlog_state = {}", quote_string(gtid_set)),
        format!("SET GLOBAL gtid_slave_pos = {}", quote_string(&position)),
    ] {
        mysql.execute(&mut conn, &statement).await.map_err(|e| {
            fail(format!(
                "reset the binlog to the backup's GTID set ({statement}): {e}"
            ))
        })?;
    }
    Ok(())
}

/// A MariaDB client tool connecting to `options`, password in the environment, no option
/// files read (the host's `my.cnf` is not this site's).
pub(crate) fn tool(
    name: &str,
    options: &ConnectOptions,
) -> Result<tokio::process::Command, JobError> {
    let path = find_tool(name).ok_or_else(|| {
        fail(format!(
            "find {name} (install Debian's mariadb-client): not on PATH"
        ))
    })?;
    let mut command = tokio::process::Command::new(path);
    command
        .arg("--no-defaults")
        .arg(format!("--host={}", options.host))
        .arg(format!("--port={}", options.port))
        .arg("--protocol=TCP")
        .arg(format!("--user={}", options.user))
        .env("MYSQL_PWD", &options.password)
        .kill_on_drop(true);
    Ok(command)
}

/// Runs `command` to its end with the stdio it was given (`output()` would capture stdout and
/// close stdin over them).
pub(crate) async fn run(
    command: &mut tokio::process::Command,
    what: &str,
) -> Result<std::process::Output, JobError> {
    command
        .spawn()
        .map_err(|error| fail(format!("run {what}: {error}")))?
        .wait_with_output()
        .await
        .map_err(|error| fail(format!("run {what}: {error}")))
}

pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/local/bin", "/usr/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A prepared `mariadb-backup` copy in `<partial>/physical`, when the tool is installed and
/// the data directory is mounted: its GTID set (`None`, logged, otherwise).
///
/// The set is found as the dump's is: the binlog state read just before the copy, advanced
/// by the position `mariadb-backup` recorded at the copy's consistent point
/// (`xtrabackup_binlog_info`, its third column). On the active site only its own writes
/// land in between, so that is exact; it differs from the dump's set by the writes
/// acknowledged while the dump ran.
async fn physical_copy(
    settings: &BackupSettings,
    partial: &Path,
) -> Result<Option<String>, JobError> {
    let Some(datadir) = settings.datadir.as_ref() else {
        tracing::info!("no data directory mounted: logical dump only");
        return Ok(None);
    };
    if find_tool("mariadb-backup").is_none() {
        tracing::info!("mariadb-backup is not installed: logical dump only");
        return Ok(None);
    }
    let target = partial.join(crate::physical::PHYSICAL_DIR);
    let before = binlog_state(&client(&settings.mysql)).await?;
    let backup = run(
        tool("mariadb-backup", &settings.mysql)?
            .arg("--backup")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--target-dir={}", target.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        "mariadb-backup --backup",
    )
    .await?;
    if !backup.status.success() {
        return Err(fail(format!(
            "mariadb-backup --backup exited with {}: {}",
            backup.status,
            last_lines(&backup.stderr)
        )));
    }
    let info_file = ["mariadb_backup_binlog_info", "xtrabackup_binlog_info"]
        .iter()
        .map(|name| target.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            fail(format!(
                "find the binlog position mariadb-backup recorded in {}",
                target.display()
            ))
        })?;
    let recorded = std::fs::read_to_string(&info_file)
        .map_err(|error| fail(format!("read {}: {error}", info_file.display())))?;
    let gtid_set = advance_state(&before, &copy_position(&recorded))?;
    let prepare = run(
        tokio::process::Command::new(find_tool("mariadb-backup").unwrap_or_default())
            .arg("--no-defaults")
            .arg("--prepare")
            .arg(format!("--target-dir={}", target.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true),
        "mariadb-backup --prepare",
    )
    .await?;
    if !prepare.status.success() {
        return Err(fail(format!(
            "mariadb-backup --prepare exited with {}: {}",
            prepare.status,
            last_lines(&prepare.stderr)
        )));
    }
    Ok(Some(gtid_set))
}

/// The GTID position in `xtrabackup_binlog_info` (`<file>\t<offset>\t<gtid list>`; no third
/// column when nothing was ever binlogged).
fn copy_position(recorded: &str) -> String {
    recorded
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(2))
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn last_lines(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_position_is_read_from_the_dump_trailer() {
        let dump = "-- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;\nCREATE TABLE t (i int);\n\
                    -- Preferably use GTID to start replication from GTID position:\n\
                    -- SET GLOBAL gtid_slave_pos='0-7-3';\n";
        assert_eq!(snapshot_position(dump).as_deref(), Some("0-7-3"));
        assert_eq!(snapshot_position("CREATE TABLE t (i int);"), None);
    }

    #[test]
    fn the_state_is_advanced_per_domain_and_server() {
        assert_eq!(advance_state("0-1-5", "0-1-8").expect("ok"), "0-1-8");
        assert_eq!(
            advance_state("0-2-3,0-1-5", "0-1-7").expect("ok"),
            "0-1-7,0-2-3"
        );
        assert_eq!(advance_state("", "0-1-2").expect("ok"), "0-1-2");
        assert_eq!(advance_state("0-1-9", "0-1-8").expect("ok"), "0-1-9");
        assert!(advance_state("0-1", "0-1-2").is_err());
    }

    #[test]
    fn the_physical_copys_position_is_the_third_column_of_its_binlog_info() {
        assert_eq!(copy_position("mysql-bin.000003\t385\t0-1-42\n"), "0-1-42");
        assert_eq!(
            copy_position("mysql-bin.000003\t385\t0-1-42,1-2-7\n"),
            "0-1-42,1-2-7"
        );
        assert_eq!(copy_position("mysql-bin.000001\t4\n"), "");
        assert_eq!(copy_position(""), "");
    }

    #[test]
    fn the_position_of_a_state_is_the_highest_gtid_of_each_domain() {
        assert_eq!(position_of("0-1-100,0-2-103").expect("ok"), "0-2-103");
        assert_eq!(position_of("0-2-3,1-1-4,0-1-5").expect("ok"), "0-1-5,1-1-4");
        assert_eq!(position_of("").expect("ok"), "");
    }
}
