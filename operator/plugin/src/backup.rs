//! `kubectl bloodraven backup GROUP [--name NAME]`: requests a named backup of the active site
//! on its volume by writing the backup annotation; the operator asks the site's sidecar, and
//! `status` shows it as "Last backup". Also the backup-name check `restore` shares.

use bloodraven_api::names;
use serde_json::{json, Value};

use crate::cluster::Groups;
use crate::{Error, Result};

/// The merge patch `backup` writes: only the backup annotation.
pub fn backup_patch(name: &str) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_BACKUP: name}}})
}

/// The default backup name: `<group>-<YYYYMMDD-HHMMSS>` (UTC).
pub fn default_backup_name(group: &str, now: jiff::Timestamp) -> String {
    format!("{group}-{}", now.strftime("%Y%m%d-%H%M%S"))
}

/// Refuses a backup name the sidecar would refuse, before anything is written.
pub(crate) fn checked_backup_name(name: &str) -> Result<()> {
    match bloodraven_api::sidecar::backup_name_problem(name) {
        Some(problem) => Err(Error::InvalidBackup(problem)),
        None => Ok(()),
    }
}

/// Runs `backup`; returns what to print.
pub(crate) async fn run(groups: &Groups, group: &str, name: Option<&str>) -> Result<String> {
    let namespace = groups.namespace();
    let name = name
        .map(str::to_string)
        .unwrap_or_else(|| default_backup_name(group, jiff::Timestamp::now()));
    checked_backup_name(&name)?;
    groups.get(group).await?;
    groups.annotate(group, backup_patch(&name)).await?;
    Ok(format!(
        "backup {name} of {namespace}/{group}'s active site requested ({}={name}) — watch `kubectl bloodraven status {group} -n {namespace}`\n",
        names::ANNOTATION_BACKUP
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restore::restore_patch;
    use bloodraven_api::RestoreMethod;

    /// docs/design/history.md#issue-12: `backup` and `restore` write only their annotation;
    /// names are checked.
    #[test]
    fn backup_and_restore_write_only_their_annotation() {
        assert_eq!(
            backup_patch("b1"),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/backup": "b1"}}})
        );
        assert_eq!(
            restore_patch("b1", RestoreMethod::Logical),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/restore": "b1"}}})
        );
        assert_eq!(
            restore_patch("b1", RestoreMethod::Physical),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/restore": "b1,method=physical"}}})
        );
        let now: jiff::Timestamp = "2026-12-01T23:30:05Z".parse().expect("time");
        let name = default_backup_name("playground", now);
        assert_eq!(name, "playground-20261201-233005");
        assert!(checked_backup_name(&name).is_ok());
        let bad = checked_backup_name("Bad/Name").map_err(|e| e.to_string());
        assert!(bad.is_err_and(|e| e.contains("lowercase")));
    }
}
