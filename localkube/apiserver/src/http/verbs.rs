//! The handlers of resource requests by verb (get, list, create, update, patch, delete,
//! deletecollection), the subresources that are not plain objects (scale, log, token,
//! eviction, binding, reviews) and the pod streams the node agent plugin serves.

use super::request::{
    content_type, decode_object, delete_options, flag, include_object, output_of, read_body,
    write_options, Query, ResourceRequest, Target,
};
use super::response::{json_response, respond};
use super::ServerState;
use crate::accept::Output;
use crate::auth::{self, Attributes, UserInfo};
use crate::cluster::{DeleteOptions, PatchType};
use crate::error::ApiError;
use crate::meta;
use crate::plugin::{StreamRequest, StreamSubresource};
use crate::pod_logs;
use crate::registry::Subresource;
use crate::reviews;
use crate::table;
use axum::body::Body;
use axum::http::header;
use axum::http::request::Parts;
use axum::response::Response;
use bytes::Bytes;
use futures::SinkExt;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// Longest `pods/log?follow=true` stream.
const LOG_FOLLOW_MAX: Duration = Duration::from_secs(3600);

/// `pods/exec`, `pods/attach`, `pods/portforward` (the `create` verb on the subresource):
/// served by the first plugin that serves streams.
pub(super) async fn stream(
    st: &ServerState,
    target: &Target,
    sub: StreamSubresource,
    user: &UserInfo,
    parts: Parts,
) -> Result<Response, ApiError> {
    let name = target.name.clone().unwrap_or_default();
    let attributes = Attributes {
        verb: "create".into(),
        resource_request: true,
        resource: "pods".into(),
        subresource: sub.as_str().into(),
        namespace: target.namespace.clone().unwrap_or_default(),
        name: name.clone(),
        path: parts.uri.path().to_string(),
        ..Default::default()
    };
    let cluster = &st.cluster;
    if !auth::authorize(&cluster.store, user, &attributes) {
        return Err(attributes.forbidden(user));
    }
    let Some(plugin) = st.plugins.iter().find(|p| p.serves_streams()) else {
        if cluster
            .store
            .get("/pods", &attributes.namespace, &name)
            .is_none()
        {
            return Err(ApiError::not_found("", "pods", &name));
        }
        return Err(ApiError::bad_request(
            "no node agent runs pods in this cluster",
        ));
    };
    if let Some(pod) = cluster.store.get("/pods", &attributes.namespace, &name) {
        node_reachable(st, &pod)?;
    }
    plugin
        .serve_stream(StreamRequest {
            cluster: cluster.clone(),
            namespace: attributes.namespace,
            name,
            subresource: sub,
            parts,
        })
        .await
}

/// GET of one object: the object (or a Table of it), its scale, or its log.
pub(super) async fn get(req: &ResourceRequest, name: &str) -> Result<Response, ApiError> {
    let (cluster, resource, ns) = (&req.st.cluster, &req.target.r, req.namespace.as_str());
    match req.sub {
        Some(Subresource::Log) => pod_log(req.st.clone(), ns, name, &req.query).await,
        Some(Subresource::Scale) => Ok(json_response(200, &cluster.get_scale(resource, ns, name)?)),
        None
        | Some(
            Subresource::Status
            | Subresource::Finalize
            | Subresource::Eviction
            | Subresource::Binding
            | Subresource::Token,
        ) => {
            let output = output_of(&req.headers)?;
            let obj = cluster.get(resource, ns, name)?;
            if output == Output::Table {
                let rv = meta::str_at(&obj, "/metadata/resourceVersion").to_string();
                return Ok(json_response(
                    200,
                    &table::table(
                        resource,
                        &[obj],
                        &rv,
                        None,
                        include_object(&req.query),
                        true,
                    ),
                ));
            }
            respond(200, &obj, resource, output)
        }
    }
}

/// POST to a collection: a review (the create-only kinds) or a create.
pub(super) async fn create(req: &ResourceRequest, body: Body) -> Result<Response, ApiError> {
    let body = read_body(body).await?;
    let obj = decode_object(&req.headers, &body)?;
    let resource = &req.target.r;
    if resource.create_only {
        return Ok(json_response(201, &review(req, &obj)?));
    }
    let options = write_options(&req.query, &req.headers)?;
    let output = output_of(&req.headers)?;
    let created = req
        .st
        .cluster
        .create(resource, &req.namespace, obj, &options)?;
    respond(201, &created, resource, output)
}

/// The answer to a create of a review kind (TokenReview, the access reviews, the
/// self-subject reviews): computed, never stored.
fn review(req: &ResourceRequest, obj: &Value) -> Result<Value, ApiError> {
    let (cluster, user) = (&req.st.cluster, &req.user);
    Ok(match req.target.r.kind.as_str() {
        "TokenReview" => reviews::token_review(cluster, obj),
        "SubjectAccessReview" => {
            reviews::subject_access_review(cluster, obj, None, "SubjectAccessReview")?
        }
        "LocalSubjectAccessReview" => reviews::subject_access_review(
            cluster,
            obj,
            Some(&req.namespace),
            "LocalSubjectAccessReview",
        )?,
        "SelfSubjectAccessReview" => reviews::self_subject_access_review(cluster, user, obj),
        "SelfSubjectReview" => reviews::self_subject_review(user),
        _ => reviews::self_subject_rules_review(cluster, user, obj),
    })
}

/// The Status a successful eviction or binding answers.
fn created_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// POST to an object's subresource: a ServiceAccount token, a pod eviction or binding.
pub(super) async fn create_subresource(
    req: &ResourceRequest,
    name: &str,
    body: Body,
) -> Result<Response, ApiError> {
    let body = read_body(body).await?;
    let obj = decode_object(&req.headers, &body)?;
    let (cluster, ns) = (&req.st.cluster, req.namespace.as_str());
    match req.sub {
        Some(Subresource::Token) => Ok(json_response(
            201,
            &reviews::token_request(cluster, ns, name, &obj)?,
        )),
        Some(Subresource::Eviction) => {
            let options = delete_options(
                &req.query,
                Some(obj.get("deleteOptions").cloned().unwrap_or(Value::Null)),
            )?;
            cluster.delete(&req.target.r, ns, name, &options)?;
            Ok(json_response(201, &created_status()))
        }
        Some(Subresource::Binding) => bind(req, name, &obj),
        None
        | Some(
            Subresource::Status | Subresource::Scale | Subresource::Finalize | Subresource::Log,
        ) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

/// `pods/binding`: sets `spec.nodeName` of a pod not yet bound to a node.
fn bind(req: &ResourceRequest, name: &str, obj: &Value) -> Result<Response, ApiError> {
    let node = meta::str_at(obj, "/target/name").to_string();
    let bound = req.st.cluster.modify(
        "",
        "pods",
        &req.namespace,
        name,
        Some(Subresource::Binding),
        "kube-scheduler",
        |p| {
            if !meta::str_at(p, "/spec/nodeName").is_empty() {
                return false;
            }
            p["spec"]["nodeName"] = json!(node);
            true
        },
    )?;
    match bound {
        Some(p) if meta::str_at(&p, "/spec/nodeName") == node => {
            Ok(json_response(201, &created_status()))
        }
        Some(_) => Err(ApiError::conflict_message(format!(
            "pod {name} is already assigned to a node"
        ))),
        None => Err(ApiError::not_found("", "pods", name)),
    }
}

/// PUT of an object, its status or its scale.
pub(super) async fn update(
    req: &ResourceRequest,
    name: &str,
    body: Body,
) -> Result<Response, ApiError> {
    let (cluster, resource, ns) = (&req.st.cluster, &req.target.r, req.namespace.as_str());
    let body = read_body(body).await?;
    let obj = decode_object(&req.headers, &body)?;
    let options = write_options(&req.query, &req.headers)?;
    if req.sub == Some(Subresource::Scale) {
        return Ok(json_response(
            200,
            &cluster.write_scale(resource, ns, name, None, &obj, &options)?,
        ));
    }
    let output = output_of(&req.headers)?;
    let out = cluster.update(resource, ns, name, obj, req.sub, &options)?;
    respond(200, &out, resource, output)
}

/// The patch type its `Content-Type` names.
fn patch_type(headers: &axum::http::HeaderMap) -> Result<PatchType, ApiError> {
    match content_type(headers).as_str() {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml"
        | "application/apply-patch+json"
        | "application/apply-patch+cbor" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

/// The patch of type `pt` in `body`: an apply configuration is a YAML object, the others
/// JSON.
fn decode_patch(pt: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    let patch: Value = if pt == PatchType::Apply {
        serde_yaml::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|error| ApiError::bad_request(format!("error decoding patch: {error}")))?
    };
    if pt == PatchType::Apply && !patch.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the apply body is not an object",
        ));
    }
    Ok(patch)
}

/// PATCH of an object, its status or its scale; an apply that creates the object also
/// needs the `create` verb (201).
pub(super) async fn patch(
    req: &ResourceRequest,
    name: &str,
    body: Body,
) -> Result<Response, ApiError> {
    let (cluster, resource, ns) = (&req.st.cluster, &req.target.r, req.namespace.as_str());
    let pt = patch_type(&req.headers)?;
    let body = read_body(body).await?;
    let patch = decode_patch(pt, &body)?;
    let options = write_options(&req.query, &req.headers)?;
    if req.sub == Some(Subresource::Scale) {
        return Ok(json_response(
            200,
            &cluster.write_scale(resource, ns, name, Some(pt), &patch, &options)?,
        ));
    }
    let existed = cluster
        .store
        .get(
            &resource.storage_key(),
            if resource.namespaced { ns } else { "" },
            name,
        )
        .is_some();
    if pt == PatchType::Apply && !existed {
        let mut create = req.attrs.clone();
        create.verb = "create".into();
        if !auth::authorize(&cluster.store, &req.user, &create) {
            return Err(create.forbidden(&req.user));
        }
    }
    let output = output_of(&req.headers)?;
    let out = cluster.patch(resource, ns, name, pt, &patch, req.sub, &options)?;
    respond(if existed { 200 } else { 201 }, &out, resource, output)
}

/// The DeleteOptions of a DELETE: its query, and its body when it has one.
async fn delete_options_of(req: &ResourceRequest, body: Body) -> Result<DeleteOptions, ApiError> {
    let body = read_body(body).await?;
    let opts = if body.iter().all(|byte| byte.is_ascii_whitespace()) {
        None
    } else {
        Some(decode_object(&req.headers, &body)?)
    };
    delete_options(&req.query, opts)
}

/// DELETE of an object: 202 while finalizers or a grace period keep it.
pub(super) async fn delete(
    req: &ResourceRequest,
    name: &str,
    body: Body,
) -> Result<Response, ApiError> {
    let (cluster, resource, ns) = (&req.st.cluster, &req.target.r, req.namespace.as_str());
    let options = delete_options_of(req, body).await?;
    let output = output_of(&req.headers)?;
    let out = cluster.delete(resource, ns, name, &options)?;
    let pending = out.get("kind").and_then(Value::as_str) != Some("Status")
        && out.pointer("/metadata/deletionTimestamp").is_some()
        && cluster
            .store
            .get(&resource.storage_key(), meta::namespace(&out), name)
            .is_some();
    respond(if pending { 202 } else { 200 }, &out, resource, output)
}

/// DELETE of a collection (deletecollection) by its selectors.
pub(super) async fn delete_collection(
    req: &ResourceRequest,
    body: Body,
) -> Result<Response, ApiError> {
    let options = delete_options_of(req, body).await?;
    let output = output_of(&req.headers)?;
    let target = &req.target;
    let deleted = req.st.cluster.delete_collection(
        &target.r,
        target.namespace.as_deref(),
        &req.labels,
        &req.fields,
        &options,
    )?;
    respond(200, &deleted, &target.r, output)
}

/// GET of a collection: one page of the objects the selectors match (`limit`, `continue`),
/// as a list or a Table.
pub(super) fn list(req: &ResourceRequest) -> Result<Response, ApiError> {
    let (cluster, target, query, headers) =
        (&req.st.cluster, &req.target, &req.query, &req.headers);
    let (labels, fields) = (&req.labels, &req.fields);
    use base64::Engine;
    let output = output_of(headers)?;
    let (items, rv) = cluster.list(&target.r, target.namespace.as_deref(), labels, fields);
    let limit: Option<usize> = match query.get("limit") {
        Some(line) if !line.is_empty() => Some(
            line.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {line:?}")))?,
        ),
        _ => None,
    };
    let start: Option<(String, String)> = match query.get("continue") {
        Some(c) if !c.is_empty() => {
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .map_err(|_| {
                    ApiError::bad_request("continue key is not valid: illegal base64 data")
                })?;
            let value: Value = serde_json::from_slice(&raw)
                .map_err(|_| ApiError::bad_request("continue key is not valid: invalid json"))?;
            Some((
                meta::str_at(&value, "/ns").to_string(),
                meta::str_at(&value, "/name").to_string(),
            ))
        }
        _ => None,
    };
    let mut page: Vec<Value> = items
        .into_iter()
        .filter(|object| match &start {
            Some((ns, name)) => {
                (meta::namespace(object), meta::name(object)) > (ns.as_str(), name.as_str())
            }
            None => true,
        })
        .collect();
    let mut cont = None;
    if let Some(l) = limit.filter(|length| *length > 0) {
        if page.len() > l {
            page.truncate(l);
            if let Some(last) = page.last() {
                let token =
                    json!({"ns": meta::namespace(last), "name": meta::name(last), "rv": rv});
                cont = Some(
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string()),
                );
            }
        }
    }
    let rv = rv.to_string();
    if output == Output::Table {
        return Ok(json_response(
            200,
            &table::table(
                &target.r,
                &page,
                &rv,
                cont.as_deref(),
                include_object(query),
                true,
            ),
        ));
    }
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        metadata["continue"] = json!(c);
    }
    respond(
        200,
        &json!({"kind": format!("{}List", target.r.kind), "apiVersion": target.r.api_version(), "metadata": metadata, "items": page}),
        &target.r,
        output,
    )
}

/// Refuses a request the API server would proxy to the kubelet of `pod`'s node while that
/// kubelet cannot be reached: 500, as kube-apiserver answers when it cannot dial it.
fn node_reachable(st: &ServerState, pod: &Value) -> Result<(), ApiError> {
    let node = meta::str_at(pod, "/spec/nodeName");
    if node.is_empty() {
        return Ok(());
    }
    match st
        .plugins
        .iter()
        .find_map(|plugin| plugin.node_unreachable(&st.cluster, node))
    {
        Some(message) => Err(ApiError::internal(message)),
        None => Ok(()),
    }
}

async fn pod_log(
    st: Arc<ServerState>,
    ns: &str,
    name: &str,
    query: &Query,
) -> Result<Response, ApiError> {
    let cluster = st.cluster.clone();
    let resource = cluster
        .resource("", "pods")
        .ok_or_else(ApiError::path_not_found)?;
    let pod = cluster.get(&resource, ns, name)?;
    node_reachable(&st, &pod)?;
    let container = log_container(&pod, name, query)?;
    let previous = flag(query, "previous");
    let path = pod_logs::log_path(&cluster.state_dir, ns, name, &container, previous);
    let tail: Option<usize> = query.get("tailLines").and_then(|s| s.parse().ok());
    let limit: Option<usize> = query.get("limitBytes").and_then(|s| s.parse().ok());
    let data = match tokio::fs::read(&path).await {
        Ok(d) => d,
        Err(_) if previous => {
            return Err(ApiError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{name}\" not found"
            )))
        }
        Err(_) if meta::str_at(&pod, "/status/phase") == "Pending" => {
            return Err(ApiError::bad_request(format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
            )));
        }
        Err(_) => Vec::new(),
    };
    let first = pod_logs::select(&data, tail, limit);
    let text = |body: Body| {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/plain")
            .body(body)
            .unwrap_or_default()
    };
    if !flag(query, "follow") {
        return Ok(text(Body::from(first)));
    }
    let rx = follow_log(&st, &pod, (ns, name), path, first, data.len());
    Ok(text(Body::from_stream(rx)))
}

/// The container `pods/log` reads: the `container` parameter (one of the pod's containers or
/// init containers), else the pod's only container.
fn log_container(pod: &Value, name: &str, query: &Query) -> Result<String, ApiError> {
    let names: Vec<String> = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .flat_map(|init_container| {
            pod.pointer(init_container)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| meta::str_at(&c, "/name").to_string())
        .collect();
    let container = match query.get("container").filter(|c| !c.is_empty()) {
        Some(c) => c.clone(),
        None => {
            let main: Vec<String> = pod
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| meta::str_at(c, "/name").to_string())
                .collect();
            if main.len() == 1 {
                main[0].clone()
            } else {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    main.join(" ")
                )));
            }
        }
    };
    if !names.contains(&container) {
        return Err(ApiError::bad_request(format!(
            "container {container} is not valid for pod {name}"
        )));
    }
    Ok(container)
}

/// `follow=true`: `first`, then what is appended to the log at `path` past `offset`, until
/// the pod is gone or finished, [`LOG_FOLLOW_MAX`] or shutdown.
fn follow_log(
    st: &ServerState,
    pod: &Value,
    (ns, name): (&str, &str),
    path: std::path::PathBuf,
    first: Vec<u8>,
    mut offset: usize,
) -> futures::channel::mpsc::Receiver<Result<Bytes, Infallible>> {
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(64);
    let cluster = st.cluster.clone();
    let uid = meta::uid_of(pod).to_string();
    let (ns, name) = (ns.to_string(), name.to_string());
    let mut shutdown = st.shutdown.clone();
    tokio::spawn(async move {
        if tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        let end = tokio::time::Instant::now() + LOG_FOLLOW_MAX;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = shutdown.changed() => return,
            }
            if let Ok(d) = tokio::fs::read(&path).await {
                if d.len() > offset {
                    if tx
                        .send(Ok(Bytes::from(d[offset..].to_vec())))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    offset = d.len();
                }
            }
            let alive = cluster
                .store
                .get("/pods", &ns, &name)
                .map(|p| {
                    meta::uid_of(&p) == uid
                        && !matches!(meta::str_at(&p, "/status/phase"), "Succeeded" | "Failed")
                })
                .unwrap_or(false);
            if !alive || tokio::time::Instant::now() > end {
                return;
            }
        }
    });
    rx
}
