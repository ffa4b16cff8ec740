//! `kubectl bloodraven rejoin GROUP SITE`: requests the rejoin of a fenced returning primary
//! by writing the rejoin annotation, and returns; the operator archives the site's errant
//! transactions and a full dump on its backups volume, re-seeds it from the active site, and
//! only then makes it a replica again (docs/design/operator.md#returning-primary). The
//! operator refuses it, saying why in an Event and in `status.sites[].rejoin`, when the site
//! is the active one, is not fenced or holds no errant transactions, when the group has no
//! valid authority, or while a failover, restore or ordered update is in flight; a live
//! failover-hold defers it.

use bloodraven_api::{names, MysqlFailoverGroup, SiteRole};
use serde_json::{json, Value};

use crate::cluster::Groups;
use crate::{Error, Result};

/// The merge patch `rejoin` writes: only the rejoin annotation, naming the site.
pub fn rejoin_patch(site: &str) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_REJOIN: site}}})
}

/// Checks that `site` is a read-write site of the group (only a read-write site is ever
/// demoted, so only one can be a returning primary) before asking; the operator's checks
/// (fenced, errant transactions, authority, operations in flight, holds) still decide.
pub fn check_rejoin_target(group: &MysqlFailoverGroup, site: &str) -> Result<()> {
    match crate::promote::site_role(group, site).map_err(Error::InvalidRejoin)? {
        SiteRole::ReadOnly => Err(Error::InvalidRejoin(format!(
            "{site:?} is a read-only site: it is never demoted, so it is never a fenced returning primary"
        ))),
        SiteRole::ReadWrite => Ok(()),
    }
}

/// What the group's status says of `site` now, for the message: its errant set, if known.
fn errant_note(group: &MysqlFailoverGroup, site: &str) -> String {
    let errant = group
        .status
        .as_ref()
        .and_then(|status| status.sites.iter().find(|s| s.name == site))
        .and_then(|status| status.errant_gtid_set.clone());
    match errant {
        Some(set) => format!(" (its errant GTID set as last read: {set})"),
        None => String::new(),
    }
}

/// Runs `rejoin`; returns what to print.
pub(crate) async fn run(groups: &Groups, group: &str, site: &str) -> Result<String> {
    let namespace = groups.namespace();
    let found = groups.get(group).await?;
    check_rejoin_target(&found, site)?;
    groups.annotate(group, rejoin_patch(site)).await?;
    Ok(format!(
        "rejoin of {site} in {namespace}/{group} requested ({}={site}){}; the operator archives its errant transactions and a full dump under archives/rejoin-{site}-<id>/ on {site}'s backups volume, then re-seeds it from the active site (it stays fenced until then, and waits behind a live failover-hold) — watch `kubectl bloodraven status {group} -n {namespace}`\n",
        names::ANNOTATION_REJOIN,
        errant_note(&found, site)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::playground;

    /// docs/design/operator.md#returning-primary (and docs/design/requirements.md R001.12 for
    /// every subcommand): `rejoin` writes only the rejoin annotation, naming the site.
    #[test]
    fn issue_35_rejoin_writes_only_the_rejoin_annotation() {
        assert_eq!(
            rejoin_patch("iad"),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/rejoin": "iad"}}})
        );
    }

    /// docs/design/operator.md#returning-primary: only a read-write site is ever demoted, so
    /// an unknown or read-only site is refused before anything is written.
    #[test]
    fn issue_35_rejoin_refuses_unknown_and_read_only_sites() {
        let group = playground();
        assert!(check_rejoin_target(&group, "iad").is_ok());
        let unknown = check_rejoin_target(&group, "sfo").map_err(|e| e.to_string());
        assert!(
            unknown
                .as_ref()
                .is_err_and(|e| e.contains("request a rejoin") && e.contains("iad, pdx, reader")),
            "{unknown:?}"
        );
        let reader = check_rejoin_target(&group, "reader").map_err(|e| e.to_string());
        assert!(
            reader.as_ref().is_err_and(|e| e.contains("read-only")),
            "{reader:?}"
        );
    }

    /// The message names the errant set the status last recorded.
    #[test]
    fn issue_35_rejoin_names_the_errant_set_it_knows() {
        let mut group = playground();
        assert_eq!(errant_note(&group, "iad"), "");
        group.status = Some(bloodraven_api::MysqlFailoverGroupStatus {
            sites: vec![bloodraven_api::SiteStatus {
                name: "iad".into(),
                role: Some("fenced".into()),
                errant_gtid_set: Some("0-1-11..13".into()),
                ..bloodraven_api::SiteStatus::default()
            }],
            ..bloodraven_api::MysqlFailoverGroupStatus::default()
        });
        assert!(errant_note(&group, "iad").contains("0-1-11..13"));
    }
}
