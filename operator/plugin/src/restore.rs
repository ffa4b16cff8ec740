//! `kubectl bloodraven restore GROUP --from BACKUP`: requests a restore in place of the active
//! site from a named backup on its volume by writing the restore annotation; the operator
//! fences the site, restores it and re-promotes it (transactions after the backup are
//! discarded), behind any live failover-hold.

use bloodraven_api::names;
use serde_json::{json, Value};

use crate::backup::checked_backup_name;
use crate::cluster::Groups;
use crate::Result;

/// The merge patch `restore` writes: only the restore annotation.
pub fn restore_patch(backup: &str) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_RESTORE: backup}}})
}

/// Runs `restore` from the backup `from`; returns what to print.
pub(crate) async fn run(groups: &Groups, group: &str, from: &str) -> Result<String> {
    let namespace = groups.namespace();
    checked_backup_name(from)?;
    groups.get(group).await?;
    groups.annotate(group, restore_patch(from)).await?;
    Ok(format!(
        "restore in place of {namespace}/{group}'s active site from {from} requested ({}={from}); it waits behind a live failover-hold; transactions after the backup are discarded — watch `kubectl bloodraven status {group} -n {namespace}`\n",
        names::ANNOTATION_RESTORE
    ))
}
