//! `fieldValidation=Strict` for built-in kinds: the object is decoded into the typed
//! Kubernetes structs (k8s-openapi) and encoded again; fields that do not survive are
//! unknown, and values of the wrong type are rejected, as the real decoder does.

use super::error::ApiError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn diff(given: &Value, known: &Value, prefix: &str, out: &mut Vec<String>) {
    match (given, known) {
        (Value::Object(g), Value::Object(map)) => {
            for (key, value) in g {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                match map.get(key) {
                    Some(kv) => diff(value, kv, &path, out),
                    None if value.is_null() => {}
                    None => out.push(path),
                }
            }
        }
        (Value::Array(g), Value::Array(k)) => {
            for (index, (gv, kv)) in g.iter().zip(k.iter()).enumerate() {
                diff(gv, kv, &format!("{prefix}[{index}]"), out);
            }
        }
        _ => {}
    }
}

fn check<T: DeserializeOwned + Serialize>(obj: &Value, strict: bool) -> Result<(), ApiError> {
    let typed: T = serde_json::from_value(obj.clone())
        .map_err(|e| ApiError::bad_request(format!("failed to decode the object: {e}")))?;
    let back = serde_json::to_value(typed)
        .map_err(|error| ApiError::internal(format!("failed to encode the object: {error}")))?;
    if !strict {
        return Ok(());
    }
    let mut unknown = Vec::new();
    diff(obj, &back, "", &mut unknown);
    if unknown.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|user| format!("unknown field \"{user}\""))
        .collect();
    Err(ApiError::bad_request(format!(
        "strict decoding error: {}",
        list.join(", ")
    )))
}

/// Rejects unknown fields and mistyped values of a built-in kind (kinds not listed pass).
pub fn strict_builtin(group: &str, kind: &str, obj: &Value) -> Result<(), ApiError> {
    decode_builtin(group, kind, obj, true)
}

/// Rejects values of the wrong type for a built-in kind, as the real decoder always does;
/// with `strict`, also unknown fields.
pub fn decode_builtin(group: &str, kind: &str, obj: &Value, strict: bool) -> Result<(), ApiError> {
    use k8s_openapi::api::{
        apps::v1 as apps, batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
        discovery::v1 as disc, networking::v1 as net, rbac::v1 as rbac,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    match (group, kind) {
        ("", "Pod") => check::<core::Pod>(obj, strict),
        ("", "Service") => check::<core::Service>(obj, strict),
        ("", "ConfigMap") => check::<core::ConfigMap>(obj, strict),
        ("", "Secret") => check::<core::Secret>(obj, strict),
        ("", "Namespace") => check::<core::Namespace>(obj, strict),
        ("", "ServiceAccount") => check::<core::ServiceAccount>(obj, strict),
        ("", "Node") => check::<core::Node>(obj, strict),
        ("", "Endpoints") => check::<core::Endpoints>(obj, strict),
        ("", "PersistentVolumeClaim") => check::<core::PersistentVolumeClaim>(obj, strict),
        ("apps", "Deployment") => check::<apps::Deployment>(obj, strict),
        ("apps", "StatefulSet") => check::<apps::StatefulSet>(obj, strict),
        ("apps", "DaemonSet") => check::<apps::DaemonSet>(obj, strict),
        ("apps", "ReplicaSet") => check::<apps::ReplicaSet>(obj, strict),
        ("batch", "Job") => check::<batch::Job>(obj, strict),
        ("coordination.k8s.io", "Lease") => check::<coord::Lease>(obj, strict),
        ("discovery.k8s.io", "EndpointSlice") => check::<disc::EndpointSlice>(obj, strict),
        ("networking.k8s.io", "NetworkPolicy") => check::<net::NetworkPolicy>(obj, strict),
        ("rbac.authorization.k8s.io", "Role") => check::<rbac::Role>(obj, strict),
        ("rbac.authorization.k8s.io", "RoleBinding") => check::<rbac::RoleBinding>(obj, strict),
        ("rbac.authorization.k8s.io", "ClusterRole") => check::<rbac::ClusterRole>(obj, strict),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            check::<rbac::ClusterRoleBinding>(obj, strict)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            check::<ext::CustomResourceDefinition>(obj, strict)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Reason;
    use serde_json::json;

    #[test]
    fn strict_rejects_unknown_fields_and_accepts_known_ones() {
        let ok = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}});
        assert!(strict_builtin("", "ConfigMap", &ok).is_ok());
        let bad =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "dta": {}});
        let error = strict_builtin("", "ConfigMap", &bad).expect_err("unknown field");
        assert_eq!(error.reason, Reason::BadRequest);
        assert!(error.message.contains("unknown field \"dta\""));
        let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "1"}}}]}}}});
        assert!(strict_builtin("apps", "Deployment", &dep).is_ok());
    }
}
