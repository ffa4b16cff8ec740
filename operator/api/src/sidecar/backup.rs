//! Wire types of the sidecar's backup jobs: a named backup of the site, its restore in place,
//! the re-seed of a replica from the active site (docs/design/history.md#issue-12-part-2), and
//! the archive of a returning primary's errant transactions before a rejoin discards them
//! (docs/design/operator.md#returning-primary).
//!
//! | method | path | request | response |
//! |---|---|---|---|
//! | `POST` | `/v1/backup` | [`BackupRequest`] | [`JobStatus`] |
//! | `POST` | `/v1/restore` | [`RestoreRequest`] | [`JobStatus`] |
//! | `POST` | `/v1/reseed` | [`ReseedRequest`] | [`JobStatus`] |
//! | `POST` | `/v1/archive` | [`ArchiveRequest`] | [`JobStatus`] |
//!
//! A job runs in the sidecar's background, one at a time: the request answers 202 with the
//! job's [`JobStatus`] at once, and `GET /v1/status` carries it ([`SidecarStatus::job`],
//! `Running`, then `Succeeded` or `Failed` with the reason) and the backups on the site's
//! volume ([`SidecarStatus::backups`]). Asking again for the job that runs or last finished
//! answers its status again (idempotent: the operator asks on every poll until it sees the
//! outcome); asking for another one while a job runs is 409. A restore, re-seed or archive
//! outcome is kept on the volume, so a restarted sidecar still reports it.
//!
//! [`SidecarStatus::job`]: super::SidecarStatus::job
//! [`SidecarStatus::backups`]: super::SidecarStatus::backups

use serde::{Deserialize, Serialize};

use crate::{RestoreMethod, Timestamp};

/// Path of the backup endpoint (`POST`).
pub const PATH_BACKUP: &str = "/v1/backup";
/// Path of the restore endpoint (`POST`).
pub const PATH_RESTORE: &str = "/v1/restore";
/// Path of the re-seed endpoint (`POST`).
pub const PATH_RESEED: &str = "/v1/reseed";
/// Path of the archive endpoint (`POST`).
pub const PATH_ARCHIVE: &str = "/v1/archive";
/// The directory on the backups volume that holds one directory per archive.
pub const ARCHIVES_DIR: &str = "archives";
/// The manifest file of an archive ([`ArchiveManifest`], JSON), written last: an archive
/// without it is partial and never counts.
pub const ARCHIVE_MANIFEST: &str = "manifest.json";

/// The longest backup name ([`backup_name_problem`]).
pub const BACKUP_NAME_MAX: usize = 63;

/// Why a backup name is unusable, or `None` for a good one: 1 to [`BACKUP_NAME_MAX`]
/// characters of lowercase letters, digits and `-`, starting with a letter or digit (a
/// directory on the site's volume and an annotation value, so nothing else is allowed).
pub fn backup_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a backup name must not be empty".to_owned());
    }
    if name.len() > BACKUP_NAME_MAX {
        return Some(format!(
            "backup name {name:?} is longer than {BACKUP_NAME_MAX} characters"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Some(format!(
            "backup name {name:?} must start with a lowercase letter or a digit"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "backup name {name:?} contains {bad:?}; only lowercase letters, digits and '-' are allowed"
        ));
    }
    None
}

/// Request of `POST /v1/backup`: a named backup of this site.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupRequest {
    /// The group; a request for another group is refused.
    pub group: String,
    /// The backup's name ([`backup_name_problem`]).
    pub name: String,
}

/// Request of `POST /v1/restore`: replace this site's data with a named backup. Refused
/// (409) unless an explicit fence is in force and mysqld reads read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreRequest {
    /// The group.
    pub group: String,
    /// The backup to restore.
    pub name: String,
    /// Identifies this restore: the topology generation its re-promotion will carry.
    pub restore_id: u64,
    /// The logical dump (the default, also for a request without the field) or the
    /// `mariadb-backup` copy.
    #[serde(default)]
    pub method: RestoreMethod,
}

/// Request of `POST /v1/reseed`: replace this replica's data with a fresh logical dump of
/// the source, then replicate from it. Refused (409) on the site the cached authority names
/// active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReseedRequest {
    /// The group.
    pub group: String,
    /// Identifies this re-seed (the restore's id).
    pub restore_id: u64,
    /// The source's canonical host (the active site's internal Service).
    pub source_host: String,
    /// The source's MySQL port.
    pub source_port: u16,
}

/// Request of `POST /v1/archive`: before a rejoin discards this site's errant transactions,
/// keep a copy of them and of the whole site. The job writes, under
/// `<backups volume>/`[`ARCHIVES_DIR`]`/<name>/`, the binlog events of exactly the errant
/// transactions (selected by GTID from mysqld's binlog, then read back: the job fails unless
/// the file holds each errant transaction once and nothing else), a full logical dump of the
/// site as it is, and last the [`ARCHIVE_MANIFEST`] naming each file with its GTID set, size
/// and SHA-256.
///
/// Refused (409) unless an explicit fence is in force and mysqld reads read-only, or when the
/// site does not hold every transaction of `errant_gtid_set` (each `D-S-N` needs an entry
/// `D-S-M`, `M >= N`, in its `gtid_binlog_state`); 400 for a bad name or an errant set that
/// does not parse or is empty. When an archive of that name exists (it has its manifest), the
/// same request (same `rejoin_id`, same set) is answered with its job, succeeded, at once; any
/// other is refused (409): an archive is never overwritten. A job that fails leaves no
/// manifest (its files are removed) and says why; the site stays as it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveRequest {
    /// The group; a request for another group is refused.
    pub group: String,
    /// The archive's name ([`backup_name_problem`]'s rules; a directory on the volume).
    pub name: String,
    /// Identifies the rejoin this archive is for (the job's `restore_id` field carries it).
    pub rejoin_id: u64,
    /// The errant transactions to archive (the flavor's GTID set text): those this site holds
    /// and the active site lacks. A set that is not a domain's whole prefix is written with
    /// range items (`0-1-101..105`), as `bloodraven_mysql::GtidSet` prints it; a position item
    /// `0-1-105` means transactions 1..=105.
    pub errant_gtid_set: String,
}

/// One file of an archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveFile {
    /// The file's name inside the archive's directory.
    pub name: String,
    /// What it holds: `errant-binlog` (the errant transactions' binlog events, as
    /// `mariadb-binlog --verbose` prints them: replayable with the `mariadb` client, row events
    /// with their SQL in `###` comments) or `dump` (the full logical dump).
    pub role: String,
    /// The GTID set of what the file holds (the errant set; the dump's snapshot set).
    pub gtid_set: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the file's bytes, lowercase hex.
    pub sha256: String,
}

/// The manifest of an archive ([`ARCHIVE_MANIFEST`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveManifest {
    /// The archive's name.
    pub name: String,
    /// The site archived.
    pub site: String,
    /// The rejoin it was taken for.
    pub rejoin_id: u64,
    /// The errant GTID set it holds.
    pub errant_gtid_set: String,
    /// When it was written (wall clock of the sidecar).
    pub created_at: Timestamp,
    /// Its files.
    pub files: Vec<ArchiveFile>,
}

/// What a backup on the site's volume holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupInfo {
    /// The backup's name.
    pub name: String,
    /// The site it was taken on.
    pub site: String,
    /// When the dump's snapshot was taken (wall clock of the sidecar).
    pub created_at: Timestamp,
    /// The GTID set of the dump's consistent snapshot, in the flavor's text form (MariaDB:
    /// `gtid_binlog_state`): a restore keeps exactly these transactions.
    pub gtid_set: String,
    /// The schemas in the logical dump.
    pub databases: Vec<String>,
    /// Size of the logical dump in bytes.
    pub logical_bytes: u64,
    /// Whether a prepared `mariadb-backup` copy sits next to the dump (the flavor has the
    /// tool and the sidecar can read the data directory).
    pub physical: bool,
    /// The GTID set of that copy (same form as `gtid_set`; the copy is taken after the dump,
    /// so on a site taking writes it holds more). A restore from the copy keeps exactly these
    /// transactions. `None` for a backup without a copy, and for one written before this
    /// field existed: such a copy cannot be restored from (its set is unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_gtid_set: Option<String>,
}

impl BackupInfo {
    /// The GTID set a restore by `method` leaves the site with, or why this backup cannot
    /// be restored that way.
    pub fn gtid_set_for(&self, method: RestoreMethod) -> Result<&str, String> {
        match method {
            RestoreMethod::Logical => Ok(&self.gtid_set),
            RestoreMethod::Physical => match (&self.physical_gtid_set, self.physical) {
                (Some(set), true) => Ok(set),
                (None, true) => Err(format!(
                    "backup {} has a mariadb-backup copy whose GTID set was not recorded (taken by an older sidecar); restore it with method=logical",
                    self.name
                )),
                (_, false) => Err(format!(
                    "backup {} has no mariadb-backup copy (only its logical dump: mariadb-backup or the data directory was not available on {} when it was taken); restore it with method=logical",
                    self.name, self.site
                )),
            },
        }
    }
}

/// The restore journal's file name, at the top of mysqld's data directory. While it exists a
/// physical restore is replacing the directory, and [`MYSQLD_GATE_SCRIPT`] does not start
/// mysqld.
pub const RESTORE_JOURNAL: &str = "bloodraven-restore.json";

/// The `mysql` container's command prefix in a pod that offers physical restores (`sh -c`
/// with this script, then its `$0`, the journal path, the gate's mark and the image's own
/// entrypoint, then the container's args): while the restore journal exists it does not
/// start mysqld and touches the mark every second, so the sidecar can see mysqld is down and
/// stays down; once the journal is gone it removes the mark and `exec`s the entrypoint, so
/// mysqld is the container's process as without the gate (a kill, a freeze, a crash work as
/// before; a crash restarts the container into the gate again).
///
/// The journal lives on the data volume, so it outlives the pod: a pod recreated while a
/// restore was cut off does not start mysqld on a half-replaced directory either, until its
/// sidecar has rolled the directory back and removed the journal.
pub const MYSQLD_GATE_SCRIPT: &str = r#"journal="$1"; mark="$2"; shift 2
while [ -e "$journal" ]; do : > "$mark"; sleep 1; done
rm -f "$mark"
exec "$@""#;

/// `$0` of [`MYSQLD_GATE_SCRIPT`] (what `ps` shows for the waiting gate).
pub const MYSQLD_GATE_NAME: &str = "bloodraven-mysqld-gate";

/// The argv prefix that runs `entrypoint` through [`MYSQLD_GATE_SCRIPT`] with the journal at
/// `journal` and the mark at `mark`; the container's args follow it.
pub fn mysqld_gate_command(journal: &str, mark: &str, entrypoint: &[&str]) -> Vec<String> {
    [
        "/bin/sh",
        "-c",
        MYSQLD_GATE_SCRIPT,
        MYSQLD_GATE_NAME,
        journal,
        mark,
    ]
    .iter()
    .chain(entrypoint)
    .map(|part| (*part).to_owned())
    .collect()
}

/// The kind of a sidecar job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobKind {
    /// A named backup.
    Backup,
    /// A restore in place from a named backup.
    Restore,
    /// A replica re-seeded from the source.
    Reseed,
    /// A returning primary's errant transactions and data archived before a rejoin.
    Archive,
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobState {
    /// Running now.
    Running,
    /// Finished.
    Succeeded,
    /// Stopped; `message` says why.
    Failed,
}

/// The job that runs or last finished on a sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Backup, restore, re-seed or archive.
    pub kind: JobKind,
    /// The backup's name (for a re-seed: the source host; for an archive: its name).
    pub name: String,
    /// The restore id (0 for a backup; for an archive: the rejoin id).
    pub restore_id: u64,
    /// Running, succeeded or failed.
    pub state: JobState,
    /// When it started.
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
    /// The GTID set the site holds after a restore or re-seed, or the backup's; for an
    /// archive, its errant set (from the start; `None` once it failed).
    pub gtid_set: Option<String>,
    /// Why it failed, or what it did.
    pub message: Option<String>,
}

impl JobStatus {
    /// Whether this is the job `(kind, name, restore_id)`.
    pub fn is(&self, kind: JobKind, name: &str, restore_id: u64) -> bool {
        self.kind == kind && self.name == name && self.restore_id == restore_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(physical: bool, physical_gtid_set: Option<&str>) -> BackupInfo {
        BackupInfo {
            name: "b1".to_owned(),
            site: "iad".to_owned(),
            created_at: Timestamp::from_unix_millis(0),
            gtid_set: "0-1-5".to_owned(),
            databases: vec!["app".to_owned()],
            logical_bytes: 10,
            physical,
            physical_gtid_set: physical_gtid_set.map(str::to_owned),
        }
    }

    #[test]
    fn a_restore_method_picks_its_gtid_set_or_names_why_the_backup_lacks_it() {
        let both = info(true, Some("0-1-7"));
        assert_eq!(both.gtid_set_for(RestoreMethod::Logical), Ok("0-1-5"));
        assert_eq!(both.gtid_set_for(RestoreMethod::Physical), Ok("0-1-7"));
        let dump_only = info(false, None);
        assert_eq!(dump_only.gtid_set_for(RestoreMethod::Logical), Ok("0-1-5"));
        let why = dump_only
            .gtid_set_for(RestoreMethod::Physical)
            .expect_err("no copy");
        assert!(
            why.contains("no mariadb-backup copy") && why.contains("method=logical"),
            "{why}"
        );
        let older = info(true, None);
        let why = older
            .gtid_set_for(RestoreMethod::Physical)
            .expect_err("no recorded set");
        assert!(why.contains("not recorded"), "{why}");
        // A manifest written before the field existed still reads.
        let text = r#"{"name":"b1","site":"iad","createdAt":"2026-12-01T00:00:00Z","gtidSet":"0-1-5","databases":[],"logicalBytes":0,"physical":true}"#;
        let old: BackupInfo = serde_json::from_str(text).expect("old manifest");
        assert_eq!(old.physical_gtid_set, None);
        // A restore request without the field is the logical one.
        let request: RestoreRequest =
            serde_json::from_str(r#"{"group":"g","name":"b1","restoreId":2}"#).expect("request");
        assert_eq!(request.method, RestoreMethod::Logical);
    }

    #[test]
    fn the_gate_runs_the_entrypoint_after_its_own_arguments() {
        let argv = mysqld_gate_command("/d/j", "/r/m", &["docker-entrypoint.sh"]);
        assert_eq!(argv[..3], ["/bin/sh", "-c", MYSQLD_GATE_SCRIPT]);
        assert_eq!(
            argv[3..],
            [MYSQLD_GATE_NAME, "/d/j", "/r/m", "docker-entrypoint.sh"]
        );
        // kubelet expands $(NAME) in command and args: the script must hold none.
        assert!(!MYSQLD_GATE_SCRIPT.contains("$("));
    }

    #[test]
    fn backup_names_are_checked_and_the_problem_named() {
        assert_eq!(backup_name_problem("playground-20261201-2330"), None);
        assert_eq!(backup_name_problem("0a"), None);
        for (name, fragment) in [
            ("", "empty"),
            ("-a", "start with"),
            ("A", "start with"),
            ("a/b", "'/'"),
            ("a.b", "'.'"),
            ("a b", "' '"),
        ] {
            let problem = backup_name_problem(name).expect("a problem");
            assert!(problem.contains(fragment), "{name:?}: {problem}");
        }
        assert!(backup_name_problem(&"a".repeat(BACKUP_NAME_MAX + 1))
            .expect("too long")
            .contains("longer"));
    }

    #[test]
    fn job_status_round_trips_in_camel_case() {
        let job = JobStatus {
            kind: JobKind::Restore,
            name: "b1".to_owned(),
            restore_id: 4,
            state: JobState::Failed,
            started_at: Timestamp::from_unix_millis(1_000),
            finished_at: Some(Timestamp::from_unix_millis(2_000)),
            gtid_set: None,
            message: Some("backup b1 not found".to_owned()),
        };
        let text = serde_json::to_string(&job).expect("encode");
        assert!(text.contains("\"restoreId\":4"), "{text}");
        assert!(text.contains("\"state\":\"Failed\""), "{text}");
        let back: JobStatus = serde_json::from_str(&text).expect("decode");
        assert_eq!(back, job);
        assert!(back.is(JobKind::Restore, "b1", 4));
        assert!(!back.is(JobKind::Restore, "b1", 5));
    }
}
