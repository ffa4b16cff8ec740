//! Status of restore-in-place and of named backups (docs/design/history.md#issue-12-part-2):
//! `status.restore` and `status.lastBackup` of a
//! [`MysqlFailoverGroup`](crate::MysqlFailoverGroup).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Admission, Timestamp};

/// Phase of a restore in place.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RestorePhase {
    /// Checking the backup, the authority and holds.
    Admitting,
    /// Parked behind a live failover-hold until `admission.retryTime`.
    Deferred,
    /// The active pod is `role=fenced`; waiting for its sidecar to confirm mysqld read-only.
    Fencing,
    /// The sidecar loads the backup.
    Restoring,
    /// The restored site was re-promoted (topology generation bumped, deploy leases revoked);
    /// waiting to see it writable.
    Promoting,
    /// Replicas holding transactions the backup lacks are re-seeded from the restored site.
    Reseeding,
    /// Done; `lostTransactions` says what the restore discarded.
    Completed,
    /// Stopped; `message` says why, and whether the site stays fenced.
    Failed,
}

/// How a restore in place loads a backup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RestoreMethod {
    /// The logical dump (`dump.sql`) is loaded into the running, fenced mysqld (the default).
    #[default]
    Logical,
    /// mysqld is stopped and its data directory replaced by the backup's prepared
    /// `mariadb-backup` copy (`physical/`); only for a backup that has one.
    Physical,
}

impl RestoreMethod {
    /// The word the annotation and the plugin use: `logical` or `physical`.
    pub fn as_str(self) -> &'static str {
        match self {
            RestoreMethod::Logical => "logical",
            RestoreMethod::Physical => "physical",
        }
    }
}

impl std::str::FromStr for RestoreMethod {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "logical" => Ok(RestoreMethod::Logical),
            "physical" => Ok(RestoreMethod::Physical),
            other => Err(format!(
                "restore method {other:?} is unknown; use logical or physical"
            )),
        }
    }
}

/// The separator of the restore annotation's options: `<backup>,method=<method>`.
pub const RESTORE_OPTION_SEPARATOR: char = ',';

/// A restore request as the annotation `bloodraven.shipstream.io/restore` carries it:
/// `<backup>` (the logical dump) or `<backup>,method=logical|physical`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreSource {
    /// The backup's name.
    pub backup: String,
    /// How it is loaded.
    pub method: RestoreMethod,
}

impl RestoreSource {
    /// Reads an annotation value; the error names what is wrong with it. The backup name
    /// itself is checked by `sidecar::backup_name_problem`, not here.
    pub fn parse(value: &str) -> Result<RestoreSource, String> {
        let mut parts = value.split(RESTORE_OPTION_SEPARATOR);
        let backup = parts.next().unwrap_or_default().trim().to_owned();
        let mut method = None;
        for option in parts {
            let option = option.trim();
            match option.split_once('=') {
                Some(("method", text)) => {
                    if method.is_some() {
                        return Err(format!(
                            "restore request {value:?} names the method twice"
                        ));
                    }
                    method = Some(text.trim().parse::<RestoreMethod>()?);
                }
                _ => {
                    return Err(format!(
                        "restore request {value:?}: option {option:?} is unknown; the form is <backup> or <backup>,method=logical|physical"
                    ))
                }
            }
        }
        Ok(RestoreSource {
            backup,
            method: method.unwrap_or_default(),
        })
    }

    /// The annotation value: the bare name for the logical default (what older plugins
    /// write), `<backup>,method=physical` otherwise.
    pub fn annotation_value(&self) -> String {
        match self.method {
            RestoreMethod::Logical => self.backup.clone(),
            RestoreMethod::Physical => format!(
                "{}{RESTORE_OPTION_SEPARATOR}method={}",
                self.backup,
                self.method.as_str()
            ),
        }
    }
}

/// A restore in place of the active site from a named backup.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreStatus {
    /// Current phase.
    pub phase: RestorePhase,
    /// The backup restored from.
    pub backup: String,
    /// How the backup is loaded: its logical dump, or its `mariadb-backup` copy.
    #[serde(default)]
    pub method: RestoreMethod,
    /// The site restored (the active site when the request was admitted).
    pub site: String,
    /// Admission detail (a failover-hold deferring it).
    #[serde(default)]
    pub admission: Admission,
    /// What happened last, or why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the request was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<Timestamp>,
    /// When the current phase was entered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<Timestamp>,
    /// When mysqld was confirmed read-only under the fence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced_at: Option<Timestamp>,
    /// When the sidecar reported the backup loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_at: Option<Timestamp>,
    /// When the restored site was re-promoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_at: Option<Timestamp>,
    /// When the restore completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// The topology generation of the re-promotion (also the sidecar job's restore id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_generation: Option<u64>,
    /// The site's GTID set when it was fenced (everything it had committed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced_gtid_set: Option<String>,
    /// The backup's GTID set (what the site holds after the restore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_gtid_set: Option<String>,
    /// Transactions the site had committed that the backup lacks: what the restore discarded.
    #[serde(default)]
    pub lost_transactions: u64,
    /// Those transactions as a GTID set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_gtid_set: Option<String>,
    /// true: measured on the fenced site (it could commit nothing more).
    #[serde(default)]
    pub exact: bool,
    /// Replicas still to re-seed (they hold transactions the restored site does not): never
    /// repointed at the restored site until re-seeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_reseed: Vec<String>,
    /// Replicas re-seeded from the restored site.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reseeded: Vec<String>,
    /// Every GTID the restores this record replaced discarded (carried from record to record,
    /// merged): the history written since each of them may have reused these numbers for
    /// other transactions, so they vouch for no shared history when what this restore
    /// discards is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier_discarded_gtid_set: Option<String>,
    /// What the restores this record replaced discarded from the last failover's new active
    /// site after that failover's promotion: like this restore's own `lostGtidSet`, part of
    /// the baseline that failover's `lostTransactions` is measured against (the restores'
    /// loss, not the failover's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded_since_failover: Option<DiscardedSinceFailover>,
}

/// GTIDs restores in place discarded after one failover's promotion (`RestoreStatus::
/// discarded_since_failover`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscardedSinceFailover {
    /// The `lastFailover.promotedAt` of that failover: the set counts only for it.
    pub failover_promoted_at: Timestamp,
    /// The site the failover promoted, which the restores discarded from.
    pub site: String,
    /// The discarded transactions, merged.
    pub gtid_set: String,
}

/// Phase of a named backup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum BackupPhase {
    /// The active site's sidecar is taking it.
    Running,
    /// On the active site's volume.
    Completed,
    /// Stopped; `message` says why.
    Failed,
}

/// The last named backup requested (`bloodraven.shipstream.io/backup`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupStatus {
    /// The backup's name.
    pub name: String,
    /// The site it is taken on.
    pub site: String,
    /// Running, completed or failed.
    pub phase: BackupPhase,
    /// When the request was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<Timestamp>,
    /// When it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Its GTID set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtid_set: Option<String>,
    /// Why it failed, or what it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_requests_name_the_backup_and_optionally_the_method() {
        let source = |backup: &str, method| RestoreSource {
            backup: backup.to_owned(),
            method,
        };
        assert_eq!(
            RestoreSource::parse("b1"),
            Ok(source("b1", RestoreMethod::Logical))
        );
        assert_eq!(
            RestoreSource::parse("b1,method=physical"),
            Ok(source("b1", RestoreMethod::Physical))
        );
        assert_eq!(
            RestoreSource::parse("b1, method=logical"),
            Ok(source("b1", RestoreMethod::Logical))
        );
        for (value, fragment) in [
            ("b1,method=fast", "\"fast\" is unknown"),
            ("b1,how=physical", "option \"how=physical\" is unknown"),
            ("b1,method=physical,method=logical", "twice"),
            ("b1,", "option \"\" is unknown"),
        ] {
            let problem = RestoreSource::parse(value).expect_err(value);
            assert!(problem.contains(fragment), "{value:?}: {problem}");
        }
        for method in [RestoreMethod::Logical, RestoreMethod::Physical] {
            let written = source("b1", method);
            assert_eq!(
                RestoreSource::parse(&written.annotation_value()),
                Ok(written)
            );
        }
        assert_eq!(
            source("b1", RestoreMethod::Logical).annotation_value(),
            "b1"
        );
    }
}
