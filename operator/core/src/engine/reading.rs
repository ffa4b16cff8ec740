//! One site's sidecar answer, parsed once per poll into what the rules read.

use std::collections::BTreeMap;

use bloodraven_api::sidecar::{Authority, LeaseTerms, ReplicationState};
use bloodraven_mysql::GtidSet;

use super::observation::{Observation, SidecarReading, SiteObservation};
use crate::time::{Duration, Timestamp};

/// What the rules read of one site this poll.
#[derive(Clone, Debug, Default)]
pub(super) struct SiteView {
    /// The sidecar answered.
    pub sidecar_up: bool,
    /// The sidecar reached mysqld.
    pub mysql_up: bool,
    /// The sidecar found mysqld definitely not running (connection refused); an unreachable
    /// mysqld that is not `down` is unknown, not proof of anything.
    pub mysql_down: bool,
    /// `read_only` as read; `None` when unknown.
    pub read_only: Option<bool>,
    /// The GTID executed set, parsed; `None` when unknown or unparsable.
    pub gtid: Option<GtidSet>,
    /// Why the GTID text did not parse.
    pub gtid_error: Option<String>,
    /// Replication as read.
    pub replication: Option<ReplicationState>,
    /// The sidecar holds MySQL fenced.
    pub fenced: bool,
    /// The sidecar holds an unexpired write lease.
    pub lease_held: bool,
    /// The sidecar's cached authority.
    pub authority: Option<Authority>,
    /// The greatest generation the sidecar knows was issued (its cached one, or a greater one
    /// a peer named).
    pub known_generation: Option<u64>,
    /// The authority of the greatest generation the sidecar accepted, also after it forgot it.
    pub latest_authority: Option<Authority>,
    /// Per site, how long ago this sidecar last granted it a lease.
    pub last_granted_ago: BTreeMap<String, Duration>,
    /// Start of the mysqld run observed.
    pub mysqld_started_at: Option<Timestamp>,
    /// The pod's node.
    pub node_name: Option<String>,
    /// The internal Service's ClusterIP.
    pub service_cluster_ip: Option<String>,
    /// How long the sidecar process has been up, when known: as the sidecar reports it, else
    /// from the pod status (which lags a container restart).
    pub sidecar_uptime: Option<Duration>,
    /// The lease terms the sidecar reports it runs with.
    pub reported_lease_terms: Option<LeaseTerms>,
    /// The lease terms in the site pod's sidecar flags.
    pub pod_lease_terms: Option<LeaseTerms>,
}

impl SiteView {
    /// Sidecar and MySQL answered: the poll did not fail for this site.
    pub fn is_up(&self) -> bool {
        self.sidecar_up && self.mysql_up
    }

    /// MySQL was read writable.
    pub fn is_writable(&self) -> bool {
        self.is_up() && self.read_only == Some(false)
    }

    /// MySQL was read read-only, or is definitely down (refused), as reported by a reachable
    /// sidecar. Any other failure to read it (a timeout of a frozen mysqld, access denied, a
    /// query or decode error) proves nothing: mysqld may be alive and writable.
    pub fn confirmed_not_writable(&self) -> bool {
        self.sidecar_up && (self.mysql_down || (self.mysql_up && self.read_only == Some(true)))
    }

    /// Replication is configured and both threads run.
    pub fn replicating(&self) -> bool {
        self.replication.as_ref().is_some_and(|r| r.running)
    }

    /// No replication is configured (the `Promote` detachment happened).
    pub fn detached(&self) -> bool {
        self.is_up() && self.replication.is_none()
    }
}

/// Parses every site of the observation; sites missing from it read as unreachable.
pub(super) fn read_sites(
    observation: &Observation,
    site_names: &[String],
    flavor: bloodraven_mysql::Flavor,
) -> BTreeMap<String, SiteView> {
    site_names
        .iter()
        .map(|name| {
            let view = observation
                .sites
                .iter()
                .find(|site| &site.site == name)
                .map(|site| read_site(site, &observation.group, flavor))
                .unwrap_or_default();
            (name.clone(), view)
        })
        .collect()
}

fn read_site(site: &SiteObservation, group: &str, flavor: bloodraven_mysql::Flavor) -> SiteView {
    let mut view = SiteView {
        node_name: site.node_name.clone(),
        service_cluster_ip: site.service_cluster_ip.clone(),
        sidecar_uptime: site.sidecar_uptime,
        pod_lease_terms: site.pod_lease_terms.clone(),
        ..SiteView::default()
    };
    let status = match &site.sidecar {
        SidecarReading::Unreachable { .. } => return view,
        SidecarReading::Reachable(status) => status,
    };
    view.sidecar_up = true;
    if let Some(runtime) = &status.runtime {
        // The sidecar's own clock: a container restart shows at once, unlike the pod status.
        view.sidecar_uptime = Some(Duration::from_millis(runtime.uptime_ms));
        view.reported_lease_terms = Some(runtime.lease.clone());
    }
    view.mysql_up = status.mysql.reachable;
    view.mysql_down = !status.mysql.reachable && status.mysql.down;
    view.fenced = status.fenced;
    view.lease_held = status.lease.held;
    // An authority of another group is no authority of ours.
    view.authority = status
        .authority
        .clone()
        .filter(|authority| authority.group == group);
    view.known_generation = status.known_generation;
    view.latest_authority = status
        .latest_authority
        .clone()
        .filter(|authority| authority.group == group);
    view.last_granted_ago = status
        .last_granted_ago_ms
        .iter()
        .map(|(name, ms)| (name.clone(), Duration::from_millis(*ms)))
        .collect();
    if view.mysql_up {
        view.read_only = status.mysql.read_only;
        view.replication = status.mysql.replication.clone();
        view.mysqld_started_at = status.mysql.mysqld.as_ref().map(|run| run.started_at);
        if let Some(text) = &status.mysql.gtid_executed {
            match GtidSet::parse(flavor, text) {
                Ok(set) => view.gtid = Some(set),
                Err(error) => view.gtid_error = Some(error.to_string()),
            }
        }
    }
    view
}

/// The GTID flavor of a spec flavor.
pub(super) fn mysql_flavor(flavor: bloodraven_api::Flavor) -> bloodraven_mysql::Flavor {
    match flavor {
        bloodraven_api::Flavor::Mariadb => bloodraven_mysql::Flavor::MariaDb,
        bloodraven_api::Flavor::Mysql => bloodraven_mysql::Flavor::MySql,
    }
}
