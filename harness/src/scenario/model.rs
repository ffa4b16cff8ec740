//! The typed scenario model: what a `scenarios/NNN-slug.yaml` file may say.
//!
//! Everything that serde can check (unknown step kinds and fields, bad durations, unknown
//! sites) is checked while parsing, so the error carries serde_yaml's line and column and
//! the field path. Rules across fields and steps live in [`crate::scenario::validate`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::span::Span;

/// One site of the playground group (docs/design/operator.md#mysqlfailovergroup: iad and pdx
/// read-write, reader read-only).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Site {
    /// Read-write site, the initial active site.
    Iad,
    /// Read-write site, the failover target.
    Pdx,
    /// Read-only site.
    Reader,
}

impl Site {
    /// Every site of the playground group, in declaration order.
    pub const ALL: [Site; 3] = [Site::Iad, Site::Pdx, Site::Reader];

    /// The site's name as the group spec spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Site::Iad => "iad",
            Site::Pdx => "pdx",
            Site::Reader => "reader",
        }
    }

    /// Parses a site name.
    pub fn from_name(name: &str) -> Option<Self> {
        Site::ALL.into_iter().find(|site| site.name() == name)
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A container of a site pod.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Container {
    /// mysqld.
    Mysql,
    /// The Bloodraven sidecar beside mysqld.
    Sidecar,
}

/// Something a scenario may need that only some backends (or fault drivers) can do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// Stepping one container's wall clock (`clock-offset`): libfaketime preloaded when the
    /// container starts, which localkube's runtime does and a cluster's own runtime does not.
    ClockOffset,
    /// Stopping and starting a node (`stop-node`, `start-node`): localkube's fault socket,
    /// kind's `docker stop`, or the in-cluster fault agent (it stops the node's kubelet and
    /// kills its pods' processes).
    StopNode,
}

impl Capability {
    /// The name as a scenario file spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Capability::ClockOffset => "clock-offset",
            Capability::StopNode => "stop-node",
        }
    }
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// The catalogue id; equals the `NNN` of the file name.
    pub id: u16,
    /// One line: what the scenario proves.
    pub title: String,
    /// The source of the rule: `<source file>: <where in it>`, the source file being one of the
    /// original requirement or design files by the names docs/design/requirements.md and
    /// docs/scenarios.md list.
    pub seed: String,
    /// What the scenario needs that not every backend has ([`Capability`]). A step that
    /// needs a capability is refused unless it is declared here; on a backend without it the
    /// scenario is reported SKIPPED with the reason (never passed, never left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Capability>,
    /// How the run installs the operator and the group before the steps.
    #[serde(default)]
    pub install: Install,
    /// The steps, in order.
    #[serde(deserialize_with = "super::single_key::vec")]
    pub steps: Vec<Step>,
}

/// Install-time settings that differ from the playground defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Install {
    /// The operator chart's `replicaCount` (default 1, leader election always on).
    #[serde(default)]
    pub replica_count: Option<u32>,
    /// `auxiliary.deployAPI.enabled` (and with it `auxiliary.escrowTLS.enabled`).
    #[serde(default)]
    pub deploy_api: bool,
    /// Fields merged into the playground group's `spec` before it is applied.
    #[serde(default)]
    pub group_spec: Option<Value>,
    /// The operator image to install instead of this build's `bloodraven:<version>`
    /// (scenario 050 installs `bloodraven:upgrade-a`: build A under `just upgrade`, this build
    /// otherwise; with `--upgrade-from-image` the run replaces it with that reference).
    #[serde(default)]
    pub operator_image: Option<String>,
}

/// One step of a scenario (a one-key map in the file, see [`super::single_key`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Server-side apply a fixture file or an inline object.
    Apply(Apply),
    /// Inject a fault (or perform an outside action such as an annotation).
    Fault(#[serde(deserialize_with = "super::single_key::one")] Fault),
    /// Undo faults: `all`, or every active fault of one kind.
    Heal(HealTarget),
    /// Assert something about the cluster: becomes true `within`, or stays true `for`.
    Expect(Box<Expect>),
    /// Record a measured duration, optionally bounded.
    Measure(Measure),
    /// Wait.
    Sleep(Span),
}

impl Step {
    /// The step kind as the file spells it.
    pub const fn kind(&self) -> &'static str {
        match self {
            Step::Apply(_) => "apply",
            Step::Fault(_) => "fault",
            Step::Heal(_) => "heal",
            Step::Expect(_) => "expect",
            Step::Measure(_) => "measure",
            Step::Sleep(_) => "sleep",
        }
    }
}

/// A server-side apply: exactly one of `fixture` and `object`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Apply {
    /// A manifest path relative to the repository root, under `fixtures/`.
    #[serde(default)]
    pub fixture: Option<String>,
    /// An inline manifest (apiVersion, kind, metadata.name required).
    #[serde(default)]
    pub object: Option<Value>,
    /// The SSA field manager (default `bloodraven-harness`); `force` is always set.
    #[serde(default)]
    pub field_manager: Option<String>,
}

/// Which operator pod a fault targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OperatorPod {
    /// The replica holding the `bloodraven-leader` Lease.
    Leader,
    /// Any replica not holding it.
    Standby,
}

/// The RBAC subject a `deny-rbac` fault removes verbs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Subject {
    /// The operator's ServiceAccount (the only subject with API access: the sidecar has none,
    /// so there is no sidecar subject to deny verbs to).
    Operator,
}

/// A Kubernetes API verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// get
    Get,
    /// list
    List,
    /// watch
    Watch,
    /// create
    Create,
    /// update
    Update,
    /// patch (server-side apply is a patch)
    Patch,
    /// delete
    Delete,
}

/// A site pod's container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerRef {
    /// The site.
    pub site: Site,
    /// The container.
    pub container: Container,
}

/// The target of a `kill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KillTarget {
    /// The site.
    pub site: Site,
    /// The container.
    pub container: Container,
    /// Keep it from restarting until `heal` (default: let it restart).
    #[serde(default)]
    pub keep_down: bool,
}

/// A site, on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SiteRef {
    /// The site.
    pub site: Site,
}

/// The wall clock of a site's mysqld stepped (`clock-offset`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClockOffsetTarget {
    /// The site whose `mysql` container's wall clock is stepped.
    pub site: Site,
    /// The offset from the real clock, signed: `+20s`, `-20s`, `-1500ms`. Not cumulative: a
    /// second `clock-offset` on the same site replaces the first.
    #[schemars(regex(pattern = super::span::OFFSET_PATTERN))]
    pub offset: String,
}

/// A network partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Partition {
    /// Cut these sites' pods off from every other site's pods and from the operator.
    Sites(Vec<Site>),
    /// Cut the nodes of these sites off from every other node and from the API server.
    Nodes(Vec<Site>),
    /// Cut these sites' pods off from the other sites' pods only: the operator and the
    /// applications still reach them (docs/design/requirements.md R000.20: a primary that loses
    /// its peers fences itself while its clients stay connected to it).
    Peers(Vec<Site>),
}

/// The object an `annotate` fault writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AnnotatedObject {
    /// The playground MysqlFailoverGroup.
    #[default]
    Group,
}

/// Faults and outside actions. Each variant is one map key in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// SIGKILL a container's processes. The kubelet restarts it, unless `keepDown`, which
    /// keeps it from restarting until healed (a primary that stays dead).
    Kill(KillTarget),
    /// SIGKILL an operator pod's process (leader or a standby).
    KillOperator {
        /// Which replica.
        pod: OperatorPod,
    },
    /// SIGSTOP a container; healed by `thaw` or `heal`.
    Freeze(ContainerRef),
    /// SIGCONT a frozen container.
    Thaw(ContainerRef),
    /// Delete a site's pod (the StatefulSet recreates it).
    DeletePod(SiteRef),
    /// Stop a site's node (its kubelet and pods stop; the node goes NotReady).
    StopNode(SiteRef),
    /// Start a stopped node again.
    StartNode(SiteRef),
    /// Cut the network.
    Partition(#[serde(deserialize_with = "super::single_key::one")] Partition),
    /// Remove verbs on a resource from a subject's RBAC.
    DenyRbac {
        /// Whose permissions.
        subject: Subject,
        /// Resource plural, e.g. `dnsendpoints`.
        resource: String,
        /// The verbs to deny.
        verbs: Vec<Verb>,
    },
    /// Scale the operator Deployment; healed back to the installed replica count.
    ScaleOperator {
        /// The new replica count.
        replicas: u32,
    },
    /// Stop the external-dns controller (DNS answers stop following the DNSEndpoint).
    StopExternalDns,
    /// Set (or with `value: null` remove) an annotation on the group.
    Annotate {
        /// The object (the group).
        #[serde(default)]
        object: AnnotatedObject,
        /// Annotation key.
        key: String,
        /// Annotation value; null removes it.
        value: Option<String>,
    },
    /// `SET GLOBAL read_only` on a site's mysqld directly, behind the operator's back
    /// (one-shot: the sidecar and operator are expected to react, nothing restores it).
    SetReadOnly {
        /// The site.
        site: Site,
        /// The value to set.
        value: bool,
    },
    /// Delay replication on a site (`MASTER_DELAY`), so its lag grows; healed to zero.
    ReplicationDelay {
        /// The site.
        site: Site,
        /// The delay.
        delay: Span,
    },
    /// Run SQL as root on a site's mysqld, behind the operator's and the sidecar's back (a
    /// stopped replication thread, an errant write, a hand-made `CHANGE MASTER`). With `heal`,
    /// that SQL undoes it when healed; without, it is one-shot.
    Sql {
        /// The site.
        site: Site,
        /// The statements, `;`-separated, run in one session.
        statements: String,
        /// The statements that undo it on `heal` (the fault is then healable as `sql`).
        #[serde(default)]
        heal: Option<String>,
    },
    /// Seal the RPO now (docs/design/requirements.md R001.8: RPO is fixed at the instant the
    /// primary died): read the workload ids present on these surviving sites and record them; the
    /// rpo checker then demands that the writes lost after heal be exactly the acknowledged writes,
    /// invoked before the seal, that none of these sites held. Take it after the primary died and
    /// the survivors applied what they had received, before anyone promotes.
    SealRpo {
        /// The sites that survive the primary (they hold every write that can still be saved).
        sites: Vec<Site>,
    },
    /// Open and keep a named MySQL connection through a shared Service.
    OpenConnection {
        /// The name `expect: {connection: ...}` refers to.
        name: String,
        /// `primary` or `replicas`.
        service: SharedService,
    },
    /// Send one write on a held connection and leave it in flight, waiting as long as it
    /// takes (a client that wrote into a freeze); `expect: {connection: {sentWrite}}` reads
    /// its outcome. The connection is used up by it.
    SendWrite {
        /// The held connection (opened by `open-connection`).
        connection: String,
    },
    /// Run the kubectl plugin (`kubectl bloodraven <args>`).
    Plugin {
        /// Arguments after `kubectl bloodraven`.
        args: Vec<String>,
    },
    /// Roll the operator Deployment to another image (an upgrade A -> B).
    UpgradeOperator {
        /// The new image.
        image: String,
    },
    /// Step the wall clock of a site's mysqld (its `mysql` container only: the sidecar's
    /// clocks are untouched) to an offset from the real clock, until healed (localkube:
    /// libfaketime, `localkube up --clock-faults mysql`).
    ClockOffset(ClockOffsetTarget),
}

/// The healable fault kinds, as `heal:` names them (`kill` only with `keepDown`, `sql` only
/// with `heal`).
pub const HEALABLE_FAULTS: [&str; 11] = [
    "kill",
    "freeze",
    "stop-node",
    "partition",
    "deny-rbac",
    "scale-operator",
    "stop-external-dns",
    "replication-delay",
    "open-connection",
    "sql",
    "clock-offset",
];

impl Fault {
    /// The fault kind as the file spells it.
    pub const fn kind(&self) -> &'static str {
        match self {
            Fault::Kill(_) => "kill",
            Fault::KillOperator { .. } => "kill-operator",
            Fault::Freeze(_) => "freeze",
            Fault::Thaw(_) => "thaw",
            Fault::DeletePod(_) => "delete-pod",
            Fault::StopNode(_) => "stop-node",
            Fault::StartNode(_) => "start-node",
            Fault::Partition(_) => "partition",
            Fault::DenyRbac { .. } => "deny-rbac",
            Fault::ScaleOperator { .. } => "scale-operator",
            Fault::StopExternalDns => "stop-external-dns",
            Fault::Annotate { .. } => "annotate",
            Fault::SetReadOnly { .. } => "set-read-only",
            Fault::ReplicationDelay { .. } => "replication-delay",
            Fault::Sql { .. } => "sql",
            Fault::SealRpo { .. } => "seal-rpo",
            Fault::OpenConnection { .. } => "open-connection",
            Fault::SendWrite { .. } => "send-write",
            Fault::Plugin { .. } => "plugin",
            Fault::UpgradeOperator { .. } => "upgrade-operator",
            Fault::ClockOffset(_) => "clock-offset",
        }
    }

    /// The capability the fault needs beyond the Kubernetes API and the fault agent, if any.
    pub const fn capability(&self) -> Option<Capability> {
        match self {
            Fault::ClockOffset(_) => Some(Capability::ClockOffset),
            Fault::StopNode(_) | Fault::StartNode(_) => Some(Capability::StopNode),
            _ => None,
        }
    }

    /// Whether the fault stays in effect until healed (as opposed to a one-shot action).
    pub fn is_healable(&self) -> bool {
        match self {
            Fault::Kill(target) => target.keep_down,
            Fault::Sql { heal, .. } => heal.is_some(),
            _ => HEALABLE_FAULTS.contains(&self.kind()),
        }
    }
}

/// What a `heal` step undoes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub enum HealTarget {
    /// Every active fault.
    All,
    /// Every active fault of this kind (one of [`HEALABLE_FAULTS`]).
    Kind(String),
}

impl From<HealTarget> for String {
    fn from(target: HealTarget) -> Self {
        match target {
            HealTarget::All => "all".to_owned(),
            HealTarget::Kind(kind) => kind,
        }
    }
}

/// `all` or one of [`HEALABLE_FAULTS`] (the derive cannot see the names the custom
/// `Deserialize` accepts).
impl JsonSchema for HealTarget {
    fn schema_name() -> Cow<'static, str> {
        "HealTarget".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        let mut names = vec!["all"];
        names.extend(HEALABLE_FAULTS);
        json_schema!({
            "description": "What a `heal` step undoes: `all` (every active fault), or every active fault of one kind (`kill` only with `keepDown`, `sql` only with `heal`).",
            "type": "string",
            "enum": names,
        })
    }
}

impl<'de> Deserialize<'de> for HealTarget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        if name == "all" {
            return Ok(HealTarget::All);
        }
        if HEALABLE_FAULTS.contains(&name.as_str()) {
            return Ok(HealTarget::Kind(name));
        }
        Err(de::Error::custom(format!(
            "unknown heal target `{name}`, expected `all` or one of {}",
            HEALABLE_FAULTS.join(", ")
        )))
    }
}

/// An assertion: exactly one of `within`/`for` and exactly one target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Expect {
    /// Becomes true by this deadline (time-to-satisfy is recorded).
    #[serde(default)]
    pub within: Option<Span>,
    /// Stays true for this whole duration.
    #[serde(default, rename = "for")]
    pub for_: Option<Span>,
    /// A label for the report (default: the target rendered).
    #[serde(default)]
    pub name: Option<String>,
    /// The group's `.status`, partial match.
    #[serde(default)]
    pub group: Option<Value>,
    /// Pods.
    #[serde(default)]
    pub pods: Option<PodsExpect>,
    /// A Service's ready endpoints, as the set of sites behind them.
    #[serde(default)]
    pub endpoints: Option<EndpointsExpect>,
    /// The DNSEndpoint `bloodraven-playground`.
    #[serde(default)]
    pub dns_endpoint: Option<DnsEndpointExpect>,
    /// The DNS answer for the group's hostname (after external-dns).
    #[serde(default)]
    pub dns: Option<DnsExpect>,
    /// The counter app.
    #[serde(default)]
    pub counter: Option<CounterExpect>,
    /// A deploy API request and its answer.
    #[serde(default)]
    pub deploy_api: Option<DeployApiExpect>,
    /// An operator metric.
    #[serde(default)]
    pub metric: Option<MetricExpect>,
    /// A Kubernetes Event.
    #[serde(default)]
    pub event: Option<EventExpect>,
    /// Any object, partial match.
    #[serde(default)]
    pub object: Option<ObjectExpect>,
    /// A site's node.
    #[serde(default)]
    pub node: Option<NodeExpect>,
    /// A connection opened by `open-connection`.
    #[serde(default)]
    pub connection: Option<ConnectionExpect>,
    /// A site's mysqld, read directly (not through the operator).
    #[serde(default)]
    pub mysql: Option<MysqlExpect>,
    /// The archives on a site's backups volume (a rejoin's), read back and verified.
    #[serde(default)]
    pub archive: Option<ArchiveExpect>,
    /// Saves fields of the observation that satisfied the expectation for later `${var}`:
    /// variable name -> JSON pointer into the observation (see [`crate::runner::evaluate`]
    /// for its shape per target), e.g. `{svc_rv: /metadata/resourceVersion}`. A pointer that
    /// finds nothing (or null) fails the step: a later comparison with it cannot pass vacuously.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub save: BTreeMap<String, String>,
}

impl Expect {
    /// Every target an expectation may name, as the file spells it, in declaration order
    /// (every field but `within`, `for`, `name` and `save`).
    pub const TARGETS: [&'static str; 14] = [
        "group",
        "pods",
        "endpoints",
        "dns-endpoint",
        "dns",
        "counter",
        "deploy-api",
        "metric",
        "event",
        "object",
        "node",
        "connection",
        "mysql",
        "archive",
    ];

    /// The names of the targets that are set, in declaration order.
    pub fn targets(&self) -> Vec<&'static str> {
        let set = [
            self.group.is_some(),
            self.pods.is_some(),
            self.endpoints.is_some(),
            self.dns_endpoint.is_some(),
            self.dns.is_some(),
            self.counter.is_some(),
            self.deploy_api.is_some(),
            self.metric.is_some(),
            self.event.is_some(),
            self.object.is_some(),
            self.node.is_some(),
            self.connection.is_some(),
            self.mysql.is_some(),
            self.archive.is_some(),
        ];
        Self::TARGETS
            .into_iter()
            .zip(set)
            .filter_map(|(name, present)| present.then_some(name))
            .collect()
    }
}

/// Pods of the group (or selected by labels), with the phase and labels they must have.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsExpect {
    /// A site's MySQL pod.
    #[serde(default)]
    pub site: Option<Site>,
    /// A pod by name (e.g. a canary).
    #[serde(default)]
    pub name: Option<String>,
    /// Namespace (default `bloodraven-playground`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Pods whose phase must be this (`Running`, `Pending`, ...); `absent` = no such pod.
    #[serde(default)]
    pub phase: Option<String>,
    /// Labels that must be present with these values (partial match).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// The container's restart count, partial match (e.g. `{$gt: 0}`).
    #[serde(default)]
    pub restarts: Option<Value>,
    /// Every pod of the operator (namespace `bloodraven`, `app.kubernetes.io/name=bloodraven`,
    /// not terminating) instead of one pod.
    #[serde(default)]
    pub operator: bool,
    /// The labels of the node each pod runs on, partial match: `{topology.kubernetes.io/zone:
    /// {$exists: false}}` = on no site's node. An unscheduled pod has none and fails it.
    #[serde(default)]
    pub node_labels: Option<Value>,
}

impl PodsExpect {
    /// The one pod it names: `name`, else the site's MySQL pod of the playground group;
    /// `None` when it names neither.
    pub fn pod_name(&self) -> Option<String> {
        match (&self.name, self.site) {
            (Some(name), _) => Some(name.clone()),
            (None, Some(site)) => Some(bloodraven_api::names::pod(
                bloodraven_api::names::PLAYGROUND_GROUP,
                site.name(),
            )),
            (None, None) => None,
        }
    }
}

/// A shared Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SharedService {
    /// `mysql-<group>-primary`.
    Primary,
    /// `mysql-<group>-replicas`.
    Replicas,
}

/// A Service's ready endpoints as the sites of the pods behind them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointsExpect {
    /// `primary`, `replicas`, `<site>` (internal) or `<site>-hl` (headless).
    pub service: String,
    /// Exactly these sites are behind the Service (`[]`: no endpoint at all).
    pub sites: Vec<Site>,
    /// Judge what the workload's probe recorded (every ~200 ms, `primary` and `replicas`
    /// only) since the latest fault, heal or apply step, instead of reading the Service now:
    /// every recorded set must be `sites`, with no gap in the recording
    /// ([`crate::check::endpoint_history`]). "No endpoint flap" is a claim about the whole
    /// window, which sampling cannot make.
    #[serde(default)]
    pub recorded: bool,
}

/// A DNS target: the ClusterIP of a site's internal Service (`site-of iad`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "String")]
pub struct SiteOf(pub Site);

impl From<SiteOf> for String {
    fn from(target: SiteOf) -> Self {
        format!("site-of {}", target.0)
    }
}

/// `site-of <site>`, as the custom `Deserialize` reads it.
impl JsonSchema for SiteOf {
    fn schema_name() -> Cow<'static, str> {
        "SiteOf".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        let sites: Vec<&str> = Site::ALL.iter().map(|site| site.name()).collect();
        json_schema!({
            "description": "The ClusterIP of a site's internal Service: `site-of iad`.",
            "type": "string",
            "pattern": format!("^site-of\\s+({})\\s*$", sites.join("|")),
        })
    }
}

impl<'de> Deserialize<'de> for SiteOf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let Some(name) = text.strip_prefix("site-of ") else {
            return Err(de::Error::custom(format!(
                "invalid target `{text}`, expected `site-of <site>`"
            )));
        };
        Site::from_name(name.trim()).map(SiteOf).ok_or_else(|| {
            de::Error::custom(format!(
                "unknown site `{}` in target `{text}`, expected one of iad, pdx, reader",
                name.trim()
            ))
        })
    }
}

/// The DNSEndpoint object the operator writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DnsEndpointExpect {
    /// The single A record's single target.
    pub target: SiteOf,
    /// `recordTTL` (playground: 10).
    #[serde(default, rename = "recordTTL")]
    pub record_ttl: Option<u32>,
    /// The field manager owning `spec.endpoints` (the operator: `bloodraven`).
    #[serde(default)]
    pub field_manager: Option<String>,
}

/// A DNS answer for the group's hostname.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DnsExpect {
    /// The one address answered.
    pub target: SiteOf,
}

/// The outcome of an operation (Jepsen: ok, fail, info = unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeKind {
    /// It happened.
    Ok,
    /// It definitely did not happen.
    Fail,
    /// Unknown (timeout, connection lost).
    Info,
}

/// The counter app (GET/POST /api/counter).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CounterExpect {
    /// The counter's Service in the playground namespace (default `counter`, the playground's
    /// own, policy `hold`).
    #[serde(default)]
    pub service: Option<String>,
    /// The value strictly increases across the expectation's polls (POSTs are sent).
    #[serde(default)]
    pub increasing: Option<bool>,
    /// `readOnly` in the GET answer.
    #[serde(default)]
    pub read_only: Option<bool>,
    /// The site behind `dbHost` in the GET answer.
    #[serde(default)]
    pub db_site: Option<Site>,
    /// The outcome of a POST.
    #[serde(default)]
    pub write: Option<OutcomeKind>,
    /// The MySQL error number of a refused POST (the counter's error body `code`; 1290 =
    /// read-only).
    #[serde(default)]
    pub write_error: Option<u16>,
    /// The server-side id of the connection that answered (the counter's
    /// `x-counter-connection-id` header), partial match: `{$unchanged: true}` asserts a `hold`
    /// counter still talks over the socket it had before the step's fault
    /// (docs/design/requirements.md R000.20), not a new one to the same site after a disconnect.
    #[serde(default)]
    pub connection_id: Option<Value>,
}

/// HTTP methods the deploy API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
}

/// Which listener a deploy API request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DeployPort {
    /// TLS :8443 (the only one that serves /deploy/v1).
    #[default]
    Tls,
    /// Plain HTTP :8082 (must never serve it).
    Plain,
}

/// Which operator replica a deploy API request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ReplicaTarget {
    /// The leader.
    #[default]
    Leader,
    /// A standby (answers 503 not_leader).
    Follower,
}

/// The caller's projected ServiceAccount token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeployClient {
    /// ServiceAccount namespace.
    pub namespace: String,
    /// ServiceAccount name.
    pub service_account: String,
    /// Token audience (default `bloodraven-deploy`); `""` asks for none, so the token carries
    /// the Kubernetes API's default audience, as a pod's own ServiceAccount token does.
    #[serde(default)]
    pub audience: Option<String>,
}

/// One deploy API request. Strings may use `${var}` saved by an earlier request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeployRequest {
    /// Method.
    pub method: Method,
    /// Path, starting with `/deploy/v1/`.
    pub path: String,
    /// The caller.
    pub client: DeployClient,
    /// JSON body.
    #[serde(default)]
    pub body: Option<Value>,
    /// Listener.
    #[serde(default)]
    pub port: DeployPort,
    /// Replica.
    #[serde(default)]
    pub replica: ReplicaTarget,
}

/// A deploy API request with the answer it must get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeployApiExpect {
    /// The request, re-sent on each poll of the expectation.
    pub request: DeployRequest,
    /// The HTTP status code.
    pub status: u16,
    /// Body fields, partial match.
    #[serde(default)]
    pub body: Option<Value>,
    /// Seconds from the answer's `Date` header to the body's `expiresAt`, both the operator's
    /// clock (docs/design/requirements.md R003.15: expiry is judged on it), matched like a body
    /// field (`{$lte: 121}`).
    /// `Date` has whole seconds, so a lease of `ttl` seconds reads in `(ttl - 1, ttl + 1]`.
    /// An answer without either reads as absent.
    #[serde(default)]
    pub expires_in: Option<Value>,
    /// Save answer fields for later requests: variable name -> top-level body field.
    #[serde(default)]
    pub save: BTreeMap<String, String>,
}

/// A Prometheus sample from the operator leader's :8082/metrics, or with `site` from that
/// site's sidecar (:8086/metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricExpect {
    /// Scrape this site's sidecar instead of the operator.
    #[serde(default)]
    pub site: Option<Site>,
    /// Metric name.
    pub name: String,
    /// Labels the sample must carry.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The value, partial match (a number, or `{$gt: 0}` ...).
    pub value: Value,
}

/// A Kubernetes Event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EventExpect {
    /// `reason`.
    pub reason: String,
    /// `Normal` or `Warning`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// The message contains this.
    #[serde(default)]
    pub message_contains: Option<String>,
}

/// Any object by partial match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectExpect {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// Namespace (default `bloodraven-playground` for namespaced kinds).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Partial match against the whole object; `{$exists: false}` for an absent one.
    #[serde(rename = "match")]
    pub match_: Value,
}

/// A site's node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeExpect {
    /// The site whose node.
    pub site: Site,
    /// Whether the node carries `bloodraven.shipstream.io/demoted=playground:NoExecute`.
    pub demoted_taint: bool,
}

/// A write through a connection opened by `open-connection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConnectionExpect {
    /// The connection's name.
    pub name: String,
    /// The MySQL error number a write gets (1290 = read-only; 2013 = `CR_SERVER_LOST`, no
    /// server answered: the connection's mysqld is gone), or null for success.
    #[serde(default)]
    pub write_error: Option<u16>,
    /// The site whose mysqld is on the other end of the connection (`@@hostname`, asked on
    /// the same connection before the write). Not checked with `sentWrite`.
    #[serde(default)]
    pub site: Option<Site>,
    /// The outcome of the write `send-write` left in flight on it. Given, `writeError` is not
    /// checked (the connection belongs to that write).
    #[serde(default)]
    pub sent_write: Option<SentWrite>,
}

/// What became of a write left in flight by `send-write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SentWrite {
    /// No answer yet.
    Pending,
    /// The server said it committed.
    Acknowledged,
    /// Refused, or the connection was lost: the client was never told it committed.
    NotAcknowledged,
}

impl SentWrite {
    /// The name scenarios and observations spell.
    pub fn as_str(self) -> &'static str {
        match self {
            SentWrite::Pending => "pending",
            SentWrite::Acknowledged => "acknowledged",
            SentWrite::NotAcknowledged => "not-acknowledged",
        }
    }
}

/// A quantity the runner can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Quantity {
    /// Fault start to the operator's `lastFailover.detectedAt`.
    Detection,
    /// Fault start to the first acknowledged write on the new primary (RTO).
    WriteOutage,
    /// `heal` to the liveness condition (one writable site, replicas healthy, DNS = active).
    Convergence,
    /// The longest time without an acknowledged write from the first fault to this step
    /// (a fence that lifts again without a failover).
    WriteGap,
}

impl Quantity {
    /// The name scenarios spell it with (`write-outage`).
    pub fn name(self) -> &'static str {
        match self {
            Quantity::Detection => "detection",
            Quantity::WriteOutage => "write-outage",
            Quantity::Convergence => "convergence",
            Quantity::WriteGap => "write-gap",
        }
    }
}

/// A measurement step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Measure {
    /// The quantity.
    pub quantity: Quantity,
    /// Fails the scenario when shorter.
    #[serde(default)]
    pub at_least: Option<Span>,
    /// Fails the scenario when longer.
    #[serde(default)]
    pub at_most: Option<Span>,
}

/// A site's mysqld, read directly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MysqlExpect {
    /// The site.
    pub site: Site,
    /// `@@global.read_only`.
    #[serde(default)]
    pub read_only: Option<bool>,
    /// Replication running (IO and SQL threads).
    #[serde(default)]
    pub replicating: Option<bool>,
    /// mysqld's wall clock (`UTC_TIMESTAMP(6)`) minus the harness's, within these bounds
    /// (signed offsets: `{atLeast: -21s, atMost: -19s}`; the exec's latency counts as half).
    #[serde(default)]
    pub clock_offset: Option<OffsetRange>,
    /// mysqld's write deadline event (the sidecar's dead man's switch) last ran at most this
    /// long ago by mysqld's own clock, and not in its future: the switch runs now, and would
    /// fence on time (a backward step of mysqld's clock stalls the event scheduler).
    #[serde(default)]
    pub write_deadline_ran_within: Option<Span>,
}

/// The archives a rejoin wrote on a site's backups volume (`archives/<name>/`,
/// docs/design/operator.md#returning-primary), read back through the site's sidecar container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArchiveExpect {
    /// The site whose volume holds them (the rejoined returning primary).
    pub site: Site,
    /// What the archive checker demands they hold, judged after the final read.
    pub holds: ArchiveHolds,
}

/// What the archive checker ([`crate::check::archive`]) demands of the archives an `archive`
/// expectation read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ArchiveHolds {
    /// Every acknowledged write lost in the emergency failover that demoted the site (by the
    /// rpo checker's count) has its GTID in an archive's errant binlog, and no archived GTID
    /// is that of an acknowledged write that was not lost there.
    LostWrites,
}

/// Bounds of a signed offset, spelled like `clock-offset`'s (`-21s`, `+500ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OffsetRange {
    /// The least offset.
    #[schemars(regex(pattern = super::span::OFFSET_PATTERN))]
    pub at_least: String,
    /// The greatest offset.
    #[schemars(regex(pattern = super::span::OFFSET_PATTERN))]
    pub at_most: String,
}

/// Parses a signed offset (`+20s`, `-1500ms`, `0`) to milliseconds.
pub fn offset_ms(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(0);
    }
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'+') => (1, &text[1..]),
        Some(b'-') => (-1, &text[1..]),
        _ => {
            return Err(format!(
                "offset `{text}` has no sign: write e.g. `+20s` or `-1500ms`"
            ))
        }
    };
    let span = Span::parse(rest)?;
    Ok(sign * i64::try_from(span.duration().as_millis()).unwrap_or(i64::MAX))
}
