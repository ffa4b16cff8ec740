//! kubectl-bloodraven: `kubectl bloodraven promote|status|revoke-leases`.
//!
//! The plugin only writes resources the operator already reads (seed 001): `promote` sets the
//! `bloodraven.shipstream.io/planned-failover` annotation and returns; `revoke-leases` sets
//! `bloodraven.shipstream.io/revoke-deployment-leases`. It never talks to MySQL and needs a
//! live operator to act on either. `status` reads the group.

use std::fmt::Write as _;

use bloodraven_api::{names, AuthorityState, MysqlFailoverGroup, SiteRole, Timestamp};
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
}

/// The plugin's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Flags of `kubectl bloodraven`.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "kubectl-bloodraven",
    about = "Bloodraven failover groups: promote, status, revoke-leases"
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
    match &cli.command {
        Command::Promote { group, site } => {
            let found = get(group.clone()).await?;
            check_promote_target(&found, site)?;
            api.patch(
                group,
                &PatchParams::default(),
                &Patch::Merge(promote_patch(site)),
            )
            .await
            .map_err(|source| Error::Kube {
                action: format!("annotate mysqlfailovergroup {namespace}/{group}"),
                source,
            })?;
            Ok(format!(
                "planned failover of {namespace}/{group} to {site} requested ({}={site}); the operator admits it (cooldown, deployment holds) — watch `kubectl bloodraven status {group} -n {namespace}`\n",
                names::ANNOTATION_PLANNED_FAILOVER
            ))
        }
        Command::Status { group } => Ok(format_status(&get(group.clone()).await?)),
        Command::RevokeLeases { group } => {
            get(group.clone()).await?;
            let now = Timestamp::from_unix_millis(jiff::Timestamp::now().as_millisecond());
            api.patch(
                group,
                &PatchParams::default(),
                &Patch::Merge(revoke_patch(now)),
            )
            .await
            .map_err(|source| Error::Kube {
                action: format!("annotate mysqlfailovergroup {namespace}/{group}"),
                source,
            })?;
            Ok(format!(
                "every deployment lease of {namespace}/{group} will be revoked by the operator (OperatorRevoked)\n"
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
}
