//! The HTTP layer: path parsing, authentication, impersonation, RBAC, and the handlers of
//! every verb, watch streams (traps 2 and 3), tables, logs and reviews.

use super::accept::{self, Endpoint, Output};
use super::auth::{self, Attributes, ClientCertificate, UserInfo};
use super::discovery;
use super::error::ApiError;
use super::meta;
use super::openapi;
use super::ops::{set_gvk, Cluster, DeleteOptions, PatchType, WriteOptions};
use super::pod_logs;
use super::registry::{ResourceInfo, Subresource};
use super::reviews;
use super::selector::{FieldSelector, LabelSelector};
use super::server::{Plugin, StreamRequest, StreamSubresource};
use super::store::{EventType, StoreEvent};
use super::table::{self, IncludeObject};
use super::wire::{self, Form};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use bytes::Bytes;
use futures::SinkExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// Largest accepted request body (the real server's 3 MiB).
pub const BODY_BYTES_MAX: usize = 3 * 1024 * 1024;
/// Default watch duration when the client gives no `timeoutSeconds`.
const WATCH_TIMEOUT_DEFAULT: Duration = Duration::from_secs(1800);
/// Longest `pods/log?follow=true` stream.
const LOG_FOLLOW_MAX: Duration = Duration::from_secs(3600);

/// What the handlers share.
pub struct ServerState {
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// `host:port` clients reach.
    pub address: String,
    /// Interval of watch BOOKMARK events.
    pub bookmark_interval: Duration,
    /// Flips to true on shutdown; streams end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The CA client certificates are verified against.
    pub client_ca: super::tls::ClientCa,
    /// The plugins; the first that serves streams gets `pods/exec`, `attach`, `portforward`.
    pub plugins: Vec<Arc<dyn Plugin>>,
}

/// The router serving every path.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

type Query = HashMap<String, String>;

/// The encoding of `r`'s objects (custom resources are unstructured maps on a real server).
fn form_of(r: &ResourceInfo) -> Form {
    if r.crd.is_some() {
        Form::Unstructured
    } else {
        Form::Typed
    }
}

fn json_response(code: u16, v: &Value) -> Response {
    object_response(code, v, Form::Typed)
}

fn object_response(code: u16, v: &Value, form: Form) -> Response {
    let body = wire::to_vec(v, form);
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_default()
}

/// `resp` with its `Content-Type` replaced.
fn with_content_type(mut resp: Response, content_type: &str) -> Response {
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

async fn handle(State(st): State<Arc<ServerState>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    match serve(st, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%method, %path, code = e.code, reason = e.reason.as_str(), message = %e.message, "request failed");
            error_response(&e)
        }
    }
}

/// A parsed resource path.
#[derive(Debug, Clone)]
struct Target {
    r: ResourceInfo,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    watch_prefix: bool,
}

fn parse_query(q: Option<&str>) -> Query {
    form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn flag(q: &Query, k: &str) -> bool {
    matches!(q.get(k).map(String::as_str), Some("true") | Some("1"))
}

/// The request's user, as kube-apiserver's authenticators in order: a valid client
/// certificate, else a bearer token; an invalid certificate without a valid token is 401
/// (also on public paths: no fallback to anonymous after a failed credential).
fn authenticate(
    st: &ServerState,
    headers: &HeaderMap,
    cert: &ClientCertificate,
) -> Result<Option<UserInfo>, ApiError> {
    if let ClientCertificate::Valid(user) = cert {
        return Ok(Some(user.clone()));
    }
    let Some(h) = headers.get(header::AUTHORIZATION) else {
        if let ClientCertificate::Invalid(why) = cert {
            tracing::debug!(reason = %why, "client certificate authentication failed");
            return Err(ApiError::unauthorized());
        }
        return Ok(None);
    };
    let v = h.to_str().map_err(|_| ApiError::unauthorized())?;
    let token = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .ok_or_else(ApiError::unauthorized)?
        .trim();
    match st.cluster.auth.authenticate(token, &[], &st.cluster.store) {
        Ok((u, _)) => Ok(Some(u)),
        Err(why) => {
            tracing::debug!(reason = %why, "authentication failed");
            Err(ApiError::unauthorized())
        }
    }
}

fn impersonate(
    st: &ServerState,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let name = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    if name.is_none() && groups.is_empty() {
        return Ok(user);
    }
    let Some(name) = name else {
        return Err(ApiError::bad_request(
            "requested impersonation of groups without impersonating a user",
        ));
    };
    let check = |a: Attributes| -> Result<(), ApiError> {
        if auth::authorize(&st.cluster.store, &user, &a) {
            Ok(())
        } else {
            Err(a.forbidden(&user))
        }
    };
    let mut new = UserInfo {
        name: name.clone(),
        ..Default::default()
    };
    if let Some(rest) = name.strip_prefix("system:serviceaccount:") {
        let (ns, sa) = rest.split_once(':').unwrap_or(("", rest));
        check(Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            resource: "serviceaccounts".into(),
            namespace: ns.into(),
            name: sa.into(),
            ..Default::default()
        })?;
        if groups.is_empty() {
            new.groups = vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
            ];
        }
    } else {
        check(Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            resource: "users".into(),
            name: name.clone(),
            ..Default::default()
        })?;
    }
    for g in &groups {
        check(Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            resource: "groups".into(),
            name: g.clone(),
            ..Default::default()
        })?;
        new.groups.push(g.clone());
    }
    if let Some(uid) = headers.get("impersonate-uid").and_then(|v| v.to_str().ok()) {
        new.uid = uid.into();
    }
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix("impersonate-extra-") {
            if let Ok(v) = v.to_str() {
                new.extra.entry(key.to_string()).or_default().push(v.into());
            }
        }
    }
    if !new.groups.iter().any(|g| g == "system:authenticated") && name != "system:anonymous" {
        new.groups.push("system:authenticated".into());
    }
    Ok(new)
}

fn parse_target(cluster: &Cluster, segs: &[&str]) -> Option<Target> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (watch_prefix, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let lookup = |p: &str| cluster.registry.lookup(group, version, p);
    if let ["namespaces", ns, plural, tail @ ..] = rest {
        if let Some(r) = lookup(plural).filter(|r| r.namespaced) {
            if tail.len() > 2 {
                return None;
            }
            return Some(Target {
                r,
                namespace: Some(ns.to_string()),
                name: tail.first().map(|s| s.to_string()),
                sub: tail.get(1).map(|s| s.to_string()),
                watch_prefix,
            });
        }
    }
    let (plural, tail) = rest.split_first()?;
    let r = lookup(plural)?;
    if tail.len() > 2 {
        return None;
    }
    Some(Target {
        r,
        namespace: None,
        name: tail.first().map(|s| s.to_string()),
        sub: tail.get(1).map(|s| s.to_string()),
        watch_prefix,
    })
}

fn verb_of(method: &Method, t: &Target, q: &Query) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => {
            if t.name.is_some() {
                if t.watch_prefix {
                    "watch"
                } else {
                    "get"
                }
            } else if t.watch_prefix || flag(q, "watch") {
                "watch"
            } else {
                "list"
            }
        }
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => {
            if t.name.is_some() {
                "delete"
            } else {
                "deletecollection"
            }
        }
        _ => "",
    }
}

async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, BODY_BYTES_MAX)
        .await
        .map_err(|_| ApiError::too_large(BODY_BYTES_MAX))
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase()
}

fn decode_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    let v: Value = match ct.as_str() {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/vnd.kubernetes.protobuf" => {
            super::protobuf::decode_body(body).map_err(|e| {
                if e.contains("not supported") {
                    ApiError::unsupported_media_type("application/vnd.kubernetes.protobuf")
                } else {
                    ApiError::bad_request(format!("couldn't decode the protobuf body: {e}"))
                }
            })?
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => serde_yaml::from_slice(body)
            .map_err(|e| {
                ApiError::bad_request(format!("couldn't get version/kind; yaml parse error: {e}"))
            })?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(v)
}

/// The output a resource request negotiated from its `Accept` header.
fn output_of(headers: &HeaderMap) -> Result<Output, ApiError> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    accept::negotiate(accept, Endpoint::Resource)
}

/// `PartialObjectMetadata` of `obj` (kube-runtime's metadata watcher and `get_metadata`).
fn partial_metadata(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({}))})
}

fn is_list(obj: &Value) -> bool {
    obj.get("items").map(Value::is_array).unwrap_or(false)
}

/// `obj` (an object of `r`, or a list of them) in the negotiated `output`; `Status`
/// objects pass unchanged, as on the real server.
fn present(obj: &Value, r: &ResourceInfo, output: Output) -> Result<(Value, Form), ApiError> {
    if obj.get("kind").and_then(Value::as_str) == Some("Status") {
        return Ok((obj.clone(), Form::Typed));
    }
    let go_type = |list: &str| {
        if r.crd.is_some() {
            format!("*unstructured.Unstructured{list}")
        } else {
            format!("*{}.{}{list}", r.version, r.kind)
        }
    };
    match output {
        Output::Metadata if is_list(obj) => Err(ApiError::not_acceptable_message(format!(
            "you requested PartialObjectMetadata, but the requested object is a list ({})",
            go_type("List")
        ))),
        Output::Metadata => Ok((partial_metadata(obj), Form::Typed)),
        Output::MetadataList if !is_list(obj) => Err(ApiError::not_acceptable_message(format!(
            "you requested PartialObjectMetadataList, but the requested object is not a list ({})",
            go_type("")
        ))),
        Output::MetadataList => {
            let items: Vec<Value> = obj["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(partial_metadata)
                .collect();
            let list = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})), "items": items});
            Ok((list, Form::Typed))
        }
        Output::Object | Output::Table | Output::Aggregated(_) => Ok((obj.clone(), form_of(r))),
    }
}

/// The response for `obj` of `r` in the negotiated `output`.
fn respond(code: u16, obj: &Value, r: &ResourceInfo, output: Output) -> Result<Response, ApiError> {
    let (v, form) = present(obj, r, output)?;
    Ok(object_response(code, &v, form))
}

fn include_object(q: &Query) -> IncludeObject {
    match q.get("includeObject").map(String::as_str) {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

fn write_options(q: &Query, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
    let manager = match q.get("fieldManager") {
        Some(m) => m.clone(),
        None => headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|ua| {
                ua.split('/')
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(128)
                    .collect()
            })
            .unwrap_or_default(),
    };
    if manager.len() > 128 {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            "fieldManager",
            "Too long: may not be more than 128 bytes",
        ));
    }
    let strict = match q.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Ignore") | Some("Warn") => false,
        Some("Strict") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other:?}"
            )))
        }
    };
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            )))
        }
    };
    let force = match q.get("force").map(String::as_str) {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid force value {other:?}"
            )))
        }
    };
    Ok(WriteOptions {
        manager,
        dry_run,
        strict,
        force,
    })
}

fn selectors(t: &Target, q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(
        q.get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default(),
    )?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default(),
        &t.r,
    )?;
    Ok((labels, fields))
}

async fn serve(st: Arc<ServerState>, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let q = parse_query(parts.uri.query());
    let method = parts.method.clone();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let public = matches!(
        segs.first().copied(),
        Some("healthz") | Some("livez") | Some("readyz") | Some("version")
    );
    let cert = st
        .client_ca
        .identify(parts.extensions.get::<super::tls::PeerCertificates>());
    let user = match authenticate(&st, &parts.headers, &cert)? {
        Some(u) => impersonate(&st, u, &parts.headers)?,
        None if public => UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Default::default()
        },
        None => return Err(ApiError::unauthorized()),
    };
    let cluster = st.cluster.clone();
    let discovery_output = if matches!(segs.as_slice(), ["api"] | ["apis"]) {
        let accept = parts
            .headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        accept::negotiate(accept, Endpoint::Discovery)?
    } else {
        Output::Object
    };
    let aggregated = match discovery_output {
        Output::Aggregated(v) => Some(v),
        _ => None,
    };

    // Non-resource paths.
    let non_resource = match segs.as_slice() {
        [] => Some(
            json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/readyz", "/version"]}),
        ),
        ["healthz", ..] | ["livez", ..] | ["readyz", ..] => {
            return Ok(Response::builder()
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(Body::from("ok"))
                .unwrap_or_default());
        }
        ["version"] => Some(discovery::version()),
        ["api"] => Some(match aggregated {
            Some(v) => discovery::aggregated(&cluster.registry.all(), true, v),
            None => discovery::api_versions(&st.address),
        }),
        ["apis"] => Some(match aggregated {
            Some(v) => discovery::aggregated(&cluster.registry.all(), false, v),
            None => discovery::group_list(&cluster.registry.all()),
        }),
        ["api", v] | ["apis", _, v] if (segs.len() == 2 && segs[0] == "api") || segs.len() == 3 => {
            let group = if segs[0] == "api" { "" } else { segs[1] };
            let rs: Vec<ResourceInfo> = cluster
                .registry
                .all()
                .into_iter()
                .filter(|r| r.group == group && r.version == *v)
                .collect();
            if rs.is_empty() {
                return Err(ApiError::path_not_found());
            }
            let gv = if group.is_empty() {
                v.to_string()
            } else {
                format!("{group}/{v}")
            };
            Some(discovery::resource_list(&gv, &rs))
        }
        ["apis", g] => Some(
            discovery::group(&cluster.registry.all(), g).ok_or_else(ApiError::path_not_found)?,
        ),
        ["openapi", "v2"] => Some(openapi::document(&cluster.registry.all())),
        ["openapi", "v3"] => {
            let mut paths = serde_json::Map::new();
            for (p, rs) in discovery::by_openapi_path(&cluster.registry.all()) {
                let doc = discovery::openapi_gv(&rs);
                paths.insert(
                    p.clone(),
                    json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", discovery::doc_hash(&doc))}),
                );
            }
            Some(json!({"paths": paths}))
        }
        ["openapi", "v3", rest @ ..] => {
            let key = rest.join("/");
            let all = discovery::by_openapi_path(&cluster.registry.all());
            let rs = all.get(&key).ok_or_else(ApiError::path_not_found)?;
            Some(discovery::openapi_gv(rs))
        }
        _ => None,
    };
    if let Some(doc) = non_resource {
        if method != Method::GET && method != Method::HEAD {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource: {method} {path}"
            )));
        }
        let a = Attributes {
            verb: "get".into(),
            resource_request: false,
            path: path.clone(),
            ..Default::default()
        };
        if !public && !auth::authorize(&cluster.store, &user, &a) {
            return Err(a.forbidden(&user));
        }
        if segs.as_slice() == ["openapi", "v2"] {
            let accept = parts
                .headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            return match openapi::negotiate(accept) {
                Some(openapi::Format::Json) => Ok(json_response(200, &doc)),
                Some(openapi::Format::Protobuf) => Ok(Response::builder()
                    .header(header::CONTENT_TYPE, openapi::PROTOBUF_CONTENT_TYPE)
                    .body(Body::from(openapi::protobuf(&doc)))
                    .unwrap_or_default()),
                None => Err(ApiError::not_acceptable(&format!(
                    "application/json, {}",
                    openapi::PROTOBUF
                ))),
            };
        }
        if let Some(v) = aggregated {
            return Ok(with_content_type(
                json_response(200, &doc),
                &discovery::aggregated_content_type(v),
            ));
        }
        return Ok(json_response(200, &doc));
    }

    let t = parse_target(&cluster, &segs).ok_or_else(ApiError::path_not_found)?;
    if let (Some(sub), Some(name)) = (
        t.sub.as_deref().and_then(StreamSubresource::parse),
        t.name.as_deref(),
    ) {
        if t.r.group.is_empty() && t.r.plural == "pods" {
            // Streaming subresources are served by the node agent plugin.
            let a = Attributes {
                verb: "create".into(),
                resource_request: true,
                resource: "pods".into(),
                subresource: sub.as_str().into(),
                namespace: t.namespace.clone().unwrap_or_default(),
                name: name.into(),
                path: path.clone(),
                ..Default::default()
            };
            if !auth::authorize(&cluster.store, &user, &a) {
                return Err(a.forbidden(&user));
            }
            let Some(plugin) = st.plugins.iter().find(|p| p.serves_streams()) else {
                if cluster.store.get("/pods", &a.namespace, name).is_none() {
                    return Err(ApiError::not_found("", "pods", name));
                }
                return Err(ApiError::bad_request(
                    "no node agent runs pods in this cluster",
                ));
            };
            return plugin
                .serve_stream(StreamRequest {
                    cluster: cluster.clone(),
                    namespace: a.namespace,
                    name: name.into(),
                    subresource: sub,
                    parts,
                })
                .await;
        }
    }
    let sub = match t.sub.as_deref() {
        None => None,
        Some(segment) => match Subresource::parse(segment) {
            Some(sub) if t.r.has_subresource(sub) => Some(sub),
            _ => return Err(ApiError::path_not_found()),
        },
    };
    let verb = verb_of(&method, &t, &q);
    if verb.is_empty() {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {method}"
        )));
    }
    let ns = t.namespace.clone().unwrap_or_default();
    let mut attrs = Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: t.r.group.clone(),
        resource: t.r.plural.clone(),
        subresource: t.sub.clone().unwrap_or_default(),
        namespace: ns.clone(),
        name: t.name.clone().unwrap_or_default(),
        path: path.clone(),
    };
    let (labels, fields) = if matches!(verb, "list" | "watch" | "deletecollection") {
        selectors(&t, &q)?
    } else {
        Default::default()
    };
    if attrs.name.is_empty() {
        if let Some(n) = fields.pinned_name() {
            attrs.name = n.to_string();
        }
    }
    if !auth::authorize(&cluster.store, &user, &attrs) {
        return Err(attrs.forbidden(&user));
    }
    if t.r.namespaced && t.namespace.is_none() && !matches!(verb, "list" | "watch") {
        return Err(ApiError::path_not_found());
    }
    if !t.r.namespaced && t.namespace.is_some() {
        return Err(ApiError::path_not_found());
    }
    let r = &t.r;
    match (method.clone(), t.name.clone()) {
        (Method::GET, Some(name)) if t.watch_prefix => {
            let mut f = fields;
            f.terms.push(("metadata.name".into(), name, true));
            watch(st.clone(), &t, labels, f, &q, &parts.headers).await
        }
        (Method::GET, Some(name)) => match sub {
            Some(Subresource::Log) => pod_log(st.clone(), &ns, &name, &q).await,
            Some(Subresource::Scale) => Ok(json_response(200, &cluster.get_scale(r, &ns, &name)?)),
            None
            | Some(
                Subresource::Status
                | Subresource::Finalize
                | Subresource::Eviction
                | Subresource::Binding
                | Subresource::Token,
            ) => {
                let output = output_of(&parts.headers)?;
                let obj = cluster.get(r, &ns, &name)?;
                if output == Output::Table {
                    let rv = meta::str_at(&obj, "/metadata/resourceVersion").to_string();
                    return Ok(json_response(
                        200,
                        &table::table(r, &[obj], &rv, None, include_object(&q), true),
                    ));
                }
                respond(200, &obj, r, output)
            }
        },
        (Method::GET, None) if verb == "watch" => {
            watch(st.clone(), &t, labels, fields, &q, &parts.headers).await
        }
        (Method::GET, None) => list(&cluster, &t, &labels, &fields, &q, &parts.headers),
        (Method::POST, None) => {
            let body = read_body(body).await?;
            let obj = decode_object(&parts.headers, &body)?;
            if r.create_only {
                let out = match r.kind.as_str() {
                    "TokenReview" => reviews::token_review(&cluster, &obj),
                    "SubjectAccessReview" => {
                        reviews::subject_access_review(&cluster, &obj, None, "SubjectAccessReview")?
                    }
                    "LocalSubjectAccessReview" => reviews::subject_access_review(
                        &cluster,
                        &obj,
                        Some(&ns),
                        "LocalSubjectAccessReview",
                    )?,
                    "SelfSubjectAccessReview" => {
                        reviews::self_subject_access_review(&cluster, &user, &obj)
                    }
                    "SelfSubjectReview" => reviews::self_subject_review(&user),
                    _ => reviews::self_subject_rules_review(&cluster, &user, &obj),
                };
                return Ok(json_response(201, &out));
            }
            let o = write_options(&q, &parts.headers)?;
            let output = output_of(&parts.headers)?;
            let created = cluster.create(r, &ns, obj, &o)?;
            respond(201, &created, r, output)
        }
        (Method::POST, Some(name)) => {
            let body = read_body(body).await?;
            let obj = decode_object(&parts.headers, &body)?;
            match sub {
                Some(Subresource::Token) => Ok(json_response(
                    201,
                    &reviews::token_request(&cluster, &ns, &name, &obj)?,
                )),
                Some(Subresource::Eviction) => {
                    let d = delete_options(
                        &q,
                        Some(obj.get("deleteOptions").cloned().unwrap_or(Value::Null)),
                    )?;
                    cluster.delete(r, &ns, &name, &d)?;
                    Ok(json_response(
                        201,
                        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                    ))
                }
                Some(Subresource::Binding) => {
                    let node = meta::str_at(&obj, "/target/name").to_string();
                    let bound = cluster.modify(
                        "",
                        "pods",
                        &ns,
                        &name,
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
                        Some(p) if meta::str_at(&p, "/spec/nodeName") == node => Ok(json_response(
                            201,
                            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
                        )),
                        Some(_) => Err(ApiError::conflict_message(format!(
                            "pod {name} is already assigned to a node"
                        ))),
                        None => Err(ApiError::not_found("", "pods", &name)),
                    }
                }
                None
                | Some(
                    Subresource::Status
                    | Subresource::Scale
                    | Subresource::Finalize
                    | Subresource::Log,
                ) => Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                )),
            }
        }
        (Method::PUT, Some(name)) => {
            let body = read_body(body).await?;
            let obj = decode_object(&parts.headers, &body)?;
            let o = write_options(&q, &parts.headers)?;
            if sub == Some(Subresource::Scale) {
                return Ok(json_response(
                    200,
                    &cluster.write_scale(r, &ns, &name, None, &obj, &o)?,
                ));
            }
            let output = output_of(&parts.headers)?;
            let out = cluster.update(r, &ns, &name, obj, sub, &o)?;
            respond(200, &out, r, output)
        }
        (Method::PATCH, Some(name)) => {
            let pt = match content_type(&parts.headers).as_str() {
                "application/merge-patch+json" => PatchType::Merge,
                "application/json-patch+json" => PatchType::Json,
                "application/strategic-merge-patch+json" => PatchType::Strategic,
                "application/apply-patch+yaml"
                | "application/apply-patch+json"
                | "application/apply-patch+cbor" => PatchType::Apply,
                other => return Err(ApiError::unsupported_media_type(other)),
            };
            let body = read_body(body).await?;
            let patch: Value = if pt == PatchType::Apply {
                serde_yaml::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
            } else {
                serde_json::from_slice(&body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
            };
            if pt == PatchType::Apply && !patch.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding YAML: the apply body is not an object",
                ));
            }
            let o = write_options(&q, &parts.headers)?;
            if sub == Some(Subresource::Scale) {
                return Ok(json_response(
                    200,
                    &cluster.write_scale(r, &ns, &name, Some(pt), &patch, &o)?,
                ));
            }
            let existed = cluster
                .store
                .get(&r.storage_key(), if r.namespaced { &ns } else { "" }, &name)
                .is_some();
            if pt == PatchType::Apply && !existed {
                let mut create = attrs.clone();
                create.verb = "create".into();
                if !auth::authorize(&cluster.store, &user, &create) {
                    return Err(create.forbidden(&user));
                }
            }
            let output = output_of(&parts.headers)?;
            let out = cluster.patch(r, &ns, &name, pt, &patch, sub, &o)?;
            respond(if existed { 200 } else { 201 }, &out, r, output)
        }
        (Method::DELETE, Some(name)) => {
            let body = read_body(body).await?;
            let opts = if body.iter().all(|b| b.is_ascii_whitespace()) {
                None
            } else {
                Some(decode_object(&parts.headers, &body)?)
            };
            let d = delete_options(&q, opts)?;
            let output = output_of(&parts.headers)?;
            let out = cluster.delete(r, &ns, &name, &d)?;
            let pending = out.get("kind").and_then(Value::as_str) != Some("Status")
                && out.pointer("/metadata/deletionTimestamp").is_some()
                && cluster
                    .store
                    .get(&r.storage_key(), meta::namespace(&out), &name)
                    .is_some();
            respond(if pending { 202 } else { 200 }, &out, r, output)
        }
        (Method::DELETE, None) => {
            let body = read_body(body).await?;
            let opts = if body.iter().all(|b| b.is_ascii_whitespace()) {
                None
            } else {
                Some(decode_object(&parts.headers, &body)?)
            };
            let d = delete_options(&q, opts)?;
            let output = output_of(&parts.headers)?;
            let deleted =
                cluster.delete_collection(r, t.namespace.as_deref(), &labels, &fields, &d)?;
            respond(200, &deleted, r, output)
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource: {method}"
        ))),
    }
}

fn delete_options(q: &Query, body: Option<Value>) -> Result<DeleteOptions, ApiError> {
    let b = body.unwrap_or(Value::Null);
    let grace = match q.get("gracePeriodSeconds") {
        Some(g) => Some(
            g.parse::<i64>()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
        ),
        None => b.get("gracePeriodSeconds").and_then(Value::as_i64),
    };
    let mut propagation = q.get("propagationPolicy").cloned().or_else(|| {
        b.get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from)
    });
    if propagation.is_none() {
        if let Some(orphan) = q
            .get("orphanDependents")
            .map(|v| v == "true")
            .or_else(|| b.get("orphanDependents").and_then(Value::as_bool))
        {
            propagation = Some(if orphan {
                "Orphan".into()
            } else {
                "Background".into()
            });
        }
    }
    if let Some(p) = &propagation {
        if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                "propagationPolicy",
                format!("Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""),
            ));
        }
    }
    let dry_run = q.get("dryRun").map(|d| d == "All").unwrap_or(false)
        || b.get("dryRun")
            .and_then(Value::as_array)
            .map(|a| !a.is_empty())
            .unwrap_or(false);
    Ok(DeleteOptions {
        grace_period_seconds: grace,
        propagation,
        precondition_uid: b
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        precondition_rv: b
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run,
    })
}

fn list(
    cluster: &Cluster,
    t: &Target,
    labels: &LabelSelector,
    fields: &FieldSelector,
    q: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    use base64::Engine;
    let output = output_of(headers)?;
    let (items, rv) = cluster.list(&t.r, t.namespace.as_deref(), labels, fields);
    let limit: Option<usize> = match q.get("limit") {
        Some(l) if !l.is_empty() => Some(
            l.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
        _ => None,
    };
    let start: Option<(String, String)> = match q.get("continue") {
        Some(c) if !c.is_empty() => {
            let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(c)
                .map_err(|_| {
                    ApiError::bad_request("continue key is not valid: illegal base64 data")
                })?;
            let v: Value = serde_json::from_slice(&raw)
                .map_err(|_| ApiError::bad_request("continue key is not valid: invalid json"))?;
            Some((
                meta::str_at(&v, "/ns").to_string(),
                meta::str_at(&v, "/name").to_string(),
            ))
        }
        _ => None,
    };
    let mut page: Vec<Value> = items
        .into_iter()
        .filter(|o| match &start {
            Some((ns, name)) => (meta::namespace(o), meta::name(o)) > (ns.as_str(), name.as_str()),
            None => true,
        })
        .collect();
    let mut cont = None;
    if let Some(l) = limit.filter(|l| *l > 0) {
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
            &table::table(&t.r, &page, &rv, cont.as_deref(), include_object(q), true),
        ));
    }
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        metadata["continue"] = json!(c);
    }
    respond(
        200,
        &json!({"kind": format!("{}List", t.r.kind), "apiVersion": t.r.api_version(), "metadata": metadata, "items": page}),
        &t.r,
        output,
    )
}

struct WatchFilter {
    r: ResourceInfo,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl WatchFilter {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
    fn event(&self, ev: &StoreEvent) -> Option<(&'static str, Value)> {
        let ty = self.classify(ev)?;
        let mut obj = (*ev.object).clone();
        set_gvk(&self.r, &mut obj);
        Some((ty, obj))
    }
    /// The event type this watcher sees for `ev`, if any.
    fn classify(&self, ev: &StoreEvent) -> Option<&'static str> {
        if ev.key != self.r.storage_key() {
            return None;
        }
        if let Some(ns) = &self.namespace {
            if &ev.namespace != ns {
                return None;
            }
        }
        let now = self.matches(&ev.object);
        let before = ev.old.as_ref().map(|o| self.matches(o)).unwrap_or(false);
        let ty = match (ev.event_type, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            (EventType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some(ty)
    }
    /// The shared encoding of `ev` when this watcher sends it unchanged (same type, same
    /// apiVersion and kind, not a Table).
    fn shared_line(&self, ev: &StoreEvent, ty: &str) -> Option<Bytes> {
        if ty != ev.event_type.as_str()
            || ev.object.get("apiVersion").and_then(Value::as_str)
                != Some(self.r.api_version().as_str())
            || ev.object.get("kind").and_then(Value::as_str) != Some(self.r.kind.as_str())
        {
            return None;
        }
        Some(
            ev.encoded
                .get_or_init(|| {
                    line(
                        &json!({"type": ty, "object": &*ev.object}),
                        form_of(&self.r),
                    )
                    .unwrap_or_default()
                })
                .clone(),
        )
    }
}

/// One watch line of the event `v` (`{"type", "object"}`), encoded as `form`.
fn line(v: &Value, form: Form) -> Result<Bytes, Infallible> {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
    let object = v.get("object").unwrap_or(&Value::Null);
    Ok(Bytes::from(wire::watch_line(ty, object, form)))
}

async fn watch(
    st: Arc<ServerState>,
    t: &Target,
    labels: LabelSelector,
    fields: FieldSelector,
    q: &Query,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let cluster = st.cluster.clone();
    let timeout = match q.get("timeoutSeconds") {
        Some(s) if !s.is_empty() => Duration::from_secs(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {s:?}")))?,
        ),
        _ => WATCH_TIMEOUT_DEFAULT,
    };
    let bookmarks = flag(q, "allowWatchBookmarks");
    let send_initial = flag(q, "sendInitialEvents");
    let output = output_of(headers)?;
    if output == Output::MetadataList {
        return Err(ApiError::not_acceptable_message(
            "you requested PartialObjectMetadataList, but a watch sends one object per event: ask for PartialObjectMetadata",
        ));
    }
    let as_table = output == Output::Table;
    let metadata_only = output == Output::Metadata;
    let include = include_object(q);
    if send_initial && q.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    let filter = WatchFilter {
        r: t.r.clone(),
        namespace: t.namespace.clone(),
        labels,
        fields,
    };
    let rv_param = q.get("resourceVersion").cloned().unwrap_or_default();
    let mut initial: Vec<(&'static str, Value)> = Vec::new();
    let mut expired: Option<Value> = None;
    let (start_rv, mut rx) = if send_initial || rv_param.is_empty() || rv_param == "0" {
        let (items, rv, rx) = cluster
            .store
            .list_and_subscribe(&t.r.storage_key(), t.namespace.as_deref());
        for mut o in items.into_iter().filter(|o| filter.matches(o)) {
            set_gvk(&t.r, &mut o);
            initial.push(("ADDED", o));
        }
        (rv, rx)
    } else {
        let rv: u64 = rv_param.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid resource version: {rv_param:?}"))
        })?;
        match cluster.store.watch_from(rv) {
            Ok((backlog, rx)) => {
                initial.extend(backlog.iter().filter_map(|e| filter.event(e)));
                (rv, rx)
            }
            Err(oldest) => {
                let e = ApiError::expired(format!(
                    "too old resource version: {rv} ({})",
                    oldest.saturating_sub(1)
                ));
                expired = Some(json!({"type": "ERROR", "object": e.to_status()}));
                (rv, cluster.store.subscribe())
            }
        }
    };
    let (mut tx, body_rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(256);
    let bookmark = {
        let r = t.r.clone();
        move |rv: u64, end: bool| {
            let mut m = json!({"resourceVersion": rv.to_string()});
            if end {
                m["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            let object = json!({"kind": r.kind, "apiVersion": r.api_version(), "metadata": m});
            let object = if metadata_only {
                partial_metadata(&object)
            } else {
                object
            };
            json!({"type": "BOOKMARK", "object": object})
        }
    };
    let r = t.r.clone();
    let form = form_of(&r);
    let interval = st.bookmark_interval;
    let mut shutdown = st.shutdown.clone();
    tokio::spawn(async move {
        let mut sent_columns = false;
        let mut render = |ty: &str, obj: Value| -> Value {
            if as_table && ty != "ERROR" {
                let rv = meta::str_at(&obj, "/metadata/resourceVersion").to_string();
                let t = table::table(&r, &[obj], &rv, None, include, !sent_columns);
                sent_columns = true;
                json!({"type": ty, "object": t})
            } else if metadata_only && ty != "ERROR" {
                json!({"type": ty, "object": partial_metadata(&obj)})
            } else {
                json!({"type": ty, "object": obj})
            }
        };
        if let Some(e) = expired {
            let _ = tx.send(line(&e, form)).await;
            return;
        }
        let mut last_rv = start_rv;
        for (ty, obj) in initial {
            if let Some(rv) = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<u64>().ok())
            {
                last_rv = last_rv.max(rv);
            }
            if tx.send(line(&render(ty, obj), form)).await.is_err() {
                return;
            }
        }
        if send_initial
            && tx
                .send(line(&bookmark(start_rv, true), form))
                .await
                .is_err()
        {
            return;
        }
        let mut bookmarked = last_rv;
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        last_rv = ev.rv;
                        if let Some(ty) = filter.classify(&ev) {
                            let out = match filter.shared_line(&ev, ty).filter(|_| !as_table && !metadata_only) {
                                Some(b) => Ok(b),
                                None => {
                                    let mut obj = (*ev.object).clone();
                                    set_gvk(&filter.r, &mut obj);
                                    line(&render(ty, obj), form)
                                }
                            };
                            if tx.send(out).await.is_err() {
                                return;
                            }
                            bookmarked = last_rv;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let e = ApiError::expired(format!("too old resource version: {last_rv}: the watcher fell behind"));
                        let _ = tx.send(line(&json!({"type": "ERROR", "object": e.to_status()}), form)).await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = ticker.tick(), if bookmarks && !as_table => {
                    if last_rv > bookmarked {
                        if tx.send(line(&bookmark(last_rv, false), form)).await.is_err() {
                            return;
                        }
                        bookmarked = last_rv;
                    }
                }
                _ = &mut deadline => return,
                _ = shutdown.changed() => return,
            }
        }
    });
    Ok(Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(body_rx))
        .unwrap_or_default())
}

async fn pod_log(
    st: Arc<ServerState>,
    ns: &str,
    name: &str,
    q: &Query,
) -> Result<Response, ApiError> {
    let cluster = st.cluster.clone();
    let r = cluster
        .resource("", "pods")
        .ok_or_else(ApiError::path_not_found)?;
    let pod = cluster.get(&r, ns, name)?;
    let names: Vec<String> = ["/spec/containers", "/spec/initContainers"]
        .iter()
        .flat_map(|p| {
            pod.pointer(p)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| meta::str_at(&c, "/name").to_string())
        .collect();
    let container = match q.get("container").filter(|c| !c.is_empty()) {
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
    let previous = flag(q, "previous");
    let path = pod_logs::log_path(&cluster.state_dir, ns, name, &container, previous);
    let tail: Option<usize> = q.get("tailLines").and_then(|s| s.parse().ok());
    let limit: Option<usize> = q.get("limitBytes").and_then(|s| s.parse().ok());
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
    let text = |b: Vec<u8>| {
        Response::builder()
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from(b))
            .unwrap_or_default()
    };
    if !flag(q, "follow") {
        return Ok(text(first));
    }
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(64);
    let uid = meta::uid_of(&pod).to_string();
    let (ns, name) = (ns.to_string(), name.to_string());
    let mut shutdown = st.shutdown.clone();
    tokio::spawn(async move {
        if tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        let mut offset = data.len();
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
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from_stream(rx))
        .unwrap_or_default())
}
