//! Install manifests of the operator rendered from a values struct (the harness applies them;
//! `operator/deploy/` renders its files from the same function).
//!
//! Values mirror the chart keys of the requirements (docs/design/requirements.md R001.9,
//! R003.2): `replicaCount` (default 1), `leaderElection.enabled` (default true),
//! `auxiliary.deployAPI.enabled` (default false; needs `auxiliary.escrowTLS.enabled` with a
//! certificate Secret, because the deploy API is served only on the TLS listener :8443),
//! `auxiliary.escrowTLS.secretName`, and `networkPolicy.{enabled, groupNamespaces, mysqlFrom}`
//! (see [`network_policy`]).
//!
//! # RBAC (ClusterRole `bloodraven`)
//!
//! | API group | resources | verbs | why |
//! |---|---|---|---|
//! | `bloodraven.shipstream.io` | `mysqlfailovergroups` | get, list, watch, patch, update | poll, annotations |
//! | `bloodraven.shipstream.io` | `mysqlfailovergroups/status` | get, patch, update | status subresource |
//! | `bloodraven.shipstream.io` | `mysqldatabases` | get, list, watch | deploymentClients |
//! | `externaldns.k8s.io` | `dnsendpoints` | get, list, watch, create, update, patch | the DNS record (SSA); a rule of its own so chaos scenario 38 can deny create/update/patch |
//! | core | `services` | get, list, watch, create, update, patch | the 4 Service kinds (SSA) |
//! | core | `pods` | get, list, watch, patch, delete | role/healthy labels, node, sidecar start; delete: the agentless old primary (docs/design/history.md#issue-10) |
//! | core | `nodes` | get, list, watch, patch, update | the NoExecute demotion taint; the `Ready` condition of the old primary's node (docs/design/history.md#issue-10) |
//! | core | `configmaps` | get, list, watch, create, update, patch | deploy-lease tombstones |
//! | `apps` | `statefulsets` | get, list, watch, create, update, patch | the per-site workloads (SSA) |
//! | core | `secrets` | get, create, patch | the group's credentials and request-signature key Secrets, created when missing; patch only to realign the sidecars' verifying key with the signing key |
//! | `coordination.k8s.io` | `leases` | get, list, watch, create, update, patch, delete | leader election, deploy leases |
//! | core, `events.k8s.io` | `events` | create, patch, update | the Event catalogue |
//! | `authentication.k8s.io` | `tokenreviews` | create | deploy API authentication |

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use bloodraven_api::names;

use crate::error::{Error, Result};

/// Where the escrow TLS Secret is mounted in the operator pod.
pub const TLS_MOUNT_PATH: &str = "/etc/bloodraven/tls";

/// Values of the operator install.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct InstallValues {
    /// Operator namespace.
    pub namespace: String,
    /// Operator image.
    pub image: String,
    /// `imagePullPolicy` of the operator container.
    pub image_pull_policy: String,
    /// Number of operator replicas (extras are standbys).
    pub replica_count: u32,
    /// Leader election.
    pub leader_election: Toggle,
    /// Optional features.
    pub auxiliary: Auxiliary,
    /// Override of the sidecar URL template (`{group}`, `{site}`, `{namespace}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sidecar_url_template: Option<String>,
    /// `RUST_LOG` of the operator.
    pub log_level: String,
    /// `nodeSelector` of the operator pods.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// `affinity` of the operator pods (a Kubernetes `Affinity`, passed through).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Value>,
    /// The NetworkPolicy of the groups' MySQL pods.
    pub network_policy: NetworkPolicyValues,
}

/// `networkPolicy`: who may connect to the MySQL pods of the groups
/// (docs/design/history.md#issue-10-case-8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct NetworkPolicyValues {
    /// Whether the policy is rendered.
    pub enabled: bool,
    /// The namespaces groups run in: one policy (and the Namespace) is rendered in each. A
    /// NetworkPolicy selects pods of its own namespace only, and the install does not know
    /// where groups will be created; a group in an unlisted namespace gets no policy.
    pub group_namespaces: Vec<String>,
    /// Who may connect to MySQL (3306) besides the groups' own pods (replication): Kubernetes
    /// `NetworkPolicyPeer`s, passed through. The default, `[{podSelector: {}}]`, is every pod
    /// of the group's namespace, where the playground's counter app runs.
    pub mysql_from: Vec<Value>,
}

impl Default for NetworkPolicyValues {
    fn default() -> Self {
        Self {
            enabled: true,
            group_namespaces: Vec::new(),
            mysql_from: vec![json!({"podSelector": {}})],
        }
    }
}

impl Default for InstallValues {
    fn default() -> Self {
        Self {
            namespace: names::OPERATOR_NAMESPACE.to_string(),
            image: default_image(),
            image_pull_policy: "IfNotPresent".to_string(),
            replica_count: 1,
            leader_election: Toggle { enabled: true },
            auxiliary: Auxiliary::default(),
            sidecar_url_template: None,
            log_level: "info".to_string(),
            node_selector: std::collections::BTreeMap::new(),
            affinity: None,
            network_policy: NetworkPolicyValues::default(),
        }
    }
}

/// `bloodraven:<version of this operator>`: the operator image of this build.
pub fn default_image() -> String {
    format!("bloodraven:{}", env!("CARGO_PKG_VERSION"))
}

/// Reads a values file (YAML); an unknown or mistyped key is an error naming the file, line
/// and field.
pub fn values_from_file(path: &std::path::Path) -> Result<InstallValues> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::InstallValues(format!("read {}: {e}", path.display())))?;
    values_from_str(&text).map_err(|e| match e {
        Error::InstallValues(message) => {
            Error::InstallValues(format!("{}: {message}", path.display()))
        }
        other => other,
    })
}

/// Parses values (YAML; empty text is the defaults).
pub fn values_from_str(text: &str) -> Result<InstallValues> {
    if text.trim().is_empty() {
        return Ok(InstallValues::default());
    }
    serde_yaml::from_str(text).map_err(|e| Error::InstallValues(e.to_string()))
}

/// `{enabled: bool}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toggle {
    /// On or off.
    #[serde(default)]
    pub enabled: bool,
}

/// `auxiliary.*`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auxiliary {
    /// `auxiliary.deployAPI`.
    #[serde(rename = "deployAPI", default)]
    pub deploy_api: Toggle,
    /// `auxiliary.escrowTLS`.
    #[serde(rename = "escrowTLS", default)]
    pub escrow_tls: EscrowTls,
}

/// `auxiliary.escrowTLS`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct EscrowTls {
    /// Whether the TLS listener :8443 runs.
    pub enabled: bool,
    /// The `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`) mounted for it.
    pub secret_name: String,
}

impl Default for EscrowTls {
    fn default() -> Self {
        Self {
            enabled: false,
            secret_name: "bloodraven-escrow-tls".to_string(),
        }
    }
}

/// The RBAC rules of the operator's ClusterRole (see the module table).
pub fn cluster_role_rules() -> Value {
    let all_write = ["get", "list", "watch", "create", "update", "patch"];
    json!([
        {"apiGroups": [names::GROUP], "resources": ["mysqlfailovergroups"], "verbs": ["get", "list", "watch", "patch", "update"]},
        {"apiGroups": [names::GROUP], "resources": ["mysqlfailovergroups/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": [names::GROUP], "resources": ["mysqldatabases"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["externaldns.k8s.io"], "resources": ["dnsendpoints"], "verbs": all_write},
        {"apiGroups": [""], "resources": ["services"], "verbs": all_write},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch", "delete"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": all_write},
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": all_write},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    ])
}

/// The container arguments for `values`.
pub fn operator_args(values: &InstallValues) -> Vec<String> {
    let mut args = vec![
        format!("--leader-election={}", values.leader_election.enabled),
        format!("--http-address=0.0.0.0:{}", names::PORT_OPERATOR_HTTP),
    ];
    if values.auxiliary.escrow_tls.enabled {
        args.push(format!(
            "--tls-address=0.0.0.0:{}",
            names::PORT_OPERATOR_TLS
        ));
        args.push(format!("--tls-cert={TLS_MOUNT_PATH}/tls.crt"));
        args.push(format!("--tls-key={TLS_MOUNT_PATH}/tls.key"));
    }
    if values.auxiliary.deploy_api.enabled {
        args.push("--deploy-api".to_string());
    }
    if let Some(template) = &values.sidecar_url_template {
        args.push(format!("--sidecar-url-template={template}"));
    }
    args
}

/// Name of the NetworkPolicy rendered in each group namespace.
pub const NETWORK_POLICY: &str = "bloodraven-mysql";

/// The labels of the operator's pods.
fn operator_labels() -> Value {
    json!({"app.kubernetes.io/name": names::OPERATOR_DEPLOYMENT, "app.kubernetes.io/component": "operator"})
}

/// The NetworkPolicy [`NETWORK_POLICY`] of `namespace`
/// (docs/design/history.md#issue-10-case-8). It selects every Bloodraven MySQL pod there
/// (labels `app.kubernetes.io/instance` and `shipstream.io/site` present) and admits, ingress
/// only:
///
/// - to the sidecar port 8086: the operator's pods (in `values.namespace`) and the MySQL
///   pods of the namespace (peers' lease requests);
/// - to MySQL 3306: the MySQL pods of the namespace (replication) and `values.networkPolicy.
///   mysqlFrom` (the applications).
///
/// Nothing else reaches those ports. The kubelet's probes come from the node, which
/// NetworkPolicy always admits. The policy is a second fence around the request signatures,
/// not a replacement: it is enforced only by a CNI that implements NetworkPolicy (Calico,
/// Cilium, kindnet since kind 0.24); localkube stores it and enforces nothing.
pub fn network_policy(values: &InstallValues, namespace: &str) -> Value {
    let mysql_pods = json!({"podSelector": {"matchExpressions": [
        {"key": names::LABEL_INSTANCE, "operator": "Exists"},
        {"key": names::LABEL_SITE, "operator": "Exists"},
    ]}});
    let operator_pods = json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": values.namespace}},
        "podSelector": {"matchLabels": operator_labels()},
    });
    let mut mysql_from = vec![mysql_pods.clone()];
    mysql_from.extend(values.network_policy.mysql_from.iter().cloned());
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": NETWORK_POLICY, "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": names::OPERATOR_DEPLOYMENT}},
        "spec": {
            "podSelector": mysql_pods["podSelector"],
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [operator_pods, mysql_pods],
                 "ports": [{"protocol": "TCP", "port": names::PORT_SIDECAR}]},
                {"from": mysql_from,
                 "ports": [{"protocol": "TCP", "port": names::PORT_MYSQL}]},
            ],
        }
    })
}

/// Every object of the install, in apply order: Namespace, ServiceAccount, ClusterRole,
/// ClusterRoleBinding, Service, Deployment, then per `networkPolicy.groupNamespaces` entry its
/// Namespace and [`network_policy`].
pub fn render(values: &InstallValues) -> Result<Vec<Value>> {
    if values.auxiliary.deploy_api.enabled && !values.auxiliary.escrow_tls.enabled {
        return Err(Error::InstallValues(
            "auxiliary.deployAPI.enabled needs auxiliary.escrowTLS.enabled: the deploy API is served only on the TLS listener :8443".into(),
        ));
    }
    if values.auxiliary.escrow_tls.enabled && values.auxiliary.escrow_tls.secret_name.is_empty() {
        return Err(Error::InstallValues(
            "auxiliary.escrowTLS.secretName must name the certificate Secret".into(),
        ));
    }
    if values.replica_count > 1 && !values.leader_election.enabled {
        return Err(Error::InstallValues(
            "replicaCount above 1 needs leaderElection.enabled: only one replica may write".into(),
        ));
    }
    let namespace = values.namespace.as_str();
    let name = names::OPERATOR_DEPLOYMENT;
    let labels = operator_labels();
    let mut ports = vec![json!({"name": "http", "containerPort": names::PORT_OPERATOR_HTTP})];
    let mut service_ports =
        vec![json!({"name": "http", "port": names::PORT_OPERATOR_HTTP, "targetPort": "http"})];
    let mut volumes = Vec::new();
    let mut mounts = Vec::new();
    if values.auxiliary.escrow_tls.enabled {
        ports.push(json!({"name": "https", "containerPort": names::PORT_OPERATOR_TLS}));
        service_ports.push(
            json!({"name": "https", "port": names::PORT_OPERATOR_TLS, "targetPort": "https"}),
        );
        volumes.push(json!({"name": "escrow-tls", "secret": {"secretName": values.auxiliary.escrow_tls.secret_name}}));
        mounts.push(json!({"name": "escrow-tls", "mountPath": TLS_MOUNT_PATH, "readOnly": true}));
    }
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": cluster_role_rules()}),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
        }),
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"selector": labels, "ports": service_ports}
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": values.replica_count,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": name,
                        "nodeSelector": (!values.node_selector.is_empty()).then_some(&values.node_selector),
                        "affinity": values.affinity,
                        "containers": [{
                            "name": "operator",
                            "image": values.image,
                            "imagePullPolicy": values.image_pull_policy,
                            "args": operator_args(values),
                            "env": [
                                {"name": "RUST_LOG", "value": values.log_level},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            ],
                            "ports": ports,
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5},
                            "volumeMounts": mounts,
                        }],
                        "volumes": volumes,
                    }
                }
            }
        }),
    ];
    if values.network_policy.enabled {
        for group_namespace in &values.network_policy.group_namespaces {
            objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": group_namespace}}));
            objects.push(network_policy(values, group_namespace));
        }
    }
    objects.iter_mut().for_each(strip_nulls);
    Ok(objects)
}

/// Removes `null` members (unset optional values) so the manifests carry only what is set.
fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, member| !member.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// [`render`] as one multi-document YAML text.
pub fn render_yaml(values: &InstallValues) -> Result<String> {
    let mut text = String::new();
    for object in render(values)? {
        text.push_str("---\n");
        text.push_str(&serde_yaml::to_string(&object)?);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
        objects
            .iter()
            .find(|object| object["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} rendered"))
    }

    /// docs/design/requirements.md R003.2: the deploy API needs escrowTLS: there is no
    /// plaintext fallback.
    #[test]
    fn seed_003_deploy_api_without_escrow_tls_is_refused() {
        let mut values = InstallValues::default();
        values.auxiliary.deploy_api.enabled = true;
        let error = render(&values)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("auxiliary.escrowTLS.enabled"), "{error}");
        values.auxiliary.escrow_tls.enabled = true;
        let objects = render(&values).expect("render");
        let deployment = find(&objects, "Deployment");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&"--deploy-api"), "{args:?}");
        assert!(
            args.contains(&"--tls-cert=/etc/bloodraven/tls/tls.crt"),
            "{args:?}"
        );
        assert_eq!(
            deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
            "bloodraven-escrow-tls"
        );
        let ports = &find(&objects, "Service")["spec"]["ports"];
        assert_eq!(ports[0]["port"], 8082);
        assert_eq!(ports[1]["port"], 8443);
    }

    /// docs/design/requirements.md R001.9: replicaCount 1 with leader election by default; more
    /// replicas are standbys, which needs leader election.
    #[test]
    fn seed_001_defaults_and_replica_count() {
        let values: InstallValues =
            serde_yaml::from_str("replicaCount: 3\nauxiliary: {escrowTLS: {enabled: false}}")
                .expect("values");
        assert!(values.leader_election.enabled);
        let objects = render(&values).expect("render");
        let deployment = find(&objects, "Deployment");
        assert_eq!(deployment["spec"]["replicas"], 3);
        assert_eq!(deployment["metadata"]["namespace"], "bloodraven");
        let ports = find(&objects, "Service")["spec"]["ports"]
            .as_array()
            .map(Vec::len);
        assert_eq!(ports, Some(1), "no :8443 without escrowTLS");
        let single = InstallValues {
            replica_count: 2,
            leader_election: Toggle { enabled: false },
            ..InstallValues::default()
        };
        assert!(render(&single).is_err());
        let text = render_yaml(&InstallValues::default()).expect("yaml");
        assert_eq!(text.matches("---\n").count(), 6);
    }

    /// Chaos scenario 38 (docs/design/requirements.md R000.16) denies exactly
    /// create/update/patch on dnsendpoints: the rule exists on its own and carries those verbs;
    /// tokenreviews create for the deploy API (docs/design/requirements.md R003.4).
    #[test]
    fn rbac_documents_the_verbs_the_operator_uses() {
        let rules = cluster_role_rules();
        let rule = |resource: &str| {
            rules
                .as_array()
                .into_iter()
                .flatten()
                .find(|rule| {
                    rule["resources"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|x| x == resource))
                })
                .cloned()
                .unwrap_or_else(|| panic!("no rule for {resource}"))
        };
        let dns = rule("dnsendpoints");
        assert_eq!(dns["apiGroups"], json!(["externaldns.k8s.io"]));
        assert_eq!(dns["resources"], json!(["dnsendpoints"]));
        for verb in ["create", "update", "patch", "get"] {
            assert!(
                dns["verbs"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|x| x == verb)),
                "{verb}"
            );
        }
        assert_eq!(rule("tokenreviews")["verbs"], json!(["create"]));
        assert!(rule("mysqlfailovergroups/status")["verbs"]
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == "patch")));
        assert!(rule("leases")["verbs"]
            .as_array()
            .is_some_and(|v| v.iter().any(|x| x == "update")));
    }

    /// docs/design/history.md#issue-10-case-8: in each group namespace the install renders a
    /// NetworkPolicy that admits 8086 only from the operator's pods and the MySQL pods, and
    /// 3306 from the MySQL pods and where applications run; nothing without group namespaces,
    /// nothing when off.
    #[test]
    fn case_8_network_policy_limits_who_reaches_the_sidecar() {
        use k8s_openapi::api::networking::v1::NetworkPolicy;
        assert!(
            render(&InstallValues::default())
                .expect("render")
                .iter()
                .all(|object| object["kind"] != "NetworkPolicy"),
            "no group namespace, no policy"
        );
        let values: InstallValues = serde_yaml::from_str(
            "networkPolicy: {groupNamespaces: [bloodraven-playground], mysqlFrom: [{podSelector: {matchLabels: {app: counter}}}]}",
        )
        .expect("values");
        let objects = render(&values).expect("render");
        let policy = find(&objects, "NetworkPolicy");
        let namespaces: Vec<&Value> = objects
            .iter()
            .filter(|object| object["kind"] == "Namespace")
            .map(|object| &object["metadata"]["name"])
            .collect();
        assert_eq!(
            namespaces,
            [&json!("bloodraven"), &json!("bloodraven-playground")]
        );
        let typed: NetworkPolicy = serde_json::from_value(policy.clone()).expect("a NetworkPolicy");
        assert_eq!(
            typed.metadata.namespace.as_deref(),
            Some("bloodraven-playground")
        );
        let spec = typed.spec.expect("spec");
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
        let selected: Vec<String> = spec
            .pod_selector
            .as_ref()
            .and_then(|s| s.match_expressions.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|e| format!("{} {}", e.key, e.operator))
            .collect();
        assert_eq!(
            selected,
            [
                "app.kubernetes.io/instance Exists",
                "shipstream.io/site Exists"
            ]
        );
        let rules = spec.ingress.expect("ingress");
        assert_eq!(rules.len(), 2);
        let port = |rule: &k8s_openapi::api::networking::v1::NetworkPolicyIngressRule| {
            rule.ports.as_ref().and_then(|p| p[0].port.clone())
        };
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        assert_eq!(port(&rules[0]), Some(IntOrString::Int(8086)));
        let sidecar_from = rules[0].from.clone().expect("from");
        assert_eq!(
            sidecar_from.len(),
            2,
            "the operator and the mysql pods, nobody else"
        );
        let operator = &sidecar_from[0];
        assert_eq!(
            operator
                .namespace_selector
                .as_ref()
                .and_then(|s| s.match_labels.as_ref())
                .and_then(|l| l.get("kubernetes.io/metadata.name"))
                .map(String::as_str),
            Some("bloodraven")
        );
        let deployment = find(&objects, "Deployment");
        let pod_labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(deployment["spec"]["template"]["metadata"]["labels"].clone())
                .expect("labels");
        assert_eq!(
            operator
                .pod_selector
                .as_ref()
                .and_then(|s| s.match_labels.clone()),
            Some(pod_labels),
            "selects exactly the operator's pods"
        );
        assert_eq!(sidecar_from[1].pod_selector, spec.pod_selector);
        assert_eq!(port(&rules[1]), Some(IntOrString::Int(3306)));
        let mysql_from = rules[1].from.clone().expect("from");
        assert_eq!(mysql_from.len(), 2, "replication, then the applications");
        assert_eq!(mysql_from[0].pod_selector, spec.pod_selector);
        assert_eq!(
            policy["spec"]["ingress"][1]["from"][1],
            json!({"podSelector": {"matchLabels": {"app": "counter"}}})
        );
        let off = InstallValues {
            network_policy: NetworkPolicyValues {
                enabled: false,
                ..values.network_policy.clone()
            },
            ..values
        };
        assert!(render(&off)
            .expect("render")
            .iter()
            .all(|object| object["kind"] != "NetworkPolicy"));
    }

    /// The playground's values render the policy for its namespace (the harness applies
    /// them).
    #[test]
    fn playground_values_render_the_network_policy() {
        // Read at run time (a binary reused from a target directory another checkout shares).
        let root = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
        let path =
            std::path::Path::new(&root).join("../../fixtures/playground/operator-values.yaml");
        let values = values_from_file(&path).expect("playground values");
        let objects = render(&values).expect("render");
        assert_eq!(
            find(&objects, "NetworkPolicy")["metadata"]["namespace"],
            names::PLAYGROUND_NAMESPACE
        );
    }
}
