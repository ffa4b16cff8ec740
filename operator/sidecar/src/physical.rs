//! Restore in place from a backup's prepared `mariadb-backup` copy
//! ([`RestoreMethod::Physical`](bloodraven_api::RestoreMethod::Physical)).
//!
//! # How mysqld is stopped, and kept stopped
//!
//! A physical restore replaces mysqld's data directory, so mysqld must not run meanwhile, and
//! in a pod a container whose process exits is restarted by the kubelet. The `mysql`
//! container therefore starts mysqld through a gate
//! ([`MYSQLD_GATE_SCRIPT`](bloodraven_api::sidecar::MYSQLD_GATE_SCRIPT)): while the restore
//! journal ([`RESTORE_JOURNAL`]) sits at the top of the data directory, the gate does not start
//! mysqld and touches its mark (`--mysqld-gate-mark`, on the run volume both containers mount)
//! every second; once the journal is gone it `exec`s the image's entrypoint, so mysqld is the
//! container's process exactly as without the gate. This sidecar does the restore and keeps
//! running throughout: its in-memory fence (the operator's, in force since `Fencing`), its
//! cached authority and the lease rule stay as they were, so the operator's flow is the
//! logical restore's, and mysqld comes back read-only (it always starts so) under a fence only
//! an authority of a greater generation lifts.
//!
//! The alternative, deleting the pod and copying back from an init container, restarts this
//! sidecar too: it forgets the fence and the authority, the operator must re-fence a pod it
//! did not start, the outcome has to travel from an init container, and the pod's deletion
//! looks to the rest of the operator like a failed site. The gate needs none of that; its
//! price is that the pod template must carry it, so a pod made before it existed is refused a
//! physical restore (this sidecar then runs without `--mysqld-gate-mark`, and the refusal says
//! to recreate the pod or restore the logical dump).
//!
//! # The steps
//!
//! Under the operator's fence, with mysqld answering read-only:
//!
//! 1. **Stopping**: the journal is written (from here on the gate would hold a restarted
//!    mysqld), a stale gate mark removed, and mysqld shut down (`SHUTDOWN`). The kubelet
//!    restarts the container into the gate, whose mark is the proof that no mysqld runs.
//! 2. **Staging**: `mariadb-backup --copy-back` of the copy into `<datadir>/`[`STAGING_DIR`],
//!    then every file of it synced.
//! 3. **Emptying**: every top-level entry of the data directory (but the journal, the two work
//!    directories and `lost+found`) is renamed into `<datadir>/`[`ASIDE_DIR`]; on one file
//!    system each rename is atomic and nothing is copied.
//! 4. **Filling**: every entry of the staging directory is renamed into the data directory.
//! 5. **Committed**: the old directory is removed, then the journal: the gate starts mysqld on
//!    the copy. Once it answers, the binlog is reset to the copy's GTID set (`RESET MASTER`,
//!    `gtid_binlog_state`, `gtid_slave_pos`) exactly as after a logical load (the copy holds
//!    no binlog of its own), so the site holds exactly the copy's transactions.
//!
//! The journal is rewritten (atomically, synced) before each step, so it always names the
//! step in progress.
//!
//! # A cut-off restore never starts mysqld on a half-replaced directory
//!
//! The journal is on the data volume, so it outlives this sidecar and the pod: while it
//! exists no mysqld starts. A sidecar that starts and finds one ([`recover`], before it
//! serves) rolls the directory back to what it held before the restore (Stopping and Staging:
//! the staging directory removed; Emptying: the entries put aside moved back; Filling: the
//! copy's entries removed from the top, then the old ones moved back) or, from Committed, only
//! finishes the clean-up; then it removes the journal and records the job as failed in
//! `last-job.json`, so the operator reports the restore failed and keeps the site fenced. A
//! step that fails while this sidecar lives is rolled back the same way at once. A roll-back
//! that itself fails leaves the journal: mysqld stays down (and the site fenced) until a
//! human looks; the job's message says so.
//!
//! The data volume needs room for the copy beside the live data while a restore runs.

use std::{
    ffi::OsString,
    path::{Path, PathBuf},
    time::Duration,
};

use bloodraven_api::{
    sidecar::{BackupInfo, JobKind, JobState, JobStatus, RESTORE_JOURNAL},
    RestoreMethod, Timestamp,
};
use serde::{Deserialize, Serialize};

use crate::{
    backup::{
        client, fail, fenced_for_restore, find_tool, last_lines, reset_gtid_state, run, write_json,
        JobError, LAST_JOB,
    },
    clock::wall_now,
    config::BackupSettings,
    state::Shared,
};

/// Where the copy is staged, inside the data directory (the same file system, so the swap is
/// renames only).
pub(crate) const STAGING_DIR: &str = ".bloodraven-restore-new";
/// Where the old contents are put aside until the copy is in place.
pub(crate) const ASIDE_DIR: &str = ".bloodraven-restore-old";
/// The journal while it is written (renamed into [`RESTORE_JOURNAL`] when complete).
const JOURNAL_PARTIAL: &str = "bloodraven-restore.json.partial";
/// Top-level entries a restore never moves: the file system's own.
const KEPT: [&str; 1] = ["lost+found"];
/// The physical copy's directory inside a backup.
pub(crate) const PHYSICAL_DIR: &str = "physical";
/// How long the gate may take to hold mysqld down after the shutdown: the kubelet's longest
/// restart back-off (300 s) and a slow shutdown.
pub(crate) const GATE_HOLD_WAIT_MAX: Duration = Duration::from_secs(360);
/// How long mysqld may take to answer on the restored directory: the same bound.
pub(crate) const MYSQLD_RETURN_WAIT_MAX: Duration = Duration::from_secs(360);
/// How often the mark and mysqld are looked at while waiting.
const WAIT_POLL: Duration = Duration::from_millis(200);

/// The step of a physical restore in progress (module docs).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// mysqld is being shut down; nothing moved.
    Stopping,
    /// The copy is being written into the staging directory; the data directory untouched.
    Staging,
    /// The old entries are being renamed aside.
    Emptying,
    /// The copy's entries are being renamed into place (every old entry is aside).
    Filling,
    /// The copy is in place; the old entries are being removed.
    Committed,
}

/// The journal at the top of the data directory.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Journal {
    /// The backup restored.
    pub backup: String,
    /// The restore's id.
    pub restore_id: u64,
    /// The step in progress.
    pub step: Step,
    /// When the restore started.
    pub started_at: Timestamp,
}

fn io(what: impl std::fmt::Display, error: std::io::Error) -> JobError {
    fail(format!("{what}: {error}"))
}

/// Syncs a directory's entries (a rename is durable once its directory is).
pub(crate) fn sync_dir(dir: &Path) -> Result<(), JobError> {
    std::fs::File::open(dir)
        .and_then(|file| file.sync_all())
        .map_err(|error| io(format_args!("sync {}", dir.display()), error))
}

/// Syncs every file and directory under `dir` (`mariadb-backup --copy-back` does not).
fn sync_tree(dir: &Path) -> Result<(), JobError> {
    for entry in
        std::fs::read_dir(dir).map_err(|e| io(format_args!("read {}", dir.display()), e))?
    {
        let entry = entry.map_err(|e| io(format_args!("read {}", dir.display()), e))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| io(format_args!("stat {}", path.display()), e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            std::fs::File::open(&path)
                .and_then(|file| file.sync_all())
                .map_err(|e| io(format_args!("sync {}", path.display()), e))?;
        }
    }
    sync_dir(dir)
}

/// The journal in `datadir`, if a restore is in progress or was cut off.
pub(crate) fn read_journal(datadir: &Path) -> Result<Option<Journal>, JobError> {
    let path = datadir.join(RESTORE_JOURNAL);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|error| {
            fail(format!(
                "read the restore journal {}: {error}",
                path.display()
            ))
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io(format_args!("read {}", path.display()), error)),
    }
}

/// Writes the journal atomically and durably.
pub(crate) fn write_journal(datadir: &Path, journal: &Journal) -> Result<(), JobError> {
    let partial = datadir.join(JOURNAL_PARTIAL);
    let text = serde_json::to_vec_pretty(journal).map_err(|e| fail(e.to_string()))?;
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::File::open(&partial)?.sync_all())
        .and_then(|()| std::fs::rename(&partial, datadir.join(RESTORE_JOURNAL)))
        .map_err(|e| {
            io(
                format_args!("write the restore journal in {}", datadir.display()),
                e,
            )
        })?;
    sync_dir(datadir)
}

fn remove_journal(datadir: &Path) -> Result<(), JobError> {
    match std::fs::remove_file(datadir.join(RESTORE_JOURNAL)) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io("remove the restore journal", error)),
    }
    let _ = std::fs::remove_file(datadir.join(JOURNAL_PARTIAL));
    sync_dir(datadir)
}

fn remove_tree(dir: &Path) -> Result<(), JobError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io(format_args!("remove {}", dir.display()), error)),
    }
}

/// The top-level entries of `dir` a restore moves (everything but its own files and
/// [`KEPT`]).
fn movable(dir: &Path) -> Result<Vec<OsString>, JobError> {
    let own = [RESTORE_JOURNAL, JOURNAL_PARTIAL, STAGING_DIR, ASIDE_DIR];
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|e| io(format_args!("read {}", dir.display()), e))?
    {
        let name = entry
            .map_err(|e| io(format_args!("read {}", dir.display()), e))?
            .file_name();
        let lossy = name.to_string_lossy();
        let text: &str = &lossy;
        if !own.contains(&text) && !KEPT.contains(&text) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Renames every entry of `from` (all of them, or only the movable ones when `from` is the
/// data directory) into `to`; syncs both.
fn move_entries(from: &Path, to: &Path, names: &[OsString]) -> Result<(), JobError> {
    for name in names {
        std::fs::rename(from.join(name), to.join(name)).map_err(|e| {
            io(
                format_args!("move {} into {}", from.join(name).display(), to.display()),
                e,
            )
        })?;
    }
    sync_dir(from)?;
    sync_dir(to)
}

fn entries(dir: &Path) -> Result<Vec<OsString>, JobError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut names = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|e| io(format_args!("read {}", dir.display()), e))?
    {
        names.push(
            entry
                .map_err(|e| io(format_args!("read {}", dir.display()), e))?
                .file_name(),
        );
    }
    names.sort();
    Ok(names)
}

/// Step 3: every movable entry of the data directory into the aside directory.
pub(crate) fn empty_into_aside(datadir: &Path) -> Result<(), JobError> {
    let aside = datadir.join(ASIDE_DIR);
    std::fs::create_dir_all(&aside)
        .map_err(|e| io(format_args!("create {}", aside.display()), e))?;
    move_entries(datadir, &aside, &movable(datadir)?)
}

/// Step 4: every entry of the staging directory into the data directory.
pub(crate) fn fill_from_staging(datadir: &Path) -> Result<(), JobError> {
    let staging = datadir.join(STAGING_DIR);
    move_entries(&staging, datadir, &entries(&staging)?)
}

/// Puts the data directory back as the journal's step left it (module docs), or from
/// `Committed` finishes the clean-up; then removes the journal. Returns what it did.
pub(crate) fn roll_back(datadir: &Path, journal: &Journal) -> Result<String, JobError> {
    let staging = datadir.join(STAGING_DIR);
    let aside = datadir.join(ASIDE_DIR);
    let done = match journal.step {
        Step::Stopping | Step::Staging => {
            remove_tree(&staging)?;
            "the data directory was not touched yet; the staged copy is removed"
        }
        Step::Emptying => {
            move_entries(&aside, datadir, &entries(&aside)?)?;
            remove_tree(&aside)?;
            remove_tree(&staging)?;
            "the entries already put aside are moved back"
        }
        Step::Filling => {
            // Every old entry is aside, so whatever movable sits at the top is the copy's.
            for name in movable(datadir)? {
                let path = datadir.join(&name);
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                removed.map_err(|e| io(format_args!("remove {}", path.display()), e))?;
            }
            move_entries(&aside, datadir, &entries(&aside)?)?;
            remove_tree(&aside)?;
            remove_tree(&staging)?;
            "the copy's entries are removed and the old ones moved back"
        }
        Step::Committed => {
            remove_tree(&aside)?;
            remove_tree(&staging)?;
            "the copy was already in place; only the old entries are removed"
        }
    };
    remove_journal(datadir)?;
    Ok(done.to_owned())
}

/// At the sidecar's start, before it serves: a restore cut off by a crash (of this sidecar
/// or its pod) is rolled back and recorded as failed in `last-job.json` (module docs).
pub(crate) fn recover(settings: &BackupSettings) {
    let Some(datadir) = settings.datadir.as_deref() else {
        return;
    };
    let journal = match read_journal(datadir) {
        Ok(Some(journal)) => journal,
        Ok(None) => return,
        Err(error) => {
            tracing::error!(%error, datadir = %datadir.display(), "restore journal unreadable: mysqld stays down until it is removed by hand");
            return;
        }
    };
    let outcome = roll_back(datadir, &journal);
    let message = match &outcome {
        Ok(done) if journal.step == Step::Committed => format!(
            "the sidecar restarted during the physical restore of backup {}, after the copy was in place ({done}); the binlog was not reset to the copy's GTID set",
            journal.backup
        ),
        Ok(done) => format!(
            "the sidecar restarted during the physical restore of backup {} (step {:?}); the data directory was rolled back to its contents before the restore ({done})",
            journal.backup, journal.step
        ),
        Err(error) => format!(
            "the sidecar restarted during the physical restore of backup {} (step {:?}) and could not roll the data directory back ({error}); the journal stays and mysqld with it stays down",
            journal.backup, journal.step
        ),
    };
    match &outcome {
        Ok(_) => {
            tracing::warn!(backup = %journal.backup, step = ?journal.step, %message, "physical restore cut off; recovered")
        }
        Err(_) => {
            tracing::error!(backup = %journal.backup, step = ?journal.step, %message, "physical restore cut off; not recovered")
        }
    }
    let job = JobStatus {
        kind: JobKind::Restore,
        name: journal.backup.clone(),
        restore_id: journal.restore_id,
        state: JobState::Failed,
        started_at: journal.started_at,
        finished_at: Some(wall_now()),
        gtid_set: None,
        message: Some(message),
    };
    if let Err(error) = write_json(&settings.dir.join(LAST_JOB), &job) {
        tracing::warn!(%error, "record the cut-off restore's outcome on the volume");
    }
}

/// Why a physical restore of `info` cannot run on this sidecar, if it cannot.
pub(crate) fn unavailable(settings: &BackupSettings, info: &BackupInfo) -> Option<String> {
    if let Err(why) = info.gtid_set_for(RestoreMethod::Physical) {
        return Some(why);
    }
    if !settings.dir.join(&info.name).join(PHYSICAL_DIR).is_dir() {
        return Some(format!(
            "backup {} lists a mariadb-backup copy, but {} is missing",
            info.name,
            settings.dir.join(&info.name).join(PHYSICAL_DIR).display()
        ));
    }
    if settings.datadir.is_none() {
        return Some("this sidecar runs without --mysql-datadir".to_owned());
    }
    if settings.mysqld_gate_mark.is_none() {
        return Some(
            "mysqld on this pod is not started through the restore gate (no --mysqld-gate-mark: the pod predates it); recreate the pod, or restore with method=logical"
                .to_owned(),
        );
    }
    if find_tool("mariadb-backup").is_none() {
        return Some("mariadb-backup is not installed beside this sidecar".to_owned());
    }
    None
}

/// The whole physical restore of backup `info` (module docs); the GTID set the site holds
/// after it.
pub(crate) async fn restore(
    shared: &Shared,
    settings: &BackupSettings,
    info: &BackupInfo,
    restore_id: u64,
) -> Result<String, JobError> {
    if let Some(why) = unavailable(settings, info) {
        return Err(fail(format!(
            "restore {} from its mariadb-backup copy: {why}",
            info.name
        )));
    }
    let (Some(datadir), Some(mark)) = (settings.datadir.clone(), settings.mysqld_gate_mark.clone())
    else {
        return Err(fail(
            "restore from the copy: no data directory or gate mark",
        ));
    };
    let gtid_set = info
        .gtid_set_for(RestoreMethod::Physical)
        .map_err(fail)?
        .to_owned();
    if let Some(journal) = read_journal(&datadir)? {
        return Err(fail(format!(
            "restore {}: a restore journal is already in {} ({journal:?})",
            info.name,
            datadir.display()
        )));
    }
    let mysql = client(&settings.mysql);
    {
        let mut conn = mysql
            .connect()
            .await
            .map_err(|e| fail(format!("reach mysqld before stopping it: {e}")))?;
        let read_only = mysql
            .read_only_on(&mut conn)
            .await
            .map_err(|e| fail(format!("read read_only: {e}")))?;
        if !read_only.read_only {
            return Err(fail(
                "stop mysqld for the restore: it is writable; it must be fenced first",
            ));
        }
    }
    fenced_for_restore(shared)?;
    let mut journal = Journal {
        backup: info.name.clone(),
        restore_id,
        step: Step::Stopping,
        started_at: wall_now(),
    };
    let _ = std::fs::remove_file(&mark);
    write_journal(&datadir, &journal)?;
    tracing::info!(site = shared.site(), backup = %info.name, restore_id, "physical restore: journal written; shutting mysqld down");
    shut_down(&mysql).await;
    if let Err(error) = held_down(&mark).await {
        return Err(rolled_back(&datadir, &journal, error));
    }
    tracing::info!(site = shared.site(), backup = %info.name, "physical restore: mysqld is held down by its gate; copying back");
    journal.step = Step::Staging;
    let staged = async {
        write_journal(&datadir, &journal)?;
        copy_back(settings, &info.name, &datadir).await?;
        // The operator moved on (a fence lifts only at a greater generation): leave the old
        // data in place.
        fenced_for_restore(shared)
    }
    .await;
    if let Err(error) = staged {
        return Err(rolled_back(&datadir, &journal, error));
    }
    for step in [Step::Emptying, Step::Filling, Step::Committed] {
        journal.step = step;
        let dir = datadir.clone();
        let journal_now = journal.clone();
        let done = tokio::task::spawn_blocking(move || {
            write_journal(&dir, &journal_now)?;
            match step {
                Step::Emptying => empty_into_aside(&dir),
                Step::Filling => fill_from_staging(&dir),
                Step::Committed => roll_back(&dir, &journal_now).map(|_| ()),
                Step::Stopping | Step::Staging => Ok(()),
            }
        })
        .await
        .map_err(|e| fail(format!("swap the data directory: {e}")))
        .and_then(|outcome| outcome);
        if let Err(error) = done {
            if step == Step::Committed {
                return Err(fail(format!(
                    "finish the swap (the copy is in place): {error}; the journal stays and mysqld with it stays down"
                )));
            }
            return Err(rolled_back(&datadir, &journal, error));
        }
    }
    tracing::info!(site = shared.site(), backup = %info.name, "physical restore: the copy is in place; waiting for mysqld");
    answers_again(&mysql).await.map_err(|error| {
        fail(format!(
            "the data directory holds backup {}'s copy, but {error}; the site stays fenced",
            info.name
        ))
    })?;
    reset_gtid_state(&settings.mysql, &gtid_set).await?;
    fenced_for_restore(shared)?;
    Ok(gtid_set)
}

/// A step failed with `error`: roll the directory back and say both.
fn rolled_back(datadir: &Path, journal: &Journal, error: JobError) -> JobError {
    match roll_back(datadir, journal) {
        Ok(done) => fail(format!(
            "{error}; rolled back at step {:?} ({done}): mysqld starts again on the data it had",
            journal.step
        )),
        Err(rollback) => fail(format!(
            "{error}; and the roll-back at step {:?} failed ({rollback}): the journal stays, so mysqld stays down",
            journal.step
        )),
    }
}

/// `SHUTDOWN`; its answer does not matter (the connection usually drops): the gate's mark is
/// the proof.
async fn shut_down(mysql: &bloodraven_mysql::live::LiveMysql) {
    match mysql.connect().await {
        Ok(mut conn) => {
            if let Err(error) = mysql.execute(&mut conn, "SHUTDOWN").await {
                tracing::debug!(%error, "SHUTDOWN answered with an error (the connection drops as mysqld stops)");
            }
        }
        Err(error) => tracing::warn!(%error, "connect to shut mysqld down"),
    }
}

/// Waits until the gate's mark appears: the container restarted into the gate, no mysqld.
async fn held_down(mark: &Path) -> Result<(), JobError> {
    let started = tokio::time::Instant::now();
    while !mark.exists() {
        if started.elapsed() > GATE_HOLD_WAIT_MAX {
            return Err(fail(format!(
                "mysqld was not held down by its restore gate within {GATE_HOLD_WAIT_MAX:?} of the shutdown (no mark {})",
                mark.display()
            )));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
    Ok(())
}

/// Waits until mysqld answers on the restored directory.
async fn answers_again(mysql: &bloodraven_mysql::live::LiveMysql) -> Result<(), String> {
    let started = tokio::time::Instant::now();
    loop {
        match mysql.connect().await {
            Ok(_) => return Ok(()),
            Err(error) if started.elapsed() > MYSQLD_RETURN_WAIT_MAX => {
                return Err(format!(
                    "mysqld did not answer within {MYSQLD_RETURN_WAIT_MAX:?} ({error})"
                ))
            }
            Err(_) => tokio::time::sleep(WAIT_POLL).await,
        }
    }
}

/// Step 2: the copy into the staging directory, synced.
async fn copy_back(settings: &BackupSettings, name: &str, datadir: &Path) -> Result<(), JobError> {
    let staging: PathBuf = datadir.join(STAGING_DIR);
    remove_tree(&staging)?;
    std::fs::create_dir_all(&staging)
        .map_err(|e| io(format_args!("create {}", staging.display()), e))?;
    let copy = settings.dir.join(name).join(PHYSICAL_DIR);
    let output = run(
        tokio::process::Command::new(find_tool("mariadb-backup").unwrap_or_default())
            .arg("--no-defaults")
            .arg("--copy-back")
            .arg(format!("--target-dir={}", copy.display()))
            .arg(format!("--datadir={}", staging.display()))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true),
        "mariadb-backup --copy-back",
    )
    .await?;
    if !output.status.success() {
        return Err(fail(format!(
            "mariadb-backup --copy-back exited with {}: {}",
            output.status,
            last_lines(&output.stderr)
        )));
    }
    let staged = staging.clone();
    tokio::task::spawn_blocking(move || sync_tree(&staged))
        .await
        .map_err(|e| fail(format!("sync the staged copy: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Temp(PathBuf);

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp(label: &str) -> Temp {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "bloodraven-physical-{label}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        Temp(dir)
    }

    /// A data directory with old contents and a staged copy.
    fn datadir(label: &str) -> Temp {
        let dir = temp(label);
        let d = &dir.0;
        std::fs::create_dir_all(d.join("mysql")).expect("mkdir");
        std::fs::write(d.join("mysql/user.frm"), "old user").expect("write");
        std::fs::write(d.join("ibdata1"), "old ibdata").expect("write");
        std::fs::write(d.join("mysql-bin.000007"), "old binlog").expect("write");
        std::fs::create_dir_all(d.join("lost+found")).expect("mkdir");
        let staging = d.join(STAGING_DIR);
        std::fs::create_dir_all(staging.join("mysql")).expect("mkdir");
        std::fs::write(staging.join("mysql/user.frm"), "new user").expect("write");
        std::fs::write(staging.join("ibdata1"), "new ibdata").expect("write");
        std::fs::create_dir_all(staging.join("app")).expect("mkdir");
        std::fs::write(staging.join("app/items.ibd"), "new items").expect("write");
        dir
    }

    fn tree(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).expect("read") {
                let path = entry.expect("entry").path();
                let relative = path
                    .strip_prefix(root)
                    .expect("inside")
                    .to_string_lossy()
                    .into_owned();
                if path.is_dir() {
                    out.push((relative, "/".to_owned()));
                    walk(root, &path, out);
                } else {
                    out.push((relative, std::fs::read_to_string(&path).expect("read")));
                }
            }
        }
        walk(dir, dir, &mut out);
        out.sort();
        out
    }

    fn journal(step: Step) -> Journal {
        Journal {
            backup: "b1".to_owned(),
            restore_id: 2,
            step,
            started_at: Timestamp::from_unix_millis(0),
        }
    }

    fn without_staging(entries: Vec<(String, String)>) -> Vec<(String, String)> {
        entries
            .into_iter()
            .filter(|(path, _)| !path.starts_with(STAGING_DIR))
            .collect()
    }

    #[test]
    fn the_swap_leaves_exactly_the_copy_and_the_file_systems_own_entries() {
        let dir = datadir("swap");
        let d = &dir.0;
        write_journal(d, &journal(Step::Emptying)).expect("journal");
        empty_into_aside(d).expect("empty");
        fill_from_staging(d).expect("fill");
        let done = roll_back(d, &journal(Step::Committed)).expect("commit");
        assert!(done.contains("already in place"), "{done}");
        assert_eq!(
            tree(d),
            vec![
                ("app".to_owned(), "/".to_owned()),
                ("app/items.ibd".to_owned(), "new items".to_owned()),
                ("ibdata1".to_owned(), "new ibdata".to_owned()),
                ("lost+found".to_owned(), "/".to_owned()),
                ("mysql".to_owned(), "/".to_owned()),
                ("mysql/user.frm".to_owned(), "new user".to_owned()),
            ],
            "the old binlog is gone with the rest of the old contents; no journal is left"
        );
    }

    // docs/design/history.md#issue-12: a restore cut off at any step never leaves mysqld a
    // half-replaced directory: rolled back, the directory holds exactly what it held before.
    #[test]
    fn a_restore_cut_off_at_any_step_rolls_back_to_the_old_contents() {
        for (step, moved_aside, moved_in) in [
            (Step::Stopping, 0, 0),
            (Step::Staging, 0, 0),
            (Step::Emptying, 1, 0),
            (Step::Emptying, 3, 0),
            (Step::Filling, 3, 0),
            (Step::Filling, 3, 2),
            (Step::Filling, 3, 3),
        ] {
            let dir = datadir("cut");
            let d = &dir.0;
            let before = without_staging(tree(d));
            write_journal(d, &journal(step)).expect("journal");
            // The crash: part of the step done.
            let aside = d.join(ASIDE_DIR);
            if moved_aside > 0 {
                std::fs::create_dir_all(&aside).expect("mkdir");
                let names = movable(d).expect("movable");
                move_entries(d, &aside, &names[..moved_aside]).expect("move aside");
            }
            if moved_in > 0 {
                let staging = d.join(STAGING_DIR);
                let names = entries(&staging).expect("entries");
                move_entries(&staging, d, &names[..moved_in]).expect("move in");
            }
            let read = read_journal(d).expect("read").expect("a journal");
            assert_eq!(read.step, step);
            roll_back(d, &read).expect("roll back");
            assert_eq!(
                tree(d),
                before,
                "{step:?} after {moved_aside} aside and {moved_in} in"
            );
            assert_eq!(
                read_journal(d).expect("read"),
                None,
                "the journal is removed"
            );
        }
    }

    #[test]
    fn recovery_records_the_cut_off_restore_as_failed_on_the_volume() {
        let dir = datadir("recover");
        let backups = temp("recover-backups");
        let settings = BackupSettings {
            dir: backups.0.clone(),
            datadir: Some(dir.0.clone()),
            mysqld_gate_mark: Some(dir.0.join("mark")),
            mysql: bloodraven_mysql::live::ConnectOptions {
                host: "127.0.0.1".to_owned(),
                port: 1,
                user: "u".to_owned(),
                password: String::new(),
                connect_timeout: Duration::from_millis(1),
                statement_timeout: Duration::from_millis(1),
            },
        };
        let before = without_staging(tree(&dir.0));
        write_journal(&dir.0, &journal(Step::Emptying)).expect("journal");
        empty_into_aside(&dir.0).expect("empty");
        recover(&settings);
        assert_eq!(tree(&dir.0), before);
        let job = crate::backup::recorded_job(&settings).expect("recorded");
        assert!(job.is(JobKind::Restore, "b1", 2), "{job:?}");
        assert_eq!(job.state, JobState::Failed);
        let message = job.message.unwrap_or_default();
        assert!(message.contains("rolled back"), "{message}");
        // Nothing to recover: nothing recorded anew.
        std::fs::remove_file(backups.0.join(LAST_JOB)).expect("remove");
        recover(&settings);
        assert!(crate::backup::recorded_job(&settings).is_none());
    }
}
