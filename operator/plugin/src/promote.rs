//! `kubectl bloodraven promote GROUP SITE`: requests a planned failover by writing the
//! planned-failover annotation, and returns; the operator admits it (cooldown, holds).

use bloodraven_api::{names, MysqlFailoverGroup, SiteRole};
use serde_json::{json, Value};

use crate::cluster::Groups;
use crate::{Error, Result};

/// The merge patch `promote` writes: only the planned-failover annotation.
pub fn promote_patch(site: &str) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_PLANNED_FAILOVER: site}}})
}

/// The role of `site` in the group, or why it is not a site of it (naming the sites): the
/// check `promote` and `rejoin` make before they ask.
pub(crate) fn site_role(
    group: &MysqlFailoverGroup,
    site: &str,
) -> std::result::Result<SiteRole, String> {
    group.spec.site(site).map(|spec| spec.role).ok_or_else(|| {
        format!(
            "{site:?} is not a site of {} (sites: {})",
            group.metadata.name.as_deref().unwrap_or(""),
            group
                .spec
                .sites
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Checks that `site` is a read-write site of the group (read-only sites are never writable)
/// before asking; the operator's admission (cooldown, holds) still decides.
pub fn check_promote_target(group: &MysqlFailoverGroup, site: &str) -> Result<()> {
    match site_role(group, site).map_err(Error::InvalidTarget)? {
        SiteRole::ReadOnly => Err(Error::InvalidTarget(format!(
            "{site:?} is a read-only site and can never be promoted"
        ))),
        SiteRole::ReadWrite => Ok(()),
    }
}

/// Runs `promote`; returns what to print.
pub(crate) async fn run(groups: &Groups, group: &str, site: &str) -> Result<String> {
    let namespace = groups.namespace();
    let found = groups.get(group).await?;
    check_promote_target(&found, site)?;
    groups.annotate(group, promote_patch(site)).await?;
    Ok(format!(
        "planned failover of {namespace}/{group} to {site} requested ({}={site}); the operator admits it (cooldown, deployment holds) — watch `kubectl bloodraven status {group} -n {namespace}`\n",
        names::ANNOTATION_PLANNED_FAILOVER
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::playground;

    /// docs/design/requirements.md R001.12: `promote` writes only the planned-failover
    /// annotation (nothing else).
    #[test]
    fn seed_001_promote_writes_only_the_planned_failover_annotation() {
        assert_eq!(
            promote_patch("pdx"),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/planned-failover": "pdx"}}})
        );
    }

    /// docs/design/operator.md#emergency-failover: a read-only site is never writable, so it is
    /// never a promotion target.
    #[test]
    fn promote_refuses_unknown_and_read_only_sites() {
        let group = playground();
        assert!(check_promote_target(&group, "pdx").is_ok());
        let unknown = check_promote_target(&group, "sfo").map_err(|e| e.to_string());
        assert!(
            unknown
                .as_ref()
                .is_err_and(|e| e.contains("iad, pdx, reader")),
            "{unknown:?}"
        );
        assert!(check_promote_target(&group, "reader").is_err());
    }
}
