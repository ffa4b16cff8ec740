//! Authentication (x509 client certificates of the cluster CA, see `tls`; the admin bearer
//! token; ServiceAccount JWTs with audiences, expiry and object binding, trap 12) and RBAC
//! authorization (allow-only, trap 11).

use super::error::{ApiError, Error, Result};
use super::meta;
use super::selector::LabelSelector;
use super::store::Store;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The group that bypasses authorization.
pub const MASTERS: &str = "system:masters";
/// The issuer of ServiceAccount tokens.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// User uid.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Whether the user is in `system:masters`.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|group| group == MASTERS)
    }
    /// The user of a ServiceAccount, with the standard groups.
    pub fn service_account(ns: &str, name: &str, uid: &str) -> UserInfo {
        UserInfo {
            name: format!("system:serviceaccount:{ns}:{name}"),
            uid: uid.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
            extra: BTreeMap::new(),
        }
    }
    /// The `UserInfo` JSON of reviews.
    pub fn to_json(&self) -> Value {
        let mut value = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            value["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            value["extra"] = json!(self.extra);
        }
        value
    }
}

/// What a connection's TLS client certificate says about the client.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ClientCertificate {
    /// No client certificate was sent.
    #[default]
    None,
    /// A certificate of the cluster CA, valid now: its user (CN) and groups (O).
    Valid(UserInfo),
    /// A certificate that does not authenticate (expired, another CA, no CN): why.
    Invalid(String),
}

/// The user of a client certificate, as kube-apiserver's x509 authenticator maps it: the
/// subject's CN is the user name, each O a group, plus `system:authenticated`.
pub fn user_from_certificate(der: &[u8]) -> std::result::Result<UserInfo, String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|error| format!("parse the client certificate: {error}"))?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err("common name of client cert is empty".into());
    }
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|attribute_type_and_value| {
            attribute_type_and_value.as_str().ok().map(String::from)
        })
        .collect();
    groups.push("system:authenticated".into());
    Ok(UserInfo {
        name,
        uid: String::new(),
        groups,
        extra: BTreeMap::new(),
    })
}

/// Validates and issues bearer tokens.
#[derive(Clone)]
pub struct Authenticator {
    admin_token: String,
    key: Vec<u8>,
    /// Audiences of the API server itself.
    pub api_audiences: Vec<String>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Authenticator")
            .field("api_audiences", &self.api_audiences)
            .finish()
    }
}

fn read_or_create(path: &Path, make: impl FnOnce() -> String) -> Result<String> {
    if path.exists() {
        return std::fs::read_to_string(path)
            .map(|text| text.trim().to_string())
            .map_err(|e| Error::io(path, e));
    }
    let value = make();
    std::fs::write(path, &value).map_err(|error| Error::io(path, error))?;
    Ok(value)
}

fn random_hex(bytes: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..bytes)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

impl Authenticator {
    /// Loads (or creates) the admin token and the signing key in `dir`.
    pub fn load(dir: &Path) -> Result<Authenticator> {
        let admin_token = read_or_create(&dir.join("admin-token"), || random_hex(32))?;
        let key = read_or_create(&dir.join("sa-signing-key"), || random_hex(32))?;
        Ok(Authenticator {
            admin_token,
            key: key.into_bytes(),
            api_audiences: vec![ISSUER.to_string()],
        })
    }

    /// The admin bearer token (user `admin` in `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Issues a ServiceAccount token. `bound` is (kind, name, uid) of a Pod or Secret.
    pub fn issue(
        &self,
        ns: &str,
        sa: &str,
        sa_uid: &str,
        audiences: &[String],
        expiration_seconds: i64,
        bound: Option<(&str, &str, &str)>,
    ) -> Result<(String, i64)> {
        let now = jiff::Timestamp::now().as_second();
        let exp = now + expiration_seconds;
        let mut k8s = json!({"namespace": ns, "serviceaccount": {"name": sa, "uid": sa_uid}});
        if let Some((kind, name, uid)) = bound {
            k8s[kind.to_lowercase()] = json!({"name": name, "uid": uid});
        }
        let claims = json!({"aud": audiences, "exp": exp, "iat": now, "nbf": now, "iss": ISSUER, "jti": meta::uid(),
            "sub": format!("system:serviceaccount:{ns}:{sa}"), "kubernetes.io": k8s});
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&self.key),
        )?;
        Ok((token, exp))
    }

    /// Issues a non-expiring legacy token for a `kubernetes.io/service-account-token` Secret.
    pub fn issue_legacy(&self, ns: &str, sa: &str, sa_uid: &str, secret: &str) -> Result<String> {
        let claims = json!({"iss": "kubernetes/serviceaccount", "sub": format!("system:serviceaccount:{ns}:{sa}"),
            "kubernetes.io/serviceaccount/namespace": ns, "kubernetes.io/serviceaccount/secret.name": secret,
            "kubernetes.io/serviceaccount/service-account.name": sa, "kubernetes.io/serviceaccount/service-account.uid": sa_uid});
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&self.key),
        )?)
    }

    /// Authenticates a bearer token for `audiences` (empty: the API server's). Returns the
    /// user and the audiences the token is valid for, or why it is not valid.
    pub fn authenticate(
        &self,
        token: &str,
        audiences: &[String],
        store: &Store,
    ) -> std::result::Result<(UserInfo, Vec<String>), String> {
        let wanted: Vec<String> = if audiences.is_empty() {
            self.api_audiences.clone()
        } else {
            audiences.to_vec()
        };
        if !self.admin_token.is_empty() && token == self.admin_token {
            let user = UserInfo {
                name: "admin".into(),
                uid: String::new(),
                groups: vec![MASTERS.into(), "system:authenticated".into()],
                extra: BTreeMap::new(),
            };
            return Ok((user, wanted));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        validation.leeway = 0;
        let data =
            jsonwebtoken::decode::<Value>(token, &DecodingKey::from_secret(&self.key), &validation)
                .map_err(|error| format!("invalid bearer token: {error}"))?;
        let claims = data.claims;
        if claims.get("iss").and_then(Value::as_str) == Some("kubernetes/serviceaccount") {
            return self.authenticate_legacy(&claims, &wanted, store);
        }
        self.authenticate_bound(&claims, &wanted, store)
    }

    /// A legacy token (of a `kubernetes.io/service-account-token` Secret): valid while its
    /// Secret and ServiceAccount exist, for the API server's audiences only.
    fn authenticate_legacy(
        &self,
        claims: &Value,
        wanted: &[String],
        store: &Store,
    ) -> std::result::Result<(UserInfo, Vec<String>), String> {
        let claim = |key: &str| {
            claims
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let namespace = claim("kubernetes.io/serviceaccount/namespace");
        let secret = store
            .get(
                "/secrets",
                &namespace,
                &claim("kubernetes.io/serviceaccount/secret.name"),
            )
            .ok_or("token has been invalidated")?;
        if meta::str_at(
            &secret,
            "/metadata/annotations/kubernetes.io~1service-account.uid",
        ) != claim("kubernetes.io/serviceaccount/service-account.uid")
        {
            return Err("token has been invalidated".into());
        }
        let account_name = claim("kubernetes.io/serviceaccount/service-account.name");
        let account = store
            .get("/serviceaccounts", &namespace, &account_name)
            .ok_or("service account has been deleted")?;
        let intersection: Vec<String> = wanted
            .iter()
            .filter(|audience| self.api_audiences.contains(audience))
            .cloned()
            .collect();
        if intersection.is_empty() {
            return Err("token audiences do not intersect".into());
        }
        Ok((
            UserInfo::service_account(&namespace, &account_name, meta::uid_of(&account)),
            intersection,
        ))
    }

    /// A bound token (TokenRequest): valid for its audiences while its ServiceAccount and
    /// the Pod or Secret it is bound to exist with the same uids.
    fn authenticate_bound(
        &self,
        claims: &Value,
        wanted: &[String],
        store: &Store,
    ) -> std::result::Result<(UserInfo, Vec<String>), String> {
        let token_audiences: Vec<String> = match claims.get("aud") {
            Some(Value::String(audience)) => vec![audience.clone()],
            Some(Value::Array(audiences)) => audiences
                .iter()
                .filter_map(|audience| audience.as_str().map(String::from))
                .collect(),
            _ => vec![],
        };
        let intersection: Vec<String> = wanted
            .iter()
            .filter(|audience| token_audiences.contains(audience))
            .cloned()
            .collect();
        if intersection.is_empty() {
            return Err("token audiences is invalid for the target audiences".into());
        }
        let kubernetes = claims.get("kubernetes.io").cloned().unwrap_or(Value::Null);
        let namespace = meta::str_at(&kubernetes, "/namespace").to_string();
        let account_name = meta::str_at(&kubernetes, "/serviceaccount/name").to_string();
        let account_uid = meta::str_at(&kubernetes, "/serviceaccount/uid").to_string();
        let account = store
            .get("/serviceaccounts", &namespace, &account_name)
            .ok_or_else(|| {
                format!("service account {namespace}/{account_name} has been deleted")
            })?;
        if meta::uid_of(&account) != account_uid {
            return Err("service account uid does not match".into());
        }
        let mut user = UserInfo::service_account(&namespace, &account_name, &account_uid);
        for (kind, key) in [("pod", "/pods"), ("secret", "/secrets")] {
            let Some(bound) = kubernetes.get(kind) else {
                continue;
            };
            let (name, uid) = check_bound_object(store, kind, key, &namespace, bound)?;
            if kind == "pod" {
                user.extra.insert(
                    "authentication.kubernetes.io/pod-name".into(),
                    vec![name.into()],
                );
                user.extra.insert(
                    "authentication.kubernetes.io/pod-uid".into(),
                    vec![uid.into()],
                );
            }
        }
        if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
            user.extra.insert(
                "authentication.kubernetes.io/credential-id".into(),
                vec![format!("JTI={jti}")],
            );
        }
        Ok((user, intersection))
    }
}

/// The object a token is bound to (`bound`: its claim, name and uid) exists in `namespace`
/// with that uid and is not being deleted; returns its name and uid.
fn check_bound_object<'a>(
    store: &Store,
    kind: &str,
    key: &str,
    namespace: &str,
    bound: &'a Value,
) -> std::result::Result<(&'a str, &'a str), String> {
    let name = meta::str_at(bound, "/name");
    let uid = meta::str_at(bound, "/uid");
    let object = store
        .get(key, namespace, name)
        .ok_or_else(|| format!("{kind} {namespace}/{name} has been deleted"))?;
    if meta::uid_of(&object) != uid {
        return Err(format!("{kind} {namespace}/{name} uid does not match"));
    }
    if let Some(deletion) = object
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(meta::parse_time)
    {
        if deletion <= jiff::Timestamp::now() {
            return Err(format!("{kind} {namespace}/{name} is being deleted"));
        }
    }
    Ok((name, uid))
}

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attributes {
    /// The verb (get, list, watch, create, update, patch, delete, deletecollection, ...).
    pub verb: String,
    /// Whether this is a resource request.
    pub resource_request: bool,
    /// API group.
    pub api_group: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Path of a non-resource request.
    pub path: String,
}

impl Attributes {
    /// The Forbidden error for these attributes.
    pub fn forbidden(&self, user: &UserInfo) -> ApiError {
        if !self.resource_request {
            return ApiError::forbidden(format!(
                "forbidden: User \"{}\" cannot {} path \"{}\"",
                user.name, self.verb, self.path
            ));
        }
        let res = if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        let what = if self.name.is_empty() {
            res.clone()
        } else {
            format!("{res} \"{}\"", self.name)
        };
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", self.namespace)
        };
        let mut error = ApiError::forbidden(format!(
            "{what} is forbidden: User \"{}\" cannot {} resource \"{res}\" in API group \"{}\" {scope}",
            user.name, self.verb, self.api_group
        ));
        error.details =
            Some(json!({"name": self.name, "group": self.api_group, "kind": self.resource}));
        error
    }
}

fn has(list: Option<&Value>, want: &str) -> bool {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .any(|value| value.as_str() == Some("*") || value.as_str() == Some(want))
        })
        .unwrap_or(false)
}

fn rule_allows(rule: &Value, attributes: &Attributes) -> bool {
    if !has(rule.get("verbs"), &attributes.verb) {
        return false;
    }
    if !attributes.resource_request {
        return rule
            .get("nonResourceURLs")
            .and_then(Value::as_array)
            .map(|urls| {
                urls.iter().filter_map(Value::as_str).any(|url| {
                    url == "*"
                        || url == attributes.path
                        || (url.ends_with('*')
                            && attributes.path.starts_with(&url[..url.len() - 1]))
                })
            })
            .unwrap_or(false);
    }
    if !has(rule.get("apiGroups"), &attributes.api_group) {
        return false;
    }
    let resources = rule
        .get("resources")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let res_ok = resources.iter().filter_map(Value::as_str).any(|resource| {
        if attributes.subresource.is_empty() {
            resource == "*" || resource == attributes.resource
        } else {
            resource == "*"
                || resource == format!("{}/{}", attributes.resource, attributes.subresource)
                || resource == format!("*/{}", attributes.subresource)
        }
    });
    if !res_ok {
        return false;
    }
    match rule.get("resourceNames").and_then(Value::as_array) {
        Some(names) if !names.is_empty() => {
            !attributes.name.is_empty()
                && names
                    .iter()
                    .any(|name| name.as_str() == Some(attributes.name.as_str()))
        }
        _ => true,
    }
}

fn subject_matches(s: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let name = meta::str_at(s, "/name");
    match meta::str_at(s, "/kind") {
        "User" => name == user.name,
        "Group" => user.groups.iter().any(|group| group == name),
        "ServiceAccount" => {
            let ns = s
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn cluster_role_rules(store: &Store, name: &str) -> Vec<Value> {
    let Some(role) = store.get("rbac.authorization.k8s.io/clusterroles", "", name) else {
        return vec![];
    };
    let mut rules: Vec<Value> = role
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(selectors) = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    {
        let (all, _) = store.list("rbac.authorization.k8s.io/clusterroles", None);
        for sel in selectors {
            let sel = LabelSelector::from_object(sel);
            for r in all
                .iter()
                .filter(|r| meta::name(r) != name && sel.matches(r))
            {
                rules.extend(
                    r.get("rules")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
        }
    }
    rules
}

/// Rules that apply to `user` in `namespace` (cluster-wide rules included).
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let mut rules = Vec::new();
    let (crbs, _) = store.list("rbac.authorization.k8s.io/clusterrolebindings", None);
    for binding in &crbs {
        if binding
            .get("subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|s| subject_matches(s, user, ""))
        {
            rules.extend(cluster_role_rules(
                store,
                meta::str_at(binding, "/roleRef/name"),
            ));
        }
    }
    if !namespace.is_empty() {
        let (rbs, _) = store.list("rbac.authorization.k8s.io/rolebindings", Some(namespace));
        for b in &rbs {
            if !b
                .get("subjects")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|s| subject_matches(s, user, namespace))
            {
                continue;
            }
            let role_name = meta::str_at(b, "/roleRef/name");
            match meta::str_at(b, "/roleRef/kind") {
                "ClusterRole" => rules.extend(cluster_role_rules(store, role_name)),
                _ => {
                    if let Some(r) =
                        store.get("rbac.authorization.k8s.io/roles", namespace, role_name)
                    {
                        rules.extend(
                            r.get("rules")
                                .and_then(Value::as_array)
                                .cloned()
                                .unwrap_or_default(),
                        );
                    }
                }
            }
        }
    }
    rules
}

/// Whether RBAC allows the request (reads the current roles: changes apply to the next
/// request). `system:masters` bypasses.
pub fn authorize(store: &Store, user: &UserInfo, attributes: &Attributes) -> bool {
    if user.is_master() {
        return true;
    }
    rules_for(store, user, &attributes.namespace)
        .iter()
        .any(|r| rule_allows(r, attributes))
}

/// The verbs of the bootstrap read-only roles.
const READ_VERBS: &[&str] = &["get", "list", "watch"];
/// The verbs of the bootstrap read-write roles.
const WRITE_VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
/// The API groups `view`, `edit` and `admin` cover.
const WORKLOAD_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "discovery.k8s.io",
    "coordination.k8s.io",
    "events.k8s.io",
    "policy",
];
/// The resources `view`, `edit` and `admin` cover (secrets apart).
const WORKLOAD_RESOURCES: &[&str] = &[
    "pods",
    "pods/log",
    "pods/status",
    "services",
    "endpoints",
    "configmaps",
    "serviceaccounts",
    "events",
    "persistentvolumeclaims",
    "deployments",
    "deployments/scale",
    "deployments/status",
    "replicasets",
    "replicasets/scale",
    "statefulsets",
    "statefulsets/scale",
    "statefulsets/status",
    "daemonsets",
    "daemonsets/status",
    "endpointslices",
    "leases",
    "poddisruptionbudgets",
    "controllerrevisions",
    "jobs",
    "jobs/status",
];
/// The bootstrap ClusterRoleBindings: each binds the ClusterRole of its own name to a group.
const BOOTSTRAP_BINDINGS: &[(&str, &str)] = &[
    ("cluster-admin", MASTERS),
    ("system:discovery", "system:authenticated"),
    ("system:basic-user", "system:authenticated"),
    ("system:public-info-viewer", "system:authenticated"),
];

/// The bootstrap ClusterRoles.
fn bootstrap_roles() -> Vec<(&'static str, Value)> {
    let role = |name: &str, rules: Value| {
        (
            "rbac.authorization.k8s.io/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules}),
        )
    };
    vec![
        role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        role(
            "view",
            json!([{"apiGroups": WORKLOAD_GROUPS, "resources": WORKLOAD_RESOURCES, "verbs": READ_VERBS}]),
        ),
        role(
            "edit",
            json!([{"apiGroups": WORKLOAD_GROUPS, "resources": WORKLOAD_RESOURCES, "verbs": WRITE_VERBS}, {"apiGroups": [""], "resources": ["secrets"], "verbs": WRITE_VERBS}]),
        ),
        role(
            "admin",
            json!([{"apiGroups": WORKLOAD_GROUPS, "resources": WORKLOAD_RESOURCES, "verbs": WRITE_VERBS}, {"apiGroups": [""], "resources": ["secrets"], "verbs": WRITE_VERBS},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": WRITE_VERBS}]),
        ),
        role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/", "/healthz", "/readyz", "/livez"], "verbs": ["get"]}]),
        ),
        role(
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
        ),
        role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
    ]
}

/// The bootstrap ClusterRoles and ClusterRoleBindings.
pub fn bootstrap_rbac() -> Vec<(&'static str, Value)> {
    let binding = |name: &str, group: &str| {
        (
            "rbac.authorization.k8s.io/clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}),
        )
    };
    let mut objects = bootstrap_roles();
    objects.extend(
        BOOTSTRAP_BINDINGS
            .iter()
            .map(|(name, group)| binding(name, group)),
    );
    objects
}
