//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<g>/<v>`; `/api` and `/apis` in
//! the aggregated form `apidiscovery.k8s.io` v2 and v2beta1 when the client asks for it,
//! else the legacy form) and OpenAPI v3
//! (index and per group-version documents with PATCH operations carrying the
//! `fieldValidation` parameter, which kubectl's validation looks for).

use super::registry::{ResourceInfo, Subresource};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// The version this server reports.
pub const VERSION: (&str, &str) = ("1", "32");

/// `/version`.
pub fn version() -> Value {
    json!({"major": VERSION.0, "minor": VERSION.1, "gitVersion": "v1.32.0-localkube", "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23.0", "compiler": "gc", "platform": "linux/amd64"})
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn sub_entry(resource: &ResourceInfo, sub: Subresource) -> Value {
    let (kind, group, version, verbs): (&str, &str, &str, &[&str]) = match sub {
        Subresource::Status => (&resource.kind, "", "", &["get", "patch", "update"]),
        Subresource::Scale => ("Scale", "autoscaling", "v1", &["get", "patch", "update"]),
        Subresource::Log => ("Pod", "", "", &["get"]),
        Subresource::Eviction => ("Eviction", "policy", "v1", &["create"]),
        Subresource::Binding => ("Binding", "", "", &["create"]),
        Subresource::Token => ("TokenRequest", "authentication.k8s.io", "v1", &["create"]),
        Subresource::Finalize => (&resource.kind, "", "", &["update"]),
    };
    let mut e = json!({"name": format!("{}/{}", resource.plural, sub.as_str()), "singularName": "", "namespaced": resource.namespaced, "kind": kind, "verbs": verbs});
    if !group.is_empty() {
        e["group"] = json!(group);
        e["version"] = json!(version);
    }
    e
}

/// The verbs of a resource.
fn verbs_of(resource: &ResourceInfo) -> &'static [&'static str] {
    if resource.create_only {
        &["create"]
    } else {
        ALL_VERBS
    }
}

/// One `APISubresourceDiscovery` of `r`.
fn aggregated_sub(resource: &ResourceInfo, sub: Subresource) -> Value {
    let legacy = sub_entry(resource, sub);
    let kind = legacy.get("kind").cloned().unwrap_or(Value::Null);
    let group = legacy
        .get("group")
        .cloned()
        .unwrap_or_else(|| json!(resource.group));
    let version = legacy
        .get("version")
        .cloned()
        .unwrap_or_else(|| json!(resource.version));
    json!({"subresource": sub.as_str(), "responseKind": {"group": group, "version": version, "kind": kind},
        "verbs": legacy.get("verbs").cloned().unwrap_or_else(|| json!([]))})
}

/// One `APIResourceDiscovery` (`apidiscovery.k8s.io`) of `r`.
fn aggregated_resource(resource: &ResourceInfo) -> Value {
    let scope = if resource.namespaced {
        "Namespaced"
    } else {
        "Cluster"
    };
    let mut e = json!({"resource": resource.plural,
        "responseKind": {"group": resource.group, "version": resource.version, "kind": resource.kind},
        "scope": scope, "singularResource": resource.singular, "verbs": verbs_of(resource)});
    if !resource.short_names.is_empty() {
        e["shortNames"] = json!(resource.short_names);
    }
    if !resource.categories.is_empty() {
        e["categories"] = json!(resource.categories);
    }
    if !resource.subresources.is_empty() {
        let subs: Vec<Value> = resource
            .subresources
            .iter()
            .map(|subresource| aggregated_sub(resource, *subresource))
            .collect();
        e["subresources"] = json!(subs);
    }
    e
}

/// One `APIGroupDiscovery`: the group's versions (preferred first), each `Current`.
fn aggregated_group(resources: &[ResourceInfo], group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|value| {
            let rs: Vec<Value> = resources
                .iter()
                .filter(|r| r.group == group && &r.version == value)
                .map(aggregated_resource)
                .collect();
            json!({"version": value, "resources": rs, "freshness": "Current"})
        })
        .collect();
    let mut metadata = json!({"creationTimestamp": null});
    if !group.is_empty() {
        metadata["name"] = json!(group);
    }
    json!({"metadata": metadata, "versions": vs})
}

/// Aggregated discovery (`APIGroupDiscoveryList` of `apidiscovery.k8s.io/<version>`): of
/// the core group for `/api` (`core`), else of every named group for `/apis`.
pub fn aggregated(resources: &[ResourceInfo], core: bool, version: &str) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group(resources, "", &["v1".to_string()])]
    } else {
        groups(resources)
            .iter()
            .map(|(group, vs)| aggregated_group(resources, group, vs))
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {}, "items": items})
}

/// The `Content-Type` of an aggregated discovery response, which clients check to tell it
/// from the legacy form.
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// `APIResourceList` of one group version.
pub fn resource_list(gv: &str, resources: &[ResourceInfo]) -> Value {
    let mut list = Vec::new();
    for resource in resources {
        let mut e = json!({"name": resource.plural, "singularName": resource.singular, "namespaced": resource.namespaced, "kind": resource.kind, "verbs": verbs_of(resource)});
        if !resource.short_names.is_empty() {
            e["shortNames"] = json!(resource.short_names);
        }
        if !resource.categories.is_empty() {
            e["categories"] = json!(resource.categories);
        }
        list.push(e);
        for subresource in &resource.subresources {
            list.push(sub_entry(resource, *subresource));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list})
}

/// Group name -> versions, in a stable order (built-in groups first).
pub fn groups(resources: &[ResourceInfo]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for r in resources
        .iter()
        .filter(|resource| !resource.group.is_empty())
    {
        match out.iter_mut().find(|(group, _)| *group == r.group) {
            Some((_, vs)) => {
                if !vs.contains(&r.version) {
                    vs.push(r.version.clone());
                }
            }
            None => out.push((r.group.clone(), vec![r.version.clone()])),
        }
    }
    out
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|value| json!({"groupVersion": format!("{group}/{value}"), "version": value}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// `APIGroupList`.
pub fn group_list(resources: &[ResourceInfo]) -> Value {
    let gs: Vec<Value> = groups(resources)
        .iter()
        .map(|(group, vs)| group_entry(group, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `APIGroup` of one group.
pub fn group(resources: &[ResourceInfo], name: &str) -> Option<Value> {
    groups(resources)
        .into_iter()
        .find(|(g, _)| g == name)
        .map(|(g, vs)| {
            let mut e = group_entry(&g, &vs);
            e["kind"] = json!("APIGroup");
            e["apiVersion"] = json!("v1");
            e
        })
}

/// `/api`.
pub fn api_versions(addr: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]})
}

fn schema_name(resource: &ResourceInfo) -> String {
    let group = if resource.group.is_empty() {
        "core".to_string()
    } else {
        resource.group.clone()
    };
    if resource.crd.is_some() {
        let rev: Vec<&str> = resource.group.split('.').rev().collect();
        format!("{}.{}.{}", rev.join("."), resource.version, resource.kind)
    } else {
        format!(
            "io.k8s.api.{}.{}.{}",
            group.split('.').next().unwrap_or("core"),
            resource.version,
            resource.kind
        )
    }
}

fn gvk_ext(resource: &ResourceInfo) -> Value {
    json!({"group": resource.group, "version": resource.version, "kind": resource.kind})
}

fn q(name: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "description": name, "schema": {"type": ty, "uniqueItems": true}})
}

fn op(
    resource: &ResourceInfo,
    action: &str,
    id: &str,
    params: Vec<Value>,
    body: Option<Value>,
    resp: &str,
) -> Value {
    let mut object = json!({"operationId": format!("{id}{}", resource.kind), "description": format!("{action} {}", resource.kind),
        "tags": [resource.api_version()], "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": resp}}}},
            "401": {"description": "Unauthorized"}},
        "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk_ext(resource)});
    if let Some(b) = body {
        object["requestBody"] = b;
    }
    object
}

/// The OpenAPI v3 document of one group version.
pub fn openapi_gv(resources: &[ResourceInfo]) -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"type": "object", "description": "a patch"}),
    );
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Status".into(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Status"}]}),
    );
    for resource in resources {
        resource_schemas(resource, &mut schemas);
        resource_paths(resource, &mut paths);
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths, "components": {"schemas": schemas}})
}

/// The schemas of one resource: its kind (a CRD's schema, else permissive, with
/// `apiVersion`, `kind` and `metadata`) and its list.
fn resource_schemas(resource: &ResourceInfo, schemas: &mut serde_json::Map<String, Value>) {
    let name = schema_name(resource);
    let mut s = match resource
        .crd
        .as_ref()
        .and_then(|crd_version| crd_version.schema.clone())
    {
        Some(s) => s,
        None => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if let Some(m) = s.as_object_mut() {
        let props = m.entry("properties").or_insert_with(|| json!({}));
        if let Some(map) = props.as_object_mut() {
            map.entry("apiVersion").or_insert_with(
                || json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
            );
            map.entry("kind").or_insert_with(
                || json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
            );
            map.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}}),
            );
            if resource.crd.is_none() {
                for field in ["spec", "status"] {
                    map.entry(field).or_insert_with(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": format!("{field} of the {}", resource.kind)}));
                }
            }
        }
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk_ext(resource)]),
        );
        m.entry("description")
            .or_insert_with(|| json!(format!("{} ({})", resource.kind, resource.api_version())));
    }
    schemas.insert(name.clone(), s);
    let list_name = format!("{name}List");
    schemas.insert(
        list_name.clone(),
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-group-version-kind": [{"group": resource.group, "version": resource.version, "kind": format!("{}List", resource.kind)}]}),
    );
}

/// The paths of one resource: its collection (create; list and deletecollection unless
/// create-only), its items (get, replace, patch, delete) and their `status`.
fn resource_paths(resource: &ResourceInfo, paths: &mut serde_json::Map<String, Value>) {
    let name = schema_name(resource);
    let reference = format!("#/components/schemas/{name}");
    let list_name = format!("{name}List");
    let base = if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    };
    let (coll, item) = if resource.namespaced {
        (
            format!("{base}/namespaces/{{namespace}}/{}", resource.plural),
            format!(
                "{base}/namespaces/{{namespace}}/{}/{{name}}",
                resource.plural
            ),
        )
    } else {
        (
            format!("{base}/{}", resource.plural),
            format!("{base}/{}/{{name}}", resource.plural),
        )
    };
    let json_body = json!({"required": true, "content": {"application/json": {"schema": {"$ref": reference}}, "application/yaml": {"schema": {"$ref": reference}}}});
    let patch_ref =
        json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"});
    // Strategic merge patch is served but not advertised: the schemas here are permissive,
    // so kubectl must compute its patches from its compiled-in types (their
    // patchMergeKeys) rather than from this document.
    let patch_body = json!({"required": true, "content": {"application/apply-patch+yaml": {"schema": patch_ref}, "application/json-patch+json": {"schema": patch_ref},
        "application/merge-patch+json": {"schema": patch_ref}}});
    let write_params = || {
        vec![
            q("dryRun", "string"),
            q("fieldManager", "string"),
            q("fieldValidation", "string"),
        ]
    };
    let mut path_params = vec![
        json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}}),
    ];
    let mut coll_params = Vec::new();
    if resource.namespaced {
        let ns = json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string", "uniqueItems": true}});
        path_params.push(ns.clone());
        coll_params.push(ns);
    }
    let list_params = vec![
        q("labelSelector", "string"),
        q("fieldSelector", "string"),
        q("limit", "integer"),
        q("continue", "string"),
        q("resourceVersion", "string"),
        q("watch", "boolean"),
        q("timeoutSeconds", "integer"),
        q("allowWatchBookmarks", "boolean"),
        q("sendInitialEvents", "boolean"),
    ];
    let mut c = json!({"parameters": coll_params,
        "post": op(resource, "post", "create", write_params(), Some(json_body.clone()), &reference)});
    if !resource.create_only {
        c["get"] = op(
            resource,
            "list",
            "list",
            list_params,
            None,
            &format!("#/components/schemas/{list_name}"),
        );
        c["delete"] = op(
            resource,
            "deletecollection",
            "deleteCollection",
            vec![q("labelSelector", "string"), q("fieldSelector", "string")],
            None,
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status",
        );
        let mut patch_params = write_params();
        patch_params.push(q("force", "boolean"));
        paths.insert(item.clone(), json!({"parameters": path_params,
            "get": op(resource, "get", "read", vec![], None, &reference),
            "put": op(resource, "put", "replace", write_params(), Some(json_body.clone()), &reference),
            "patch": op(resource, "patch", "patch", patch_params.clone(), Some(patch_body.clone()), &reference),
            "delete": op(resource, "delete", "delete", vec![q("gracePeriodSeconds", "integer"), q("propagationPolicy", "string"), q("dryRun", "string")], None, "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status")}));
        if resource.has_subresource(Subresource::Status) {
            paths.insert(
                format!("{item}/status"),
                json!({"parameters": path_params,
                "get": op(resource, "get", "read", vec![], None, &reference),
                "put": op(resource, "put", "replace", write_params(), Some(json_body.clone()), &reference),
                "patch": op(resource, "patch", "patch", patch_params, Some(patch_body.clone()), &reference)}),
            );
        }
    }
    paths.insert(coll, c);
}

/// A stable hash of a document (the `hash` kubectl caches by).
pub fn doc_hash(value: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// Group versions served, with the resources of each, keyed by OpenAPI path (`api/v1`,
/// `apis/apps/v1`).
pub fn by_openapi_path(resources: &[ResourceInfo]) -> BTreeMap<String, Vec<ResourceInfo>> {
    let mut grouped: BTreeMap<String, Vec<ResourceInfo>> = BTreeMap::new();
    for resource in resources {
        let key = if resource.group.is_empty() {
            format!("api/{}", resource.version)
        } else {
            format!("apis/{}/{}", resource.group, resource.version)
        };
        grouped.entry(key).or_default().push(resource.clone());
    }
    grouped
}
