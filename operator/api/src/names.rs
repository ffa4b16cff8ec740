//! Every label, annotation, port and object name Bloodraven uses
//! (docs/design/architecture.md#names).
//!
//! Object names are functions of the group and site so nothing formats them twice.

/// CRD API group.
pub const GROUP: &str = "bloodraven.shipstream.io";
/// CRD API version.
pub const VERSION: &str = "v1";
/// Field manager for every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "bloodraven";

/// Pod label naming the group (`app.kubernetes.io/instance=<group>`).
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// Pod label naming the site (`shipstream.io/site=<site>`).
pub const LABEL_SITE: &str = "shipstream.io/site";
/// Pod label carrying the role: `primary`, `replica` or `fenced`.
pub const LABEL_ROLE: &str = "shipstream.io/role";
/// Pod label carrying health: `yes` or `no`.
pub const LABEL_HEALTHY: &str = "shipstream.io/healthy";
/// Value of [`LABEL_ROLE`] on the writable active site's pod.
pub const ROLE_PRIMARY: &str = "primary";
/// Value of [`LABEL_ROLE`] on serving non-active sites' pods.
pub const ROLE_REPLICA: &str = "replica";
/// Value of [`LABEL_ROLE`] on a pod fenced by planned failover or in-place restore.
pub const ROLE_FENCED: &str = "fenced";
/// Value of [`LABEL_HEALTHY`] for a healthy pod.
pub const HEALTHY_YES: &str = "yes";
/// Value of [`LABEL_HEALTHY`] for an unhealthy pod.
pub const HEALTHY_NO: &str = "no";

/// Annotation requesting a planned failover to the named site.
pub const ANNOTATION_PLANNED_FAILOVER: &str = "bloodraven.shipstream.io/planned-failover";
/// Annotation revoking every deployment lease of the group.
pub const ANNOTATION_REVOKE_DEPLOYMENT_LEASES: &str =
    "bloodraven.shipstream.io/revoke-deployment-leases";
/// Annotation holding the second persisted copy of the anti-flap cooldown end.
pub const ANNOTATION_COOLDOWN_UNTIL: &str = "bloodraven.shipstream.io/cooldown-until";
/// Annotation recording the last failover (kind, from, to, time).
pub const ANNOTATION_LAST_FAILOVER: &str = "bloodraven.shipstream.io/last-failover";
/// Annotation requesting a named backup of the active site (value: the backup's name).
pub const ANNOTATION_BACKUP: &str = "bloodraven.shipstream.io/backup";
/// Annotation requesting a restore in place of the active site (value: the backup's name).
pub const ANNOTATION_RESTORE: &str = "bloodraven.shipstream.io/restore";
/// Annotation requesting the rejoin of a fenced returning primary (value: the site): its
/// errant transactions archived, then re-seeded from the active site.
pub const ANNOTATION_REJOIN: &str = "bloodraven.shipstream.io/rejoin";

/// Key of the NoExecute taint put on a demoted read-write site's node.
pub const TAINT_DEMOTED: &str = "bloodraven.shipstream.io/demoted";
/// Effect of the demotion taint.
pub const TAINT_EFFECT: &str = "NoExecute";

/// MySQL port.
pub const PORT_MYSQL: u16 = 3306;
/// Sidecar HTTP port.
pub const PORT_SIDECAR: u16 = 8086;
/// Operator plain HTTP port: /metrics, /healthz, /readyz.
pub const PORT_OPERATOR_HTTP: u16 = 8082;
/// Operator TLS port: /deploy/v1.
pub const PORT_OPERATOR_TLS: u16 = 8443;
/// Name of the MySQL port on Services and containers.
pub const PORT_NAME_MYSQL: &str = "mysql";
/// Name of the sidecar port on Services and containers.
pub const PORT_NAME_SIDECAR: &str = "sidecar";

/// Namespace of the operator.
pub const OPERATOR_NAMESPACE: &str = "bloodraven";
/// Name of the operator Deployment (and its ServiceAccount).
pub const OPERATOR_DEPLOYMENT: &str = "bloodraven";
/// Name of the operator's leader-election Lease.
pub const LEADER_LEASE: &str = "bloodraven-leader";

/// A leader-election identity: the pod name, `_`, and a nonce drawn once per process (as
/// client-go's controllers do). A restarted container keeps its pod name but is a new
/// candidate: it does not inherit the lease its previous process held, and must wait for it
/// to expire like any standby.
pub fn leader_identity(pod: &str, nonce: u64) -> String {
    format!("{pod}_{nonce:016x}")
}

/// The pod of a leader-election identity (the part before the first `_`: pod names cannot
/// contain one). An identity without a nonce is its own pod name.
pub fn leader_pod(identity: &str) -> &str {
    identity.split_once('_').map_or(identity, |(pod, _)| pod)
}
/// Audience a deployment client's token must carry.
pub const DEPLOY_AUDIENCE: &str = "bloodraven-deploy";
/// Namespace of the playground group.
pub const PLAYGROUND_NAMESPACE: &str = "bloodraven-playground";
/// Name of the playground group.
pub const PLAYGROUND_GROUP: &str = "playground";

/// StatefulSet of one site: `mysql-<group>-<site>`.
pub fn statefulset(group: &str, site: &str) -> String {
    format!("mysql-{group}-{site}")
}

/// The single pod of a site: `mysql-<group>-<site>-0`.
pub fn pod(group: &str, site: &str) -> String {
    format!("mysql-{group}-{site}-0")
}

/// Internal per-site Service (MySQL + sidecar, publishNotReadyAddresses, canonical
/// replication source host): `mysql-<group>-<site>`.
pub fn site_service(group: &str, site: &str) -> String {
    format!("mysql-{group}-{site}")
}

/// Headless governing Service of a site's StatefulSet: `mysql-<group>-<site>-hl`.
pub fn headless_service(group: &str, site: &str) -> String {
    format!("mysql-{group}-{site}-hl")
}

/// Shared write Service: `mysql-<group>-primary`.
pub fn primary_service(group: &str) -> String {
    format!("mysql-{group}-primary")
}

/// Shared read Service: `mysql-<group>-replicas`.
pub fn replicas_service(group: &str) -> String {
    format!("mysql-{group}-replicas")
}

/// The DNSEndpoint of a group: `bloodraven-<group>`.
pub fn dns_endpoint(group: &str) -> String {
    format!("bloodraven-{group}")
}

/// The canonical replication source host of a site: its internal Service's cluster name.
pub fn source_host(group: &str, site: &str, namespace: &str) -> String {
    format!(
        "{}.{namespace}.svc.cluster.local",
        site_service(group, site)
    )
}

/// The archive a rejoin of `site` writes before it re-seeds it: `rejoin-<site>-<rejoin id>`
/// (a directory under `archives/` on the site's backups volume).
pub fn rejoin_archive(site: &str, rejoin_id: u64) -> String {
    format!("rejoin-{site}-{rejoin_id}")
}

/// Deployment-lease Lease object: `bloodraven-deploy-<group>-<kind>`.
pub fn deploy_lease(group: &str, kind: &str) -> String {
    format!("bloodraven-deploy-{group}-{kind}")
}

/// ConfigMap holding a group's deployment-lease tombstones.
pub fn deploy_tombstones(group: &str) -> String {
    format!("bloodraven-deploy-{group}-tombstones")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_leader_identity_names_its_pod_and_differs_per_process() {
        let first = super::leader_identity("bloodraven-dc599448-g5xvb", 1);
        let restarted = super::leader_identity("bloodraven-dc599448-g5xvb", 2);
        assert_ne!(first, restarted);
        assert_eq!(super::leader_pod(&first), "bloodraven-dc599448-g5xvb");
        assert_eq!(super::leader_pod(&restarted), "bloodraven-dc599448-g5xvb");
        assert_eq!(super::leader_pod("bloodraven-local"), "bloodraven-local");
    }

    use super::*;

    #[test]
    fn architecture_names_for_the_playground() {
        assert_eq!(statefulset("playground", "iad"), "mysql-playground-iad");
        assert_eq!(pod("playground", "iad"), "mysql-playground-iad-0");
        assert_eq!(site_service("playground", "pdx"), "mysql-playground-pdx");
        assert_eq!(
            headless_service("playground", "pdx"),
            "mysql-playground-pdx-hl"
        );
        assert_eq!(primary_service("playground"), "mysql-playground-primary");
        assert_eq!(replicas_service("playground"), "mysql-playground-replicas");
        assert_eq!(dns_endpoint("playground"), "bloodraven-playground");
        assert_eq!(
            source_host("playground", "iad", PLAYGROUND_NAMESPACE),
            "mysql-playground-iad.bloodraven-playground.svc.cluster.local"
        );
        assert_eq!(
            deploy_lease("playground", "migration"),
            "bloodraven-deploy-playground-migration"
        );
    }
}
