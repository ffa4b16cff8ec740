//! `kubectl bloodraven restore GROUP --from BACKUP`: requests a restore in place of the active
//! site from a named backup on its volume by writing the restore annotation; the operator
//! fences the site, restores it and re-promotes it (transactions after the backup are
//! discarded), behind any live failover-hold.

use bloodraven_api::{names, RestoreMethod, RestoreSource};
use serde_json::{json, Value};

use crate::backup::checked_backup_name;
use crate::cluster::Groups;
use crate::{Error, Result};

/// The merge patch `restore` writes: only the restore annotation, its value
/// [`RestoreSource::annotation_value`] (the bare name for the logical default).
pub fn restore_patch(backup: &str, method: RestoreMethod) -> Value {
    let value = RestoreSource {
        backup: backup.to_owned(),
        method,
    }
    .annotation_value();
    json!({"metadata": {"annotations": {names::ANNOTATION_RESTORE: value}}})
}

/// Runs `restore` from the backup `from` by `method` (`logical` or `physical`); returns what
/// to print.
pub(crate) async fn run(groups: &Groups, group: &str, from: &str, method: &str) -> Result<String> {
    let namespace = groups.namespace();
    checked_backup_name(from)?;
    let method: RestoreMethod = method.parse().map_err(Error::InvalidBackup)?;
    groups.get(group).await?;
    let patch = restore_patch(from, method);
    groups.annotate(group, patch.clone()).await?;
    let how = match method {
        RestoreMethod::Logical => "its logical dump",
        RestoreMethod::Physical => {
            "its mariadb-backup copy (mysqld is stopped while its data directory is replaced)"
        }
    };
    Ok(format!(
        "restore in place of {namespace}/{group}'s active site from {from}, by {how}, requested ({}={}); it waits behind a live failover-hold; transactions after the backup are discarded — watch `kubectl bloodraven status {group} -n {namespace}`\n",
        names::ANNOTATION_RESTORE,
        patch["metadata"]["annotations"][names::ANNOTATION_RESTORE]
            .as_str()
            .unwrap_or_default()
    ))
}
