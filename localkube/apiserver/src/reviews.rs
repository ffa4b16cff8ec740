//! Review endpoints: TokenReview, SubjectAccessReview, SelfSubjectAccessReview,
//! LocalSubjectAccessReview, SelfSubjectReview, SelfSubjectRulesReview, and TokenRequest.

use super::auth::{self, Attributes, UserInfo};
use super::cluster::Cluster;
use super::error::ApiError;
use super::meta;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// TokenReview (trap 12: audiences must intersect; bound tokens die with their pod).
pub fn token_review(cluster: &Cluster, body: &Value) -> Value {
    let token = meta::str_at(body, "/spec/token");
    let audiences = strings(body.pointer("/spec/audiences"));
    let status = match cluster.auth.authenticate(token, &audiences, &cluster.store) {
        Ok((user, aud)) => json!({"authenticated": true, "user": user.to_json(), "audiences": aud}),
        Err(error) => json!({"authenticated": false, "error": error}),
    };
    let mut out = body.clone();
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["kind"] = json!("TokenReview");
    out["status"] = status;
    out
}

fn attributes_of(spec: &Value, namespace_override: Option<&str>) -> Attributes {
    if let Some(resource_attributes) = spec.get("resourceAttributes") {
        let s = |key: &str| {
            resource_attributes
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Attributes {
            verb: s("verb"),
            resource_request: true,
            api_group: s("group"),
            resource: s("resource"),
            subresource: s("subresource"),
            namespace: namespace_override
                .map(String::from)
                .unwrap_or_else(|| s("namespace")),
            name: s("name"),
            path: String::new(),
        }
    } else {
        let non_resource_attributes = spec
            .get("nonResourceAttributes")
            .cloned()
            .unwrap_or(Value::Null);
        Attributes {
            verb: meta::str_at(&non_resource_attributes, "/verb").into(),
            resource_request: false,
            path: meta::str_at(&non_resource_attributes, "/path").into(),
            ..Default::default()
        }
    }
}

fn decide(cluster: &Cluster, user: &UserInfo, attributes: &Attributes) -> Value {
    if auth::authorize(&cluster.store, user, attributes) {
        json!({"allowed": true, "reason": if user.is_master() { "system:masters bypasses authorization" } else { "allowed by RBAC" }})
    } else {
        json!({"allowed": false})
    }
}

/// SubjectAccessReview (and LocalSubjectAccessReview in `namespace`).
pub fn subject_access_review(
    cluster: &Cluster,
    body: &Value,
    namespace: Option<&str>,
    kind: &str,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let user_name = meta::str_at(&spec, "/user").to_string();
    let groups = strings(spec.get("groups"));
    if user_name.is_empty() && groups.is_empty() {
        return Err(ApiError::invalid(
            "authorization.k8s.io",
            kind,
            "",
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    let extra: BTreeMap<String, Vec<String>> = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(key, value)| (key.clone(), strings(Some(value))))
                .collect()
        })
        .unwrap_or_default();
    let user = UserInfo {
        name: user_name,
        uid: meta::str_at(&spec, "/uid").into(),
        groups,
        extra,
    };
    let attributes = attributes_of(&spec, namespace);
    let mut out = body.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!(kind);
    out["status"] = decide(cluster, &user, &attributes);
    Ok(out)
}

/// SelfSubjectAccessReview (`kubectl auth can-i`).
pub fn self_subject_access_review(cluster: &Cluster, user: &UserInfo, body: &Value) -> Value {
    let spec = body.get("spec").cloned().unwrap_or(Value::Null);
    let attributes = attributes_of(&spec, None);
    let mut out = body.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SelfSubjectAccessReview");
    out["status"] = decide(cluster, user, &attributes);
    out
}

/// SelfSubjectReview (`kubectl auth whoami`).
pub fn self_subject_review(user: &UserInfo) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {"creationTimestamp": meta::now()},
        "status": {"userInfo": user.to_json()}})
}

/// SelfSubjectRulesReview (`kubectl auth can-i --list`).
pub fn self_subject_rules_review(cluster: &Cluster, user: &UserInfo, body: &Value) -> Value {
    let ns = meta::str_at(body, "/spec/namespace");
    let rules = auth::rules_for(&cluster.store, user, ns);
    let (res, nonres): (Vec<Value>, Vec<Value>) = rules
        .into_iter()
        .partition(|r| r.get("nonResourceURLs").is_none());
    let mut out = body.clone();
    out["apiVersion"] = json!("authorization.k8s.io/v1");
    out["kind"] = json!("SelfSubjectRulesReview");
    let mut res = res;
    if user.is_master() {
        res.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
    }
    out["status"] = json!({"resourceRules": res, "nonResourceRules": nonres, "incomplete": false});
    out
}

/// TokenRequest on `serviceaccounts/<name>/token`.
pub fn token_request(
    cluster: &Cluster,
    ns: &str,
    sa_name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let sa = cluster
        .store
        .get("/serviceaccounts", ns, sa_name)
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", sa_name))?;
    let mut audiences = strings(body.pointer("/spec/audiences"));
    if audiences.is_empty() {
        audiences = cluster.auth.api_audiences.clone();
    }
    let expiration = body
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    if expiration < 600 {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            sa_name,
            "spec.expirationSeconds",
            "Invalid value: may not specify a duration less than 10 minutes",
        ));
    }
    let bound = body
        .pointer("/spec/boundObjectRef")
        .filter(|b| b.is_object());
    let bound_info = match bound {
        None => None,
        Some(b) => {
            let kind = meta::str_at(b, "/kind");
            let name = meta::str_at(b, "/name");
            let key = match kind {
                "Pod" => "/pods",
                "Secret" => "/secrets",
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "cannot bind token for object of kind {kind:?}"
                    )))
                }
            };
            let obj = cluster
                .store
                .get(key, ns, name)
                .ok_or_else(|| ApiError::not_found("", &key[1..], name))?;
            let uid = meta::str_at(b, "/uid");
            if !uid.is_empty() && uid != meta::uid_of(&obj) {
                return Err(ApiError::conflict_message(format!(
                    "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                )));
            }
            Some((
                kind.to_string(),
                name.to_string(),
                meta::uid_of(&obj).to_string(),
            ))
        }
    };
    let (token, exp) = cluster
        .auth
        .issue(
            ns,
            sa_name,
            meta::uid_of(&sa),
            &audiences,
            expiration,
            bound_info
                .as_ref()
                .map(|(k, n, user)| (k.as_str(), n.as_str(), user.as_str())),
        )
        .map_err(|error| ApiError::internal(format!("failed to sign the token: {error}")))?;
    let exp_time = jiff::Timestamp::from_second(exp)
        .map(meta::time)
        .unwrap_or_default();
    let mut out = body.clone();
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["kind"] = json!("TokenRequest");
    out["metadata"] = json!({"name": sa_name, "namespace": ns, "creationTimestamp": meta::now()});
    out["spec"]["audiences"] = json!(audiences);
    out["spec"]["expirationSeconds"] = json!(expiration);
    out["status"] = json!({"token": token, "expirationTimestamp": exp_time});
    Ok(out)
}
