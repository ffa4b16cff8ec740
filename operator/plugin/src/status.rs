//! `kubectl bloodraven status GROUP`: the group's authority, failovers, update, backup and
//! restore, and a table of its sites, from the group's status.

use std::fmt::Write as _;

use bloodraven_api::{
    AuthorityState, MysqlFailoverGroup, MysqlFailoverGroupStatus, OrderedUpdateStatus,
    PlannedFailoverStatus, SiteStatus,
};

use crate::cluster::Groups;
use crate::Result;

/// Runs `status`; returns what to print.
pub(crate) async fn run(groups: &Groups, group: &str) -> Result<String> {
    Ok(format_status(&groups.get(group).await?))
}

/// The human-readable status of a group.
pub fn format_status(group: &MysqlFailoverGroup) -> String {
    let mut out = String::new();
    let name = group.metadata.name.as_deref().unwrap_or("");
    let namespace = group.metadata.namespace.as_deref().unwrap_or("");
    let _ = writeln!(out, "Group:               {namespace}/{name}");
    let Some(status) = &group.status else {
        let _ = writeln!(out, "Status:              not yet observed by the operator");
        return out;
    };
    write_authority(&mut out, status);
    if let Some(planned) = &status.planned_failover {
        write_planned_failover(&mut out, planned);
    }
    if let Some(update) = &status.ordered_update {
        write_ordered_update(&mut out, update);
    }
    write_last_operations(&mut out, status);
    let _ = writeln!(out);
    write_sites(&mut out, &status.sites);
    write_returning_primaries(&mut out, &status.sites);
    out
}

/// Active site, topology generation, authority, cooldown and replication lag.
fn write_authority(out: &mut String, status: &MysqlFailoverGroupStatus) {
    let authority = match &status.authority {
        Some(authority) => match authority.state {
            AuthorityState::Valid => "Valid".to_string(),
            AuthorityState::Invalid => format!(
                "Invalid ({})",
                authority.reason.as_deref().unwrap_or("unknown")
            ),
        },
        None => "unknown".to_string(),
    };
    let _ = writeln!(
        out,
        "Active site:         {}",
        status.active_site.as_deref().unwrap_or("-")
    );
    let _ = writeln!(out, "Topology generation: {}", status.topology_generation);
    let _ = writeln!(out, "Authority:           {authority}");
    if let Some(until) = status.cooldown_until {
        let _ = writeln!(out, "Cooldown until:      {until}");
    }
    if let Some(lag) = status
        .health
        .as_ref()
        .and_then(|health| health.replication_lag_seconds)
    {
        let _ = writeln!(out, "Replication lag:     {lag}s");
    }
}

/// The planned failover in flight: phase, target, why it is deferred.
fn write_planned_failover(out: &mut String, planned: &PlannedFailoverStatus) {
    let _ = write!(
        out,
        "Planned failover:    {:?} -> {}",
        planned.phase, planned.target
    );
    if let Some(reason) = planned.admission.defer_reason {
        let _ = write!(out, " (deferred: {reason:?}");
        if let Some(retry) = planned.admission.retry_time {
            let _ = write!(out, ", retry at {retry}");
        }
        let _ = write!(out, ")");
    }
    if let Some(message) = &planned.admission.message {
        let _ = write!(out, " {message}");
    }
    let _ = writeln!(out);
}

/// The ordered update: phase, target image, current site, and each site's image.
fn write_ordered_update(out: &mut String, update: &OrderedUpdateStatus) {
    let _ = write!(
        out,
        "Ordered update:      {:?} -> {}",
        update.phase, update.target_image
    );
    if let Some(site) = &update.current_site {
        let _ = write!(out, " (site {site})");
    }
    if let Some(message) = &update.message {
        let _ = write!(out, " {message}");
    }
    let _ = writeln!(out);
    for site in &update.sites {
        let _ = writeln!(
            out,
            "  {:<18} {}{}",
            site.name,
            site.image.as_deref().unwrap_or("-"),
            if site.updated { " (updated)" } else { "" }
        );
    }
}

/// The last failover, the last backup and the restore, when there are any.
fn write_last_operations(out: &mut String, status: &MysqlFailoverGroupStatus) {
    if let Some(last) = &status.last_failover {
        let _ = writeln!(
            out,
            "Last failover:       {:?} {} -> {}, lost {} transaction(s){}",
            last.kind,
            last.from,
            last.to,
            last.lost_transactions,
            if last.exact { "" } else { " (lower bound)" }
        );
    }
    if let Some(backup) = &status.last_backup {
        let _ = writeln!(
            out,
            "Last backup:         {} on {}: {:?}{}",
            backup.name,
            backup.site,
            backup.phase,
            backup
                .message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        );
    }
    if let Some(restore) = &status.restore {
        let _ = writeln!(
            out,
            "Restore:             {:?} {} from {} ({}), lost {} transaction(s){}",
            restore.phase,
            restore.site,
            restore.backup,
            restore.method.as_str(),
            restore.lost_transactions,
            restore
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        );
    }
}

/// The table of sites: role, reachable, writable, healthy, replicating, lag, last seen.
fn write_sites(out: &mut String, sites: &[SiteStatus]) {
    let _ = writeln!(
        out,
        "{:<10} {:<8} {:<9} {:<8} {:<8} {:<11} {:<6} LAST SEEN",
        "SITE", "ROLE", "REACHABLE", "WRITABLE", "HEALTHY", "REPLICATING", "LAG"
    );
    for site in sites {
        let yes_no = |value: bool| if value { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "{:<10} {:<8} {:<9} {:<8} {:<8} {:<11} {:<6} {}",
            site.name,
            site.role.as_deref().unwrap_or("-"),
            yes_no(site.reachable),
            yes_no(site.writable),
            yes_no(site.healthy),
            yes_no(site.replicating),
            site.seconds_behind_source
                .map(|lag| format!("{lag}s"))
                .unwrap_or_else(|| "-".into()),
            site.last_seen
                .map(|seen| seen.to_string())
                .unwrap_or_else(|| "-".into()),
        );
    }
}

/// Per fenced or rejoined returning primary: its errant set, and its rejoin (phase, archive,
/// the set the archive holds, what happened last).
fn write_returning_primaries(out: &mut String, sites: &[SiteStatus]) {
    for site in sites {
        if let Some(errant) = &site.errant_gtid_set {
            let _ = writeln!(out, "Errant on {}: {errant}", site.name);
        }
        let Some(rejoin) = &site.rejoin else {
            continue;
        };
        let _ = write!(out, "Rejoin of {}: {:?}", site.name, rejoin.phase);
        if let Some(archive) = &rejoin.archive {
            let _ = write!(
                out,
                ", archive {archive} ({})",
                rejoin.errant_gtid_set.as_deref().unwrap_or("-")
            );
        }
        if rejoin.automatic {
            let _ = write!(out, ", automatic");
        }
        if let Some(message) = &rejoin.message {
            let _ = write!(out, ": {message}");
        }
        let _ = writeln!(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::playground;

    #[test]
    fn status_shows_authority_sites_and_generation() {
        let mut group = playground();
        assert!(format_status(&group).contains("not yet observed"));
        group.status = Some(MysqlFailoverGroupStatus {
            active_site: Some("iad".into()),
            topology_generation: 17,
            authority: Some(bloodraven_api::AuthorityStatus {
                state: AuthorityState::Invalid,
                reason: Some("Moving".into()),
            }),
            sites: vec![SiteStatus {
                name: "pdx".into(),
                role: Some("replica".into()),
                reachable: true,
                seconds_behind_source: Some(3),
                ..SiteStatus::default()
            }],
            ..MysqlFailoverGroupStatus::default()
        });
        let text = format_status(&group);
        assert!(text.contains("Topology generation: 17"), "{text}");
        assert!(text.contains("Invalid (Moving)"), "{text}");
        assert!(
            text.lines()
                .any(|line| line.starts_with("pdx") && line.contains("3s")),
            "{text}"
        );
    }

    /// docs/design/operator.md#returning-primary: a returning primary's errant set and its
    /// rejoin (phase, archive, the set it holds) are shown.
    #[test]
    fn issue_35_status_shows_the_errant_set_and_the_rejoin() {
        let mut group = playground();
        let mut rejoin = bloodraven_api::RejoinStatus::requested(
            false,
            bloodraven_api::Timestamp::from_unix_millis(0),
            "archiving".into(),
        );
        rejoin.phase = bloodraven_api::RejoinPhase::Archiving;
        rejoin.archive = Some("rejoin-iad-1796000123".into());
        rejoin.errant_gtid_set = Some("0-1-11..13".into());
        group.status = Some(MysqlFailoverGroupStatus {
            active_site: Some("pdx".into()),
            sites: vec![SiteStatus {
                name: "iad".into(),
                role: Some("fenced".into()),
                errant_gtid_set: Some("0-1-11..13".into()),
                rejoin: Some(rejoin),
                ..SiteStatus::default()
            }],
            ..MysqlFailoverGroupStatus::default()
        });
        let text = format_status(&group);
        assert!(text.contains("Errant on iad: 0-1-11..13"), "{text}");
        assert!(
            text.contains(
                "Rejoin of iad: Archiving, archive rejoin-iad-1796000123 (0-1-11..13): archiving"
            ),
            "{text}"
        );
    }

    /// docs/design/history.md#issue-12: the ordered update's phase, current site and per-site
    /// image are shown.
    #[test]
    fn status_shows_the_ordered_update() {
        let mut group = playground();
        group.status = Some(MysqlFailoverGroupStatus {
            active_site: Some("iad".into()),
            topology_generation: 2,
            ordered_update: Some(bloodraven_api::OrderedUpdateStatus {
                phase: bloodraven_api::OrderedUpdatePhase::RollingReplica,
                target_image: "mariadb:10.11.9".into(),
                current_site: Some("reader".into()),
                failover_from: None,
                failover_target: None,
                admission: bloodraven_api::Admission::default(),
                message: Some("waiting for reader".into()),
                started_at: None,
                step_since: None,
                sites: vec![bloodraven_api::OrderedUpdateSite {
                    name: "pdx".into(),
                    image: Some("mariadb:10.11.9".into()),
                    updated: true,
                }],
            }),
            ..MysqlFailoverGroupStatus::default()
        });
        let text = format_status(&group);
        assert!(
            text.contains("Ordered update:      RollingReplica -> mariadb:10.11.9 (site reader)"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|line| line.contains("pdx") && line.ends_with("mariadb:10.11.9 (updated)")),
            "{text}"
        );
    }
}
