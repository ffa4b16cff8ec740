//! What is special per kind, in one place: the rules the verbs ([`super::ops`]) apply to
//! some built-in kinds on top of the generic ones. Every other kind, and every custom
//! resource, follows the generic rules only.
//!
//! | kind | create | update | delete |
//! |------|--------|--------|--------|
//! | Service | clusterIP and nodePorts allocated | clusterIP(s) kept when left out | |
//! | Namespace | | `spec.finalizers` kept but through `finalize`; the main resource writes the status too | `spec.finalizers` hold it; phase Terminating |
//! | Secret | `stringData` merged into `data` | the same | |
//! | Pod | | defaults kept; the spec immutable but for images, deadlines, added tolerations | graceful while a node agent runs it; answers the pod |
//! | CustomResourceDefinition | CEL rules compile; status (names accepted, established); served | the same again on main-resource writes; served again | no longer served, its objects deleted |
//! | Job | validated | validated | orphans its pods by default |
//! | Endpoints | | an update of a missing object creates it | |
//! | Role, RoleBinding, APIService | names need not be DNS subdomains | | |
//!
//! Most rules match the group and the kind. Those marked "by kind name" below match the
//! kind's name alone, as they always have: a custom resource of a kind with such a name gets
//! them too.

use super::batch;
use super::cluster::{Cluster, DeleteOptions};
use super::defaults;
use super::error::ApiError;
use super::meta;
use super::meta::strings_at;
use super::registry::{ResourceInfo, Subresource};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::{LockResult, MutexGuard};

/// The NodePort range (the real default).
const NODE_PORT_MIN: i64 = 30000;
/// Last port of the NodePort range.
const NODE_PORT_MAX: i64 = 32767;

/// Kind-specific defaulting and validation of a new object, after the generic steps.
pub(crate) fn prepare_create(
    cluster: &Cluster,
    resource: &ResourceInfo,
    obj: &mut Value,
) -> Result<(), ApiError> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Secret") => defaults::merge_secret_string_data(obj),
        // The caller holds the allocation lock until the Service is stored ([`store_lock`]).
        ("", "Service") => allocate_cluster_ip(cluster, obj)?,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crate::crd_validation::crd::check(obj)?;
            crd_status(obj)
        }
        ("batch", "Job") => batch::validate_job(None, obj)?,
        _ => {}
    }
    Ok(())
}

/// Kind-specific rules of an update (through `sub`) from `old` to `new`, after the generic
/// steps.
pub(crate) fn prepare_update(
    resource: &ResourceInfo,
    old: &Value,
    new: &mut Value,
    sub: Option<Subresource>,
) -> Result<(), ApiError> {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Service") => keep_cluster_ips(old, new),
        ("", "Namespace") if sub != Some(Subresource::Finalize) => {
            if let Some(finalizers) = old.pointer("/spec/finalizers") {
                new["spec"]["finalizers"] = finalizers.clone();
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") if sub.is_none() => {
            crate::crd_validation::crd::check(new)?;
            crd_status(new)
        }
        ("", "Pod") if sub.is_none() => {
            defaults::pod_update_defaults(old, new);
            check_pod_update(old, new)?
        }
        ("", "Secret") => defaults::merge_secret_string_data(new),
        ("batch", "Job") if sub.is_none() => batch::validate_job(Some(old), new)?,
        _ => {}
    }
    Ok(())
}

/// Whether `name` is a valid name for a new object of `r`: a DNS subdomain, except that
/// APIServices are named `<version>.<group>` (`v1.` for the core group; the real server asks
/// only for a valid path segment there) and RBAC roles and bindings (by kind name) may use
/// any path segment.
pub(crate) fn valid_name(resource: &ResourceInfo, name: &str) -> bool {
    let api_service = resource.kind == "APIService" && !name.contains('/') && name.contains('.');
    meta::valid_subdomain(name)
        || api_service
        || resource.kind.ends_with("Role")
        || resource.kind.ends_with("RoleBinding")
}

/// Whether writes to the main resource keep the stored status, the status subresource
/// owning it. A Namespace (by kind name) has a status subresource, yet its main resource
/// writes its status too.
pub(crate) fn status_subresource_owns_status(resource: &ResourceInfo) -> bool {
    resource.has_subresource(Subresource::Status) && resource.kind != "Namespace"
}

/// The lock a create of `r` holds from the allocation of its addresses until it is stored:
/// Services (by kind name), whose cluster IPs are allocated from what is stored.
pub(crate) fn store_lock<'a>(
    cluster: &'a Cluster,
    resource: &ResourceInfo,
) -> Option<LockResult<MutexGuard<'a, ()>>> {
    (resource.kind == "Service").then(|| cluster.lock_allocations())
}

/// After an object of `r` is stored: a CustomResourceDefinition (by kind name) is served
/// as it now is.
pub(crate) fn after_store(cluster: &Cluster, resource: &ResourceInfo, stored: &Value) {
    if resource.kind == "CustomResourceDefinition" {
        cluster.registry.register_crd(stored);
    }
}

/// After an object of `r` is deleted: a CustomResourceDefinition (by kind name) is no
/// longer served and its objects are deleted.
pub(crate) fn after_delete(cluster: &Cluster, resource: &ResourceInfo, gone: &Value) {
    if resource.kind == "CustomResourceDefinition" {
        let crd_name = meta::name(gone);
        let key = format!(
            "{}/{}",
            meta::str_at(gone, "/spec/group"),
            meta::str_at(gone, "/spec/names/plural")
        );
        cluster.registry.unregister_crd(crd_name);
        let (items, _) = cluster.store.list(&key, None);
        for item in items {
            let _ = cluster
                .store
                .delete(&key, meta::namespace(&item), meta::name(&item), None);
        }
    }
}

/// Whether an update of a missing object creates it: Endpoints (by kind name) through the
/// main resource.
pub(crate) fn update_creates(resource: &ResourceInfo, sub: Option<Subresource>) -> bool {
    resource.kind == "Endpoints" && sub.is_none()
}

/// The default propagation when none is given (the kind's strategy default): `batch/v1`
/// Jobs orphan their pods (kubectl sends Background), everything else is Background.
pub(crate) fn default_propagation(resource: &ResourceInfo) -> &'static str {
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("batch", "Job") => "Orphan",
        _ => "Background",
    }
}

/// Finalizers of the kind's own that hold a deleted object: a Namespace's
/// `spec.finalizers`.
pub(crate) fn kind_finalizers<'a>(resource: &ResourceInfo, obj: &'a Value) -> Vec<&'a str> {
    if resource.kind == "Namespace" && resource.group.is_empty() {
        strings_at(obj, "/spec/finalizers")
    } else {
        vec![]
    }
}

/// Whether deleting `old` is graceful: a pod a node agent runs, not finished, with a
/// grace period; the agent stops it and then finishes the delete.
pub(crate) fn graceful_delete(
    cluster: &Cluster,
    resource: &ResourceInfo,
    old: &Value,
    options: &DeleteOptions,
) -> bool {
    resource.kind == "Pod"
        && resource.group.is_empty()
        && cluster.node_agent_attached.load(Ordering::SeqCst)
        && !meta::str_at(old, "/spec/nodeName").is_empty()
        && !matches!(meta::str_at(old, "/status/phase"), "Succeeded" | "Failed")
        && options.grace_period_seconds.unwrap_or(1) > 0
}

/// What a delete that set the deletion timestamp changes besides: a Namespace is
/// Terminating.
pub(crate) fn mark_deleting(resource: &ResourceInfo, new: &mut Value) {
    if resource.kind == "Namespace" && resource.group.is_empty() {
        new["status"]["phase"] = json!("Terminating");
    }
}

/// Whether a delete that removed the object at once answers with the object (a Pod, by
/// kind name) rather than a Status.
pub(crate) fn delete_answers_object(resource: &ResourceInfo) -> bool {
    resource.kind == "Pod"
}

/// A Service's cluster IP(s) (none for a headless or ExternalName Service) and, for
/// NodePort and LoadBalancer Services, node ports: the requested ones when free and in
/// range, else the first free ones.
fn allocate_cluster_ip(cluster: &Cluster, obj: &mut Value) -> Result<(), ApiError> {
    let headless = obj.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None");
    let svc_type = meta::str_at(obj, "/spec/type").to_string();
    if headless || svc_type == "ExternalName" {
        if headless {
            obj["spec"]["clusterIPs"] = json!(["None"]);
        }
        return Ok(());
    }
    let (services, _) = cluster.store.list("/services", None);
    let used: HashSet<Ipv4Addr> = services
        .iter()
        .filter_map(|s| meta::str_at(s, "/spec/clusterIP").parse().ok())
        .collect();
    let requested = meta::str_at(obj, "/spec/clusterIP").to_string();
    let ip = if requested.is_empty() {
        cluster
            .service_range
            .allocate(&used)
            .ok_or_else(|| ApiError::internal("failed to allocate a serviceIP: range is full"))?
    } else {
        let ip: Ipv4Addr = requested.parse().map_err(|_| {
            ApiError::invalid(
                "",
                "Service",
                meta::name(obj),
                "spec.clusterIPs",
                format!("Invalid value: {requested:?}: must be a valid IP address"),
            )
        })?;
        if !cluster.service_range.contains(ip) || used.contains(&ip) {
            return Err(ApiError::invalid(
                "",
                "Service",
                meta::name(obj),
                "spec.clusterIPs",
                format!("Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: provided IP is already allocated or not in the valid range"),
            ));
        }
        ip
    };
    obj["spec"]["clusterIP"] = json!(ip.to_string());
    obj["spec"]["clusterIPs"] = json!([ip.to_string()]);
    if matches!(svc_type.as_str(), "NodePort" | "LoadBalancer") {
        allocate_node_ports(&services, obj)?;
    }
    Ok(())
}

/// A node port for each port of `obj` without one, the first not used by `services`.
fn allocate_node_ports(services: &[Value], obj: &mut Value) -> Result<(), ApiError> {
    let mut used_ports: HashSet<i64> = services
        .iter()
        .flat_map(|s| {
            s.pointer("/spec/ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .collect();
    if let Some(ports) = obj.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
        for port in ports {
            if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                continue;
            }
            let free = (NODE_PORT_MIN..=NODE_PORT_MAX)
                .find(|count| !used_ports.contains(count))
                .ok_or_else(|| {
                    ApiError::internal("failed to allocate a nodePort: range is full")
                })?;
            used_ports.insert(free);
            port["nodePort"] = json!(free);
        }
    }
    Ok(())
}

/// An update that leaves a Service's `clusterIP` or `clusterIPs` out (or null) keeps the
/// stored ones.
fn keep_cluster_ips(old: &Value, new: &mut Value) {
    for key in ["clusterIP", "clusterIPs"] {
        if let Some(value) = old.pointer(&format!("/spec/{key}")) {
            if new
                .get("spec")
                .map(|s| s.get(key).map(Value::is_null).unwrap_or(true))
                .unwrap_or(false)
            {
                new["spec"][key] = value.clone();
            }
        }
    }
}

/// Pod specs are immutable but for images, activeDeadlineSeconds, added tolerations and
/// terminationGracePeriodSeconds; the node is set once, through binding (422 otherwise).
fn check_pod_update(old: &Value, new: &Value) -> Result<(), ApiError> {
    let strip = |spec: Option<&Value>, keep_tolerations: Option<&Value>| -> Value {
        let mut s = spec.cloned().unwrap_or(Value::Null);
        if let Some(m) = s.as_object_mut() {
            m.remove("activeDeadlineSeconds");
            m.remove("terminationGracePeriodSeconds");
            if let Some(t) = keep_tolerations {
                m.insert("tolerations".into(), t.clone());
            }
            for key in ["containers", "initContainers"] {
                if let Some(cs) = m.get_mut(key).and_then(Value::as_array_mut) {
                    for container in cs {
                        if let Some(cm) = container.as_object_mut() {
                            cm.remove("image");
                        }
                    }
                }
            }
        }
        s
    };
    let old_tol: Vec<Value> = old
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let new_tol: Vec<Value> = new
        .pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let additions_only = old_tol.iter().all(|t| new_tol.contains(t));
    let before = strip(old.get("spec"), None);
    let after = strip(
        new.get("spec"),
        if additions_only {
            old.pointer("/spec/tolerations")
        } else {
            None
        },
    );
    let mut before_cmp = before.clone();
    let mut after_cmp = after.clone();
    for value in [&mut before_cmp, &mut after_cmp] {
        if let Some(map) = value.as_object_mut() {
            if additions_only {
                map.remove("tolerations");
            }
        }
    }
    if before_cmp != after_cmp {
        return Err(ApiError::invalid("", "Pod", meta::name(old), "spec", "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"));
    }
    Ok(())
}

/// A CustomResourceDefinition's status: its names accepted, established, its storage
/// versions stored.
fn crd_status(obj: &mut Value) {
    let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let stored: Vec<Value> = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|value| value.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|version| version.get("name").cloned())
        .collect();
    let now = meta::now();
    obj["status"] = json!({
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn resource(group: &str, version: &str, plural: &str) -> ResourceInfo {
        Registry::new()
            .lookup(group, version, plural)
            .expect("a built-in resource")
    }

    #[test]
    fn kind_rules_by_kind() {
        let services = resource("", "v1", "services");
        let namespaces = resource("", "v1", "namespaces");
        let pods = resource("", "v1", "pods");
        let endpoints = resource("", "v1", "endpoints");
        let jobs = resource("batch", "v1", "jobs");
        let deployments = resource("apps", "v1", "deployments");
        let roles = resource("rbac.authorization.k8s.io", "v1", "roles");
        let status = Some(Subresource::Status);
        // (what, rule holds, expected)
        #[rustfmt::skip]
        let cases = [
            ("a Namespace's main resource writes its status", status_subresource_owns_status(&namespaces), false),
            ("a Deployment's status subresource owns its status", status_subresource_owns_status(&deployments), true),
            ("a Pod's status subresource owns its status", status_subresource_owns_status(&pods), true),
            ("an Endpoints update creates", update_creates(&endpoints, None), true),
            ("an Endpoints status update does not create", update_creates(&endpoints, status), false),
            ("a Service update does not create", update_creates(&services, None), false),
            ("a Job orphans its pods", default_propagation(&jobs) == "Orphan", true),
            ("a Deployment's dependents go in the background", default_propagation(&deployments) == "Background", true),
            ("a Pod deleted at once answers the pod", delete_answers_object(&pods), true),
            ("a Service deleted at once answers a Status", delete_answers_object(&services), false),
            ("a Role may be named system:x", valid_name(&roles, "system:x"), true),
            ("a Service may not", valid_name(&services, "system:x"), false),
        ];
        for (what, holds, expected) in cases {
            assert_eq!(holds, expected, "{what}");
        }
    }

    #[test]
    fn update_keeps_a_services_cluster_ip_and_a_namespaces_finalizers() {
        let services = resource("", "v1", "services");
        let old = json!({"spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]}});
        let mut new = json!({"spec": {"ports": []}});
        prepare_update(&services, &old, &mut new, None).expect("update");
        assert_eq!(new["spec"]["clusterIP"], "10.96.0.10");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.0.10"]));

        let namespaces = resource("", "v1", "namespaces");
        let old = json!({"spec": {"finalizers": ["kubernetes"]}});
        let mut new = json!({"spec": {"finalizers": []}});
        prepare_update(&namespaces, &old, &mut new, None).expect("update");
        assert_eq!(new["spec"]["finalizers"], json!(["kubernetes"]), "kept");
        let mut finalized = json!({"spec": {"finalizers": []}});
        let finalize = Some(Subresource::Finalize);
        prepare_update(&namespaces, &old, &mut finalized, finalize).expect("finalize");
        assert_eq!(
            finalized["spec"]["finalizers"],
            json!([]),
            "finalize writes them"
        );
    }

    #[test]
    fn pod_update_may_change_images_but_not_the_command() {
        let old = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a", "command": ["x"]}]}});
        let image = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "b", "command": ["x"]}]}});
        let command = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a", "command": ["y"]}]}});
        assert!(check_pod_update(&old, &image).is_ok());
        assert!(check_pod_update(&old, &command).is_err());
    }
}
