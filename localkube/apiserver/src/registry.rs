//! The resource registry: group, version, kind, plural, scope and subresources of every
//! served resource, for the built-in kinds and for CRDs registered at runtime.

use serde_json::Value;
use std::sync::RwLock;

/// A subresource served by the store's verbs. The streaming pod subresources (`exec`,
/// `attach`, `portforward`) are [`crate::plugin::StreamSubresource`], served by a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// `status`: writes cover `.status` only.
    Status,
    /// `scale`: an `autoscaling/v1` Scale over the replicas.
    Scale,
    /// `finalize` (Namespaces): writes `spec.finalizers`.
    Finalize,
    /// `log` (Pods): container logs.
    Log,
    /// `eviction` (Pods): a delete through an Eviction.
    Eviction,
    /// `binding` (Pods): the scheduler's binding to a node.
    Binding,
    /// `token` (ServiceAccounts): a TokenRequest.
    Token,
}

impl Subresource {
    /// The subresource a path's last segment names, if this server knows it.
    pub fn parse(segment: &str) -> Option<Self> {
        match segment {
            "status" => Some(Subresource::Status),
            "scale" => Some(Subresource::Scale),
            "finalize" => Some(Subresource::Finalize),
            "log" => Some(Subresource::Log),
            "eviction" => Some(Subresource::Eviction),
            "binding" => Some(Subresource::Binding),
            "token" => Some(Subresource::Token),
            _ => None,
        }
    }

    /// The name in paths and discovery.
    pub fn as_str(self) -> &'static str {
        match self {
            Subresource::Status => "status",
            Subresource::Scale => "scale",
            Subresource::Finalize => "finalize",
            Subresource::Log => "log",
            Subresource::Eviction => "eviction",
            Subresource::Binding => "binding",
            Subresource::Token => "token",
        }
    }
}

/// A served resource (one group/version/plural).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    /// API group (`""` for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular resource name.
    pub singular: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Served subresources.
    pub subresources: Vec<Subresource>,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// kubectl categories (`all`).
    pub categories: Vec<String>,
    /// Only `create` is served (reviews).
    pub create_only: bool,
    /// The CRD behind a custom resource (its `spec.versions[]` entry and names).
    pub crd: Option<CrdVersion>,
}

/// What the server needs from a CRD version.
#[derive(Debug, Clone, PartialEq)]
pub struct CrdVersion {
    /// `openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<Value>,
    /// `subresources.scale` (specReplicasPath, statusReplicasPath, labelSelectorPath).
    pub scale: Option<Value>,
    /// `selectableFields[].jsonPath`.
    pub selectable_fields: Vec<String>,
    /// The CRD's name.
    pub crd_name: String,
    /// `schema` compiled for validation (patterns, CEL programs), on first use.
    pub validator: crate::crd_validation::LazyValidator,
}

impl ResourceInfo {
    /// `group/version`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// The storage key: one per group and plural (all versions share storage).
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }
    /// Whether `sub` is served.
    pub fn has_subresource(&self, sub: Subresource) -> bool {
        self.subresources.contains(&sub)
    }
    /// The URL path prefix of this resource's group version (`/api/v1` or `/apis/g/v`).
    pub fn gv_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

/// One built-in resource: a row of [`BUILTIN_RESOURCES`]. Every built-in kind is served at
/// `v1` of its group, its singular name is its kind in lower case.
struct Builtin {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    subresources: &'static [Subresource],
    short_names: &'static [&'static str],
    /// In kubectl's `all` category.
    in_all: bool,
    /// Only `create` is served (the reviews).
    create_only: bool,
}

const NAMESPACED: bool = true;
const CLUSTER: bool = false;
const ALL: bool = true;
const CREATE_ONLY: bool = true;

const fn builtin(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    subresources: &'static [Subresource],
    short_names: &'static [&'static str],
    in_all: bool,
) -> Builtin {
    Builtin {
        group,
        kind,
        plural,
        namespaced,
        subresources,
        short_names,
        in_all,
        create_only: false,
    }
}

/// A review: cluster-scoped unless `namespaced`, `create` only, no subresources.
const fn review(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Builtin {
    Builtin {
        create_only: CREATE_ONLY,
        ..builtin(group, kind, plural, namespaced, &[], &[], false)
    }
}

use Subresource::{Binding, Eviction, Finalize, Log, Scale, Status, Token};

/// The built-in resources this server serves.
#[rustfmt::skip]
static BUILTIN_RESOURCES: &[Builtin] = &[
    //      group                        kind                        plural                        scope       subresources                       short names      `all`
    builtin("",                          "Namespace",                "namespaces",                 CLUSTER,    &[Status, Finalize],               &["ns"],         false),
    builtin("",                          "Pod",                      "pods",                       NAMESPACED, &[Status, Log, Eviction, Binding], &["po"],         ALL),
    builtin("",                          "Service",                  "services",                   NAMESPACED, &[Status],                         &["svc"],        ALL),
    builtin("",                          "Endpoints",                "endpoints",                  NAMESPACED, &[],                               &["ep"],         false),
    builtin("",                          "ConfigMap",                "configmaps",                 NAMESPACED, &[],                               &["cm"],         false),
    builtin("",                          "Secret",                   "secrets",                    NAMESPACED, &[],                               &[],             false),
    builtin("",                          "ServiceAccount",           "serviceaccounts",            NAMESPACED, &[Token],                          &["sa"],         false),
    builtin("",                          "Event",                    "events",                     NAMESPACED, &[],                               &["ev"],         false),
    builtin("",                          "Node",                     "nodes",                      CLUSTER,    &[Status],                         &["no"],         false),
    builtin("",                          "PersistentVolumeClaim",    "persistentvolumeclaims",     NAMESPACED, &[Status],                         &["pvc"],        false),
    builtin("",                          "PersistentVolume",         "persistentvolumes",          CLUSTER,    &[Status],                         &["pv"],         false),
    builtin("apps",                      "Deployment",               "deployments",                NAMESPACED, &[Status, Scale],                  &["deploy"],     ALL),
    builtin("apps",                      "ReplicaSet",               "replicasets",                NAMESPACED, &[Status, Scale],                  &["rs"],         ALL),
    builtin("apps",                      "StatefulSet",              "statefulsets",               NAMESPACED, &[Status, Scale],                  &["sts"],        ALL),
    builtin("apps",                      "DaemonSet",                "daemonsets",                 NAMESPACED, &[Status],                         &["ds"],         ALL),
    builtin("apps",                      "ControllerRevision",       "controllerrevisions",        NAMESPACED, &[],                               &[],             false),
    builtin("batch",                     "Job",                      "jobs",                       NAMESPACED, &[Status],                         &[],             ALL),
    builtin("discovery.k8s.io",          "EndpointSlice",            "endpointslices",             NAMESPACED, &[],                               &[],             false),
    builtin("coordination.k8s.io",       "Lease",                    "leases",                     NAMESPACED, &[],                               &[],             false),
    builtin("events.k8s.io",             "Event",                    "events",                     NAMESPACED, &[],                               &["ev"],         false),
    builtin("policy",                    "PodDisruptionBudget",      "poddisruptionbudgets",       NAMESPACED, &[Status],                         &["pdb"],        false),
    // Stored and served so installs that carry one apply; never enforced: the node agent
    // has no packet filter (no iptables or nft on these machines), so every pod reaches
    // every other as before.
    builtin("networking.k8s.io",         "NetworkPolicy",            "networkpolicies",            NAMESPACED, &[],                               &["netpol"],     false),
    builtin("rbac.authorization.k8s.io", "Role",                     "roles",                      NAMESPACED, &[],                               &[],             false),
    builtin("rbac.authorization.k8s.io", "RoleBinding",              "rolebindings",               NAMESPACED, &[],                               &[],             false),
    builtin("rbac.authorization.k8s.io", "ClusterRole",              "clusterroles",               CLUSTER,    &[],                               &[],             false),
    builtin("rbac.authorization.k8s.io", "ClusterRoleBinding",       "clusterrolebindings",        CLUSTER,    &[],                               &[],             false),
    builtin("apiregistration.k8s.io",    "APIService",               "apiservices",                CLUSTER,    &[Status],                         &[],             false),
    builtin("apiextensions.k8s.io",      "CustomResourceDefinition", "customresourcedefinitions",  CLUSTER,    &[Status],                         &["crd", "crds"], false),
    review("authentication.k8s.io",      "TokenReview",              "tokenreviews",               CLUSTER),
    review("authentication.k8s.io",      "SelfSubjectReview",        "selfsubjectreviews",         CLUSTER),
    review("authorization.k8s.io",       "SubjectAccessReview",      "subjectaccessreviews",       CLUSTER),
    review("authorization.k8s.io",       "SelfSubjectAccessReview",  "selfsubjectaccessreviews",   CLUSTER),
    review("authorization.k8s.io",       "LocalSubjectAccessReview", "localsubjectaccessreviews",  NAMESPACED),
    review("authorization.k8s.io",       "SelfSubjectRulesReview",   "selfsubjectrulesreviews",    CLUSTER),
];

impl Builtin {
    fn resource_info(&self) -> ResourceInfo {
        ResourceInfo {
            group: self.group.into(),
            version: "v1".into(),
            kind: self.kind.into(),
            plural: self.plural.into(),
            singular: self.kind.to_lowercase(),
            namespaced: self.namespaced,
            subresources: self.subresources.to_vec(),
            short_names: self
                .short_names
                .iter()
                .map(|short_name| short_name.to_string())
                .collect(),
            categories: if self.in_all {
                vec!["all".into()]
            } else {
                vec![]
            },
            create_only: self.create_only,
            crd: None,
        }
    }
}

/// The built-in resources this server serves.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    BUILTIN_RESOURCES
        .iter()
        .map(Builtin::resource_info)
        .collect()
}

/// What the server keeps of one CRD version (`version`, an entry of `spec.versions`).
fn crd_version(version: &Value, crd_name: &str) -> CrdVersion {
    CrdVersion {
        schema: version.pointer("/schema/openAPIV3Schema").cloned(),
        printer_columns: version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        scale: version.pointer("/subresources/scale").cloned(),
        selectable_fields: version
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .filter_map(|field| {
                        field
                            .get("jsonPath")
                            .and_then(Value::as_str)
                            .map(|path| path.trim_start_matches('.').to_string())
                    })
                    .collect()
            })
            .unwrap_or_default(),
        crd_name: crd_name.to_string(),
        validator: Default::default(),
    }
}

/// All served resources; CRDs are added and removed at runtime.
#[derive(Debug)]
pub struct Registry {
    resources: RwLock<Vec<ResourceInfo>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry with the built-in resources.
    pub fn new() -> Self {
        Registry {
            resources: RwLock::new(builtin_resources()),
        }
    }
    /// A copy of every served resource.
    pub fn all(&self) -> Vec<ResourceInfo> {
        self.resources
            .read()
            .map(|resources| resources.clone())
            .unwrap_or_default()
    }
    /// The resource served at group/version/plural.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        self.resources
            .read()
            .ok()?
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }
    /// The resource of a group and kind (any version; the first served one).
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<ResourceInfo> {
        self.resources
            .read()
            .ok()?
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .cloned()
    }
    /// The resource for an `apiVersion` and `kind`.
    pub fn by_api_version_kind(&self, api_version: &str, kind: &str) -> Option<ResourceInfo> {
        let (group, version) = split_api_version(api_version);
        self.resources
            .read()
            .ok()?
            .iter()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .cloned()
    }
    /// Every served resource with the given storage key (all versions).
    pub fn by_storage_key(&self, key: &str) -> Vec<ResourceInfo> {
        self.resources
            .read()
            .map(|resources| {
                resources
                    .iter()
                    .filter(|r| r.storage_key() == key)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
    /// Serves (or re-serves) the versions of a CRD object; removes versions no longer served.
    pub fn register_crd(&self, crd: &Value) {
        let Some(spec) = crd.get("spec") else { return };
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let group = spec
            .get("group")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let names = spec.get("names").cloned().unwrap_or(Value::Null);
        let s = |k: &str| {
            names
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let list = |key: &str| -> Vec<String> {
            names
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let namespaced = spec.get("scope").and_then(Value::as_str) != Some("Cluster");
        let mut infos = Vec::new();
        for value in spec
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if value.get("served").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            let version = value
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let mut subresources = Vec::new();
            if value.pointer("/subresources/status").is_some() {
                subresources.push(Subresource::Status);
            }
            if value.pointer("/subresources/scale").is_some() {
                subresources.push(Subresource::Scale);
            }
            let singular = if s("singular").is_empty() {
                s("kind").to_lowercase()
            } else {
                s("singular")
            };
            infos.push(ResourceInfo {
                group: group.clone(),
                version,
                kind: s("kind"),
                plural: s("plural"),
                singular,
                namespaced,
                subresources,
                short_names: list("shortNames"),
                categories: list("categories"),
                create_only: false,
                crd: Some(crd_version(value, &name)),
            });
        }
        if let Ok(mut all) = self.resources.write() {
            all.retain(|resource| {
                resource
                    .crd
                    .as_ref()
                    .map(|c| c.crd_name != name)
                    .unwrap_or(true)
            });
            all.extend(infos);
        }
    }
    /// Stops serving a CRD.
    pub fn unregister_crd(&self, crd_name: &str) {
        if let Ok(mut all) = self.resources.write() {
            all.retain(|resource| {
                resource
                    .crd
                    .as_ref()
                    .map(|crd_version| crd_version.crd_name != crd_name)
                    .unwrap_or(true)
            });
        }
    }
}

/// Splits `group/version` (`v1` is the core group).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, value)) => (group, value),
        None => ("", api_version),
    }
}
