//! kubectl-bloodraven: `kubectl bloodraven promote|status|revoke-leases|backup|restore`.
//!
//! The plugin only writes resources the operator already reads (seed 001): `promote` sets the
//! `bloodraven.shipstream.io/planned-failover` annotation and returns; `revoke-leases` sets
//! `bloodraven.shipstream.io/revoke-deployment-leases`. It never talks to MySQL and needs a
//! live operator to act on either. `backup` sets `bloodraven.shipstream.io/backup=<name>` (the
//! operator asks the active site's sidecar for it) and `restore --from <backup>` sets
//! `bloodraven.shipstream.io/restore=<backup>` (restore in place of the active site from the
//! backup's logical dump; `--method physical` sets `<backup>,method=physical`: from its
//! `mariadb-backup` copy). `status` reads the group.

use std::fmt::Write as _;

use bloodraven_api::{
    names, AuthorityState, MysqlFailoverGroup, RestoreMethod, RestoreSource, SiteRole, Timestamp,
};
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::{json, Value};

/// Errors of the plugin; messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Loading the kubeconfig or building the client failed.
    #[error("load kubeconfig: {0}")]
    Config(String),
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The requested promotion cannot be asked for.
    #[error("request promotion: {0}")]
    InvalidTarget(String),
    /// The backup name cannot be used.
    #[error("request a backup or restore: {0}")]
    InvalidBackup(String),
}

/// The plugin's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Flags of `kubectl bloodraven`.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "kubectl-bloodraven",
    about = "Bloodraven failover groups: promote, status, revoke-leases, backup, restore"
)]
pub struct Cli {
    /// Namespace of the group (default: the kubeconfig context's namespace).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Command {
    /// Request a planned failover to SITE (writes the planned-failover annotation and returns).
    Promote {
        /// The MysqlFailoverGroup.
        group: String,
        /// The read-write site to promote.
        site: String,
    },
    /// Show the group's authority, sites and failovers.
    Status {
        /// The MysqlFailoverGroup.
        group: String,
    },
    /// Revoke every deployment lease of the group (writes the revoke annotation).
    RevokeLeases {
        /// The MysqlFailoverGroup.
        group: String,
    },
    /// Take a named backup of the active site on its volume (writes the backup annotation;
    /// the operator asks the site's sidecar; `status` shows it as "Last backup").
    Backup {
        /// The MysqlFailoverGroup.
        group: String,
        /// The backup's name (lowercase letters, digits, '-'); default `<group>-<UTC time>`.
        #[arg(long)]
        name: Option<String>,
    },
    /// Restore the active site in place from a named backup (writes the restore annotation):
    /// fenced, restored, re-promoted; transactions after the backup are discarded.
    Restore {
        /// The MysqlFailoverGroup.
        group: String,
        /// The backup to restore from (on the active site's volume).
        #[arg(long = "from")]
        from: String,
        /// How: `logical` loads the backup's dump into the running mysqld; `physical` stops
        /// mysqld and replaces its data directory with the backup's `mariadb-backup` copy (the
        /// operator refuses it, saying so, for a backup without one).
        #[arg(long, value_parser = ["logical", "physical"], default_value = "logical")]
        method: String,
    },
}

/// The merge patch `backup` writes: only the backup annotation.
pub fn backup_patch(name: &str) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_BACKUP: name}}})
}

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

/// The default backup name: `<group>-<YYYYMMDD-HHMMSS>` (UTC).
pub fn default_backup_name(group: &str, now: jiff::Timestamp) -> String {
    format!("{group}-{}", now.strftime("%Y%m%d-%H%M%S"))
}

fn checked_backup_name(name: &str) -> Result<()> {
    match bloodraven_api::sidecar::backup_name_problem(name) {
        Some(problem) => Err(Error::InvalidBackup(problem)),
        None => Ok(()),
    }
}

/// The merge patch `promote` writes: only the planned-failover annotation.
pub fn promote_patch(site: &str) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_PLANNED_FAILOVER: site}}})
}

/// The merge patch `revoke-leases` writes: the revoke annotation, valued with the request
/// time (any value revokes; the operator removes it once done).
pub fn revoke_patch(now: Timestamp) -> Value {
    json!({"metadata": {"annotations": {names::ANNOTATION_REVOKE_DEPLOYMENT_LEASES: now.to_string()}}})
}

/// Checks that `site` is a read-write site of the group (read-only sites are never writable)
/// before asking; the operator's admission (cooldown, holds) still decides.
pub fn check_promote_target(group: &MysqlFailoverGroup, site: &str) -> Result<()> {
    match group.spec.site(site) {
        None => Err(Error::InvalidTarget(format!(
            "{site:?} is not a site of {} (sites: {})",
            group.metadata.name.as_deref().unwrap_or(""),
            group
                .spec
                .sites
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Some(spec) if spec.role == SiteRole::ReadOnly => Err(Error::InvalidTarget(format!(
            "{site:?} is a read-only site and can never be promoted"
        ))),
        Some(_) => Ok(()),
    }
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
    if let Some(planned) = &status.planned_failover {
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
    if let Some(update) = &status.ordered_update {
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
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<10} {:<8} {:<9} {:<8} {:<8} {:<11} {:<6} LAST SEEN",
        "SITE", "ROLE", "REACHABLE", "WRITABLE", "HEALTHY", "REPLICATING", "LAG"
    );
    for site in &status.sites {
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
    out
}

/// A client from the usual places (KUBECONFIG, ~/.kube/config, in-cluster), for `context`.
pub async fn client(context: Option<&str>) -> Result<Client> {
    let config = match context {
        None => Config::infer()
            .await
            .map_err(|error| Error::Config(error.to_string()))?,
        Some(context) => {
            let kubeconfig =
                Kubeconfig::read().map_err(|error| Error::Config(error.to_string()))?;
            let options = KubeConfigOptions {
                context: Some(context.to_string()),
                ..KubeConfigOptions::default()
            };
            Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|error| Error::Config(error.to_string()))?
        }
    };
    Client::try_from(config).map_err(|error| Error::Config(error.to_string()))
}

/// Runs `cli` against `client`; returns what to print.
pub async fn run(cli: &Cli, client: Client) -> Result<String> {
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let api: Api<MysqlFailoverGroup> = Api::namespaced(client, &namespace);
    let get = |group: String| {
        let api = api.clone();
        let namespace = namespace.clone();
        async move {
            api.get(&group).await.map_err(|source| Error::Kube {
                action: format!("get mysqlfailovergroup {namespace}/{group}"),
                source,
            })
        }
    };
    let annotate = |group: String, patch: Value| {
        let api = api.clone();
        let namespace = namespace.clone();
        async move {
            api.patch(&group, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(drop)
                .map_err(|source| Error::Kube {
                    action: format!("annotate mysqlfailovergroup {namespace}/{group}"),
                    source,
                })
        }
    };
    match &cli.command {
        Command::Promote { group, site } => {
            let found = get(group.clone()).await?;
            check_promote_target(&found, site)?;
            annotate(group.clone(), promote_patch(site)).await?;
            Ok(format!(
                "planned failover of {namespace}/{group} to {site} requested ({}={site}); the operator admits it (cooldown, deployment holds) — watch `kubectl bloodraven status {group} -n {namespace}`\n",
                names::ANNOTATION_PLANNED_FAILOVER
            ))
        }
        Command::Status { group } => Ok(format_status(&get(group.clone()).await?)),
        Command::RevokeLeases { group } => {
            get(group.clone()).await?;
            let now = Timestamp::from_unix_millis(jiff::Timestamp::now().as_millisecond());
            annotate(group.clone(), revoke_patch(now)).await?;
            Ok(format!(
                "every deployment lease of {namespace}/{group} will be revoked by the operator (OperatorRevoked)\n"
            ))
        }
        Command::Backup { group, name } => {
            let name = name
                .clone()
                .unwrap_or_else(|| default_backup_name(group, jiff::Timestamp::now()));
            checked_backup_name(&name)?;
            get(group.clone()).await?;
            annotate(group.clone(), backup_patch(&name)).await?;
            Ok(format!(
                "backup {name} of {namespace}/{group}'s active site requested ({}={name}) — watch `kubectl bloodraven status {group} -n {namespace}`\n",
                names::ANNOTATION_BACKUP
            ))
        }
        Command::Restore {
            group,
            from,
            method,
        } => {
            checked_backup_name(from)?;
            let method: RestoreMethod = method.parse().map_err(Error::InvalidBackup)?;
            get(group.clone()).await?;
            let patch = restore_patch(from, method);
            annotate(group.clone(), patch.clone()).await?;
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
    }
}

#[cfg(test)]
mod tests {
    use bloodraven_api::{MysqlFailoverGroupSpec, MysqlFailoverGroupStatus, SiteStatus};

    use super::*;

    fn playground() -> MysqlFailoverGroup {
        let spec: MysqlFailoverGroupSpec = serde_yaml::from_str(
            "image: mariadb:10.11\nsites:\n- {name: iad, role: read-write}\n- {name: pdx, role: read-write}\n- {name: reader, role: read-only}\ninitialActiveSite: iad\n",
        )
        .expect("playground spec");
        let mut group = MysqlFailoverGroup::new("playground", spec);
        group.metadata.namespace = Some("bloodraven-playground".into());
        group
    }

    /// Seed 001: `promote` writes only the planned-failover annotation (nothing else).
    #[test]
    fn seed_001_promote_writes_only_the_planned_failover_annotation() {
        assert_eq!(
            promote_patch("pdx"),
            json!({"metadata": {"annotations": {"bloodraven.shipstream.io/planned-failover": "pdx"}}})
        );
    }

    /// Seed 003: revoking by hand is the revoke-deployment-leases annotation.
    #[test]
    fn seed_003_revoke_leases_writes_the_revoke_annotation() {
        let patch = revoke_patch(Timestamp::from_unix_millis(0));
        let annotations = patch["metadata"]["annotations"]
            .as_object()
            .expect("annotations");
        assert_eq!(annotations.len(), 1);
        assert_eq!(
            annotations["bloodraven.shipstream.io/revoke-deployment-leases"],
            "1970-01-01T00:00:00.000Z"
        );
    }

    /// Issue 12: `backup` and `restore` write only their annotation; names are checked.
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

    /// bloodraven.md: a read-only site is never writable, so it is never a promotion target.
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

    /// Issue 12: the ordered update's phase, current site and per-site image are shown.
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
