//! The typed scenario model: what a `scenarios/NNN-slug.yaml` file may say.
//!
//! Everything that serde can check (unknown step kinds and fields, bad durations, unknown
//! sites) is checked while parsing, so the error carries serde_yaml's line and column and
//! the field path. Rules across fields and steps live in [`crate::scenario::validate`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::span::Span;
use crate::targets::Target;

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
    /// A fleet: the playground plus `fleet - 1` more groups (`fleet-01` ...) in its namespace,
    /// copies of its spec without the DNS record, all Valid before the steps start; one
    /// operator runs them all, and the fleet checker demands that none of the others' authority
    /// is ever anything but Valid (`--fleet N` sets it for a whole run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 60))]
    pub fleet: Option<u32>,
}

/// One step of a scenario (a one-key map in the file, see [`super::single_key`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Server-side apply a fixture file or an inline object.
    Apply(Apply),
    /// Inject a fault: break something (a process, a node, the network, a permission), to be
    /// healed or to heal itself.
    Fault(#[serde(deserialize_with = "super::single_key::one")] Fault),
    /// Perform an action from outside: what a user, an application or the harness itself
    /// does (an annotation, SQL, a connection, the plugin, an upgrade, the RPO seal).
    Do(#[serde(deserialize_with = "super::single_key::one")] Action),
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
            Step::Do(_) => "do",
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

/// The object an `annotate` action writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AnnotatedObject {
    /// The playground MysqlFailoverGroup.
    #[default]
    Group,
}

/// Faults: what breaks something, healed by `heal` (or, for a restarting kill, a deleted
/// pod or a killed operator replica, by the cluster itself). Each variant is one map key in
/// the file.
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
    /// Step the wall clock of a site's mysqld (its `mysql` container only: the sidecar's
    /// clocks are untouched) to an offset from the real clock, until healed (localkube:
    /// libfaketime, `localkube up --clock-faults mysql`).
    ClockOffset(ClockOffsetTarget),
}

/// Actions: what a user, an application or the harness does from outside, not a breakage
/// (`do:`). Each variant is one map key in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
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
}

/// The healable fault kinds, as `heal:` names them (`kill` only with `keepDown`).
pub const HEALABLE_FAULTS: [&str; 9] = [
    "kill",
    "freeze",
    "stop-node",
    "partition",
    "deny-rbac",
    "scale-operator",
    "stop-external-dns",
    "replication-delay",
    "clock-offset",
];

/// The healable action kinds, as `heal:` names them (`sql` only with `heal`; healing
/// `open-connection` forgets the held connections).
pub const HEALABLE_ACTIONS: [&str; 2] = ["open-connection", "sql"];

/// Every kind `heal:` may name: [`HEALABLE_FAULTS`], then [`HEALABLE_ACTIONS`].
pub fn healable_kinds() -> impl Iterator<Item = &'static str> {
    HEALABLE_FAULTS.into_iter().chain(HEALABLE_ACTIONS)
}

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
            Fault::SetReadOnly { .. } => "set-read-only",
            Fault::ReplicationDelay { .. } => "replication-delay",
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

    /// Whether the fault stays in effect until healed (as opposed to one the cluster heals
    /// itself, or a one-shot).
    pub fn is_healable(&self) -> bool {
        match self {
            Fault::Kill(target) => target.keep_down,
            _ => HEALABLE_FAULTS.contains(&self.kind()),
        }
    }
}

impl Action {
    /// The action kind as the file spells it.
    pub const fn kind(&self) -> &'static str {
        match self {
            Action::Annotate { .. } => "annotate",
            Action::Sql { .. } => "sql",
            Action::SealRpo { .. } => "seal-rpo",
            Action::OpenConnection { .. } => "open-connection",
            Action::SendWrite { .. } => "send-write",
            Action::Plugin { .. } => "plugin",
            Action::UpgradeOperator { .. } => "upgrade-operator",
        }
    }

    /// Whether `heal` undoes it (an `sql` with `heal`) or forgets it (`open-connection`).
    pub fn is_healable(&self) -> bool {
        match self {
            Action::Sql { heal, .. } => heal.is_some(),
            _ => HEALABLE_ACTIONS.contains(&self.kind()),
        }
    }

    /// The sites it acts on, as the history's fault events record them (see
    /// [`crate::history::event::fault_sites`]): the site of an `sql`; for a planned-failover
    /// request (the `bloodraven.shipstream.io/planned-failover` annotation, `kubectl
    /// bloodraven promote <group> <site>`) its target site. Empty for the others.
    pub fn sites(&self) -> Vec<Site> {
        match self {
            Action::Sql { site, .. } => vec![*site],
            Action::Annotate { key, value, .. } if key.ends_with("/planned-failover") => value
                .as_deref()
                .and_then(Site::from_name)
                .into_iter()
                .collect(),
            Action::Plugin { args } if args.first().map(String::as_str) == Some("promote") => args
                .iter()
                .skip(1)
                .filter_map(|arg| Site::from_name(arg))
                .collect(),
            Action::Annotate { .. }
            | Action::Plugin { .. }
            | Action::OpenConnection { .. }
            | Action::SendWrite { .. }
            | Action::SealRpo { .. }
            | Action::UpgradeOperator { .. } => Vec::new(),
        }
    }
}

/// What a `heal` step undoes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub enum HealTarget {
    /// Every active fault and action.
    All,
    /// Every active fault or action of this kind (one of [`healable_kinds`]).
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

/// `all` or one of [`healable_kinds`] (the derive cannot see the names the custom
/// `Deserialize` accepts).
impl JsonSchema for HealTarget {
    fn schema_name() -> Cow<'static, str> {
        "HealTarget".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        let mut names = vec!["all"];
        names.extend(healable_kinds());
        json_schema!({
            "description": "What a `heal` step undoes: `all` (every active fault and action), or every active fault or action of one kind (`kill` only with `keepDown`, `sql` only with `heal`).",
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
        if healable_kinds().any(|kind| kind == name) {
            return Ok(HealTarget::Kind(name));
        }
        Err(de::Error::custom(format!(
            "unknown heal target `{name}`, expected `all` or one of {}",
            healable_kinds().collect::<Vec<_>>().join(", ")
        )))
    }
}

/// An assertion: exactly one of `within`/`for`, and exactly one target (a key naming one of
/// [`Target::NAMES`], whose value the target's module reads, see [`crate::targets`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Expect {
    /// Becomes true by this deadline (time-to-satisfy is recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<Span>,
    /// Stays true for this whole duration.
    #[serde(rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<Span>,
    /// A label for the report (default: the target rendered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Saves fields of the observation that satisfied the expectation for later `${var}`:
    /// variable name -> JSON pointer into the observation (its shape is documented per target
    /// in [`crate::targets`]), e.g. `{svc_rv: /metadata/resourceVersion}`. A pointer that
    /// finds nothing (or null) fails the step: a later comparison with it cannot pass vacuously.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub save: BTreeMap<String, String>,
    /// What it asserts about.
    #[serde(flatten)]
    pub target: Target,
}

/// The fields of `expect` besides its target.
const EXPECT_FIELDS: [&str; 4] = ["within", "for", "name", "save"];

/// `within`, `for`, `name`, `save` and one target key, read from the map as streamed (so
/// serde_yaml's line and field path stay on every error, which `#[serde(flatten)]` would lose).
impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ExpectVisitor)
    }
}

struct ExpectVisitor;

impl<'de> Visitor<'de> for ExpectVisitor {
    type Value = Expect;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of `within` or `for`, optional `name` and `save`, and one target")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Expect, A::Error> {
        let (mut within, mut for_, mut name, mut save) = (None, None, None, BTreeMap::new());
        let mut target = None;
        let mut named = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "within" => within = Some(map.next_value()?),
                "for" => for_ = Some(map.next_value()?),
                "name" => name = map.next_value()?,
                "save" => save = map.next_value()?,
                other if Target::NAMES.contains(&other) => {
                    if target.is_none() {
                        target = Some(super::single_key::entry::<A, Target>(other, &mut map)?);
                    } else {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                    named.push(key);
                }
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown field `{other}`, expected one of {} or a target ({})",
                        EXPECT_FIELDS.map(|field| format!("`{field}`")).join(", "),
                        Target::NAMES.join(", ")
                    )))
                }
            }
        }
        match (target, named.as_slice()) {
            (Some(target), [_]) => Ok(Expect {
                within,
                for_,
                name,
                save,
                target,
            }),
            (None, _) => Err(de::Error::custom(format!(
                "names no target ({})",
                Target::NAMES.join(", ")
            ))),
            (Some(_), many) => Err(de::Error::custom(format!(
                "names {} targets ({}); use one per expect",
                many.len(),
                many.join(", ")
            ))),
        }
    }
}

/// The fields of [`EXPECT_FIELDS`], every target as an optional key, and exactly one of them
/// required (the derive cannot see what the custom `Deserialize` reads).
impl JsonSchema for Expect {
    fn schema_name() -> Cow<'static, str> {
        "Expect".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let described = |description: &str, schema: Schema| json!({"description": description, "allOf": [schema.to_value()]});
        let mut properties = serde_json::Map::new();
        let span = generator.subschema_for::<Span>();
        properties.insert(
            "within".to_owned(),
            described(
                "Becomes true by this deadline (time-to-satisfy is recorded).",
                span.clone(),
            ),
        );
        properties.insert(
            "for".to_owned(),
            described("Stays true for this whole duration.", span),
        );
        properties.insert(
            "name".to_owned(),
            json!({"description": "A label for the report (default: the target rendered).", "type": "string"}),
        );
        properties.insert(
            "save".to_owned(),
            json!({"description": "Saves fields of the observation that satisfied the expectation for later `${var}`: variable name -> JSON pointer into the observation (its shape is documented per target in `harness/src/targets/`), e.g. `{svc_rv: /metadata/resourceVersion}`. A pointer that finds nothing (or null) fails the step.", "type": "object", "additionalProperties": {"type": "string"}}),
        );
        let mut one_of = Vec::new();
        let targets = Target::json_schema(generator).to_value();
        for variant in targets["oneOf"].as_array().into_iter().flatten() {
            for (key, schema) in variant["properties"].as_object().into_iter().flatten() {
                let description = variant["description"].as_str().unwrap_or_default();
                properties.insert(
                    key.clone(),
                    json!({"description": description, "allOf": [schema]}),
                );
                one_of.push(json!({"required": [key]}));
            }
        }
        json_schema!({
            "description": "An assertion: exactly one of `within`/`for`, and exactly one target.",
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
            "oneOf": one_of,
        })
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
