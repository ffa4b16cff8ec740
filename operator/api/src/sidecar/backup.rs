//! Wire types of the sidecar's backup jobs: a named backup of the site, its restore in place,
//! and the re-seed of a replica from the active site (issue 12 part 2).
//!
//! | method | path | request | response |
//! |---|---|---|---|
//! | `POST` | `/v1/backup` | [`BackupRequest`] | [`JobStatus`] |
//! | `POST` | `/v1/restore` | [`RestoreRequest`] | [`JobStatus`] |
//! | `POST` | `/v1/reseed` | [`ReseedRequest`] | [`JobStatus`] |
//!
//! A job runs in the sidecar's background, one at a time: the request answers 202 with the
//! job's [`JobStatus`] at once, and `GET /v1/status` carries it ([`SidecarStatus::job`],
//! `Running`, then `Succeeded` or `Failed` with the reason) and the backups on the site's
//! volume ([`SidecarStatus::backups`]). Asking again for the job that runs or last finished
//! answers its status again (idempotent: the operator asks on every poll until it sees the
//! outcome); asking for another one while a job runs is 409. A restore or re-seed outcome is
//! kept on the volume, so a restarted sidecar still reports it.
//!
//! [`SidecarStatus::job`]: super::SidecarStatus::job
//! [`SidecarStatus::backups`]: super::SidecarStatus::backups

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// Path of the backup endpoint (`POST`).
pub const PATH_BACKUP: &str = "/v1/backup";
/// Path of the restore endpoint (`POST`).
pub const PATH_RESTORE: &str = "/v1/restore";
/// Path of the re-seed endpoint (`POST`).
pub const PATH_RESEED: &str = "/v1/reseed";

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
    /// Backup, restore or re-seed.
    pub kind: JobKind,
    /// The backup's name (for a re-seed: the source host).
    pub name: String,
    /// The restore id (0 for a backup).
    pub restore_id: u64,
    /// Running, succeeded or failed.
    pub state: JobState,
    /// When it started.
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
    /// The GTID set the site holds after a restore or re-seed, or the backup's.
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
